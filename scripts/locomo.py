"""Convert LoCoMo (Maharana et al., 2024) into agefacts conversation files and a questions file
for ``agefacts eval recall``.

LoCoMo is public under a research licence and is never part of this repository: fetch it
yourself (``git clone https://github.com/snap-research/LoCoMo``, file ``data/locomo10.json``)
and run

    python scripts/locomo.py path/to/locomo10.json --out locomo/

which writes ``locomo/conversations/<sample>-s<session>.json`` (one conversation per session,
one namespace per LoCoMo conversation: the sample's id) and ``locomo/questions.jsonl`` (the
questions of categories 1-4 that name evidence turns, by default; ``--categories`` picks
others). LoCoMo's two people are its ``speaker_a`` (written as ``user``) and ``speaker_b``
(``assistant``); each turn keeps its person's name (``name``). With ``--no-names`` every turn
is written as a chat app stores it: speaker ``user``, no name (recall measured without the
names a question asks by). Every turn of a session is
sent at the session's date and time. A photo a person shares is not part of what they say and
is left out, as are LoCoMo's own summaries and observations.

Then, for example:

    agefacts extract --extractor statistical --out locomo/recorded locomo/conversations
    agefacts load locomo/recorded --graph locomo
    agefacts eval recall locomo/questions.jsonl --graph locomo
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_EVIDENCE = re.compile(r"D(\d+):(\d+)")


def session_time(text: str) -> str:
    """LoCoMo's "1:56 pm on 8 May, 2023" as "2023-05-08T13:56:00"."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").isoformat()


def _turn(t: dict[str, Any], role: dict[str, str], at: str, names: bool) -> dict[str, Any]:
    if not names:
        return {"speaker": "user", "text": t["text"], "at": at}
    return {"speaker": role[t["speaker"]], "name": t["speaker"], "text": t["text"], "at": at}


def convert(
    sample: dict[str, Any], categories: set[int], names: bool = True
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    conv = sample["conversation"]
    namespace = sample["sample_id"]
    role = {conv["speaker_a"]: "user", conv["speaker_b"]: "assistant"}
    out: list[dict[str, Any]] = []
    place: dict[str, tuple[str, int]] = {}  # LoCoMo's "D3:7" -> (conversation, ordinal)
    sessions = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
    for n in sessions:
        turns = conv[f"session_{n}"]
        if not turns:
            continue
        cid = f"{namespace}-s{n}"
        at = session_time(conv[f"session_{n}_date_time"])
        for i, t in enumerate(turns):
            m = _EVIDENCE.fullmatch(t["dia_id"])
            if m is not None:
                place[f"D{int(m.group(1))}:{int(m.group(2))}"] = (cid, i)
        out.append(
            {
                "id": cid,
                "namespace": namespace,
                "title": f"LoCoMo {namespace}, session {n}",
                "turns": [_turn(t, role, at, names) for t in turns],
            }
        )
    questions = []
    for q in sample["qa"]:
        if q["category"] not in categories:
            continue
        refs = []
        for ev in q.get("evidence") or []:
            # A few references are written "D8:6; D9:17", "D30:05" or with a stray space.
            for m in _EVIDENCE.finditer(ev):
                ref = place.get(f"D{int(m.group(1))}:{int(m.group(2))}")
                if ref is not None and {"conversation": ref[0], "message": ref[1]} not in refs:
                    refs.append({"conversation": ref[0], "message": ref[1]})
        if refs:
            questions.append(
                {
                    "question": q["question"],
                    "namespace": namespace,
                    "evidence": refs,
                    "category": CATEGORIES.get(q["category"], str(q["category"])),
                }
            )
    return out, questions


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("locomo", type=Path, help="LoCoMo's data/locomo10.json")
    p.add_argument("--out", type=Path, required=True, help="folder to write conversations/ and questions.jsonl into")
    p.add_argument("--categories", default="1,2,3,4", help="question categories to keep (default 1,2,3,4)")
    p.add_argument("--samples", type=int, default=None, help="only the first N conversations")
    p.add_argument(
        "--no-names", action="store_true", help="write every turn as speaker user with no name, as a chat app stores it"
    )
    args = p.parse_args(argv)
    try:
        data = json.loads(args.locomo.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"locomo.py: cannot read {args.locomo}: {exc}", file=sys.stderr)
        return 2
    cats = {int(c) for c in args.categories.split(",") if c.strip()}
    (args.out / "conversations").mkdir(parents=True, exist_ok=True)
    n_conv = n_q = 0
    with (args.out / "questions.jsonl").open("w", encoding="utf-8") as qf:
        for sample in data[: args.samples]:
            convs, questions = convert(sample, cats, names=not args.no_names)
            for c in convs:
                path = args.out / "conversations" / f"{c['id']}.json"
                path.write_text(json.dumps(c, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
            for q in questions:
                qf.write(json.dumps(q, ensure_ascii=False) + "\n")
            n_conv += len(convs)
            n_q += len(questions)
    print(f"{n_conv} conversations and {n_q} questions written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
