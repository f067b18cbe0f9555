"""Convert DialogRE (Yu et al., 2020) into agefacts conversation files and a questions file
for ``agefacts eval recall``: a dialogue corpus recall was not tuned on.

DialogRE is public for research and is never part of this repository: fetch it yourself
(``git clone https://github.com/nlpdata/dialogre``, files ``data_v2/en/data/*.json``) and run

    python scripts/dialogre.py dialogre/data_v2/en/data/*.json --out dialogre/

which writes ``dialogre/conversations/d<N>.json`` (one conversation per dialogue, 50 dialogues
to a namespace) and ``dialogre/questions.jsonl``. Each turn's "Speaker N:" becomes its
``name`` (``--no-names``: left out, every turn speaker ``user``); a line said together
("Speaker 1, Speaker 2: Hi") is said by each, named by the first, and its labels are no words of it. DialogRE annotates relations
between two arguments (``x``, ``y``), not questions, so each relation becomes one question
from a template ("Who is Monica's roommate?", "What does Ross do?") whose evidence is every
turn that says its object (``y``) and either says its subject or is said by it; a relation with
no such turn, or of a kind with no template (``unanswerable``), asks nothing. The questions
are plain and lexical by design: they measure finding the turns, not paraphrase.

Then, for example:

    agefacts extract --extractor statistical --out dialogre/recorded dialogre/conversations
    agefacts load dialogre/recorded --graph dialogre
    agefacts eval recall dialogre/questions.jsonl --graph dialogre --k 10
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

# A question for each kind of relation: {x} is its subject, as DialogRE writes it.
TEMPLATES = {
    "per:alternate_names": "What else is {x} called?",
    "per:girl/boyfriend": "Who is {x} dating?",
    "per:friends": "Who are {x}'s friends?",
    "per:positive_impression": "Who does {x} like?",
    "per:negative_impression": "Who does {x} dislike?",
    "per:title": "What is {x}'s title or job?",
    "per:spouse": "Who is {x} married to?",
    "per:siblings": "Who are {x}'s brothers and sisters?",
    "per:parents": "Who are {x}'s parents?",
    "per:children": "Who are {x}'s children?",
    "per:roommate": "Who is {x}'s roommate?",
    "per:alumni": "Who went to school with {x}?",
    "per:dates": "Who did {x} go out with?",
    "per:other_family": "Who is in {x}'s family?",
    "per:visited_place": "Where did {x} go?",
    "gpe:visitors_of_place": "Who visited {x}?",
    "per:client": "Who is {x}'s client?",
    "per:age": "How old is {x}?",
    "per:neighbor": "Who is {x}'s neighbour?",
    "per:boss": "Who is {x}'s boss?",
    "per:subordinate": "Who works for {x}?",
    "per:place_of_residence": "Where does {x} live?",
    "gpe:residents_of_place": "Who lives in {x}?",
    "per:employee_or_member_of": "Where does {x} work?",
    "org:employees_or_members": "Who works at {x}?",
    "per:works": "What work did {x} make?",
    "per:pet": "What pet does {x} have?",
    "per:acquaintance": "Who does {x} know?",
    "per:place_of_work": "Where does {x} work?",
    "per:origin": "Where is {x} from?",
    "per:schools_attended": "What school did {x} go to?",
    "org:students": "Who studied at {x}?",
    "per:date_of_birth": "When was {x} born?",
    "per:major": "What did {x} study?",
    "per:place_of_birth": "Where was {x} born?",
    "gpe:births_in_place": "Who was born in {x}?",
}
# "Speaker 2: ..." or, said together, "Speaker 1, Speaker 2: ...".
_SPEAKER = re.compile(r"^(Speaker \d+(?:\s*,\s*Speaker \d+)*)\s*:\s*(.*)$", re.S)
PER_NAMESPACE = 50


def _says(text: str, what: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(what.casefold()) + r"(?!\w)", text.casefold()) is not None


def convert(dialogues: list[Any], names: bool = True) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    convs: list[dict[str, Any]] = []
    questions: list[dict[str, Any]] = []
    for n, (turns, relations) in enumerate(dialogues):
        namespace = f"dialogre-{n // PER_NAMESPACE:02d}"
        cid = f"d{n:04d}"
        said: list[tuple[list[str], str]] = []
        for line in turns:
            m = _SPEAKER.match(line)
            said.append(([w.strip() for w in m.group(1).split(",")], m.group(2)) if m else ([], line))
        out = []
        for who, text in said:
            turn: dict[str, Any] = {"speaker": "user", "text": text}
            if names and who:
                turn["name"] = who[0]  # a turn has one name: the first of those who said it together
            out.append(turn)
        convs.append({"id": cid, "namespace": namespace, "title": f"DialogRE dialogue {n}", "turns": out})
        asked: set[str] = set()
        for rel in relations:
            for kind in rel["r"]:
                template = TEMPLATES.get(kind)
                if template is None:
                    continue
                question = template.format(x=rel["x"])
                evidence = [
                    {"conversation": cid, "message": i}
                    for i, (who, text) in enumerate(said)
                    if _says(text, rel["y"]) and (_says(text, rel["x"]) or rel["x"] in who)
                ]
                if evidence and question not in asked:
                    asked.add(question)
                    questions.append(
                        {"question": question, "namespace": namespace, "evidence": evidence, "category": kind}
                    )
    return convs, questions


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("files", type=Path, nargs="+", help="DialogRE's data_v2/en/data/*.json")
    p.add_argument("--out", type=Path, required=True, help="folder to write conversations/ and questions.jsonl into")
    p.add_argument("--no-names", action="store_true", help="leave out each turn's 'Speaker N' name")
    args = p.parse_args(argv)
    dialogues: list[Any] = []
    for path in args.files:
        try:
            dialogues += json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            print(f"dialogre.py: cannot read {path}: {exc}", file=sys.stderr)
            return 2
    convs, questions = convert(dialogues, names=not args.no_names)
    (args.out / "conversations").mkdir(parents=True, exist_ok=True)
    for c in convs:
        path = args.out / "conversations" / f"{c['id']}.json"
        path.write_text(json.dumps(c, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    with (args.out / "questions.jsonl").open("w", encoding="utf-8") as qf:
        for q in questions:
            qf.write(json.dumps(q, ensure_ascii=False) + "\n")
    print(f"{len(convs)} conversations and {len(questions)} questions written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
