"""A synthetic corpus: conversations of many people, written as a model would record them
(entities met again across a person's conversations, relational and literal statements,
single-valued predicates that supersede each other, weekly activities), made from a seed so
that every run makes the same ones. ``agefacts bench`` loads it, and the tests that need
realistic volume do too."""

from __future__ import annotations

import json
import random
import time
from typing import Any

__all__ = ["edit", "entity", "generate", "more_of", "statement"]

_FIRST = [
    "Ana",
    "Ben",
    "Chloé",
    "Dmitri",
    "Eun-ji",
    "Farah",
    "Gustavo",
    "Hiro",
    "Ines",
    "Jonas",
    "Kemi",
    "Lars",
    "Maya",
    "Nikhil",
    "Olga",
    "Pablo",
]
_PLACES = [
    "Lyon",
    "Oslo",
    "Bergen",
    "Kyoto",
    "Lagos",
    "Quito",
    "Porto",
    "Tallinn",
    "Hobart",
    "Montréal",
    "Da Nang",
    "Graz",
]
_ORGS = ["Acme", "Globex", "Initech", "Umbrella Health", "Stark Labs", "Wayne Freight", "Hooli", "Vandelay Imports"]
_LIKES = [
    "jazz",
    "climbing",
    "sourdough",
    "chess",
    "gardening",
    "sci-fi novels",
    "jollof rice",
    "cycling",
    "pottery",
    "karaoke",
]
_JOBS = ["nurse", "data engineer", "teacher", "architect", "chef", "pilot", "translator", "welder"]
_ACTS = [("yoga", "TU"), ("choir", "WE"), ("five-a-side", "TH"), ("Spanish class", "MO"), ("book club", "FR")]


def entity(handle: str, typ: str, name: str, **attrs: str) -> dict[str, Any]:
    """A resolved entity entry of a recording, named as it is mentioned."""
    e: dict[str, Any] = {"handle": handle, "type": typ, "mention": name, "resolution": "resolved", "name": name}
    if attrs:
        e["attrs"] = attrs
    return e


def statement(
    subject: str, predicate: str, quote: str, obj: str | None = None, value: Any = None, **kw: Any
) -> dict[str, Any]:
    """An asserted, current statement of a recording, with ``object`` (a handle) or ``value``
    and any other field given."""
    d = {
        "subject": subject,
        "predicate": predicate,
        "quote": quote,
        "polarity": "asserted",
        "tense": "current",
        "confidence": 0.9,
    }
    if obj is not None:
        d["object"] = obj
    if value is not None:
        d["value"] = value
    d.update(kw)
    return d


def _conversations_for(statements: int, per_conversation: int) -> int:
    return max(1, -(-statements // per_conversation))


def generate(statements: int, per_conversation: int = 10, seed: int = 7) -> list[dict[str, Any]]:
    """Conversations (as JSON-ready dicts) holding about ``statements`` statements."""
    rng = random.Random(seed)
    n_conv = _conversations_for(statements, per_conversation)
    out: list[dict[str, Any]] = []
    made = 0
    for c in range(n_conv):
        ns = f"person{c // 20:05d}"  # twenty conversations per person: entities recur
        day = 86400 * (c % 20 * 9 + rng.randrange(0, 7))
        base = 1_700_000_000 + day
        turns: list[dict[str, Any]] = []
        want = min(per_conversation, statements - made)
        handles: dict[tuple[str, str], str] = {}

        def handle(
            typ: str, name: str, handles: dict[tuple[str, str], str] = handles
        ) -> tuple[str, dict[str, Any] | None]:
            key = (typ, name)
            if key in handles:
                return handles[key], None
            h = f"e{len(handles) + 1}"
            handles[key] = h
            return h, entity(h, typ, name)

        t = 0
        while want > 0:
            ents, stmts, parts = [], [], []
            for _ in range(min(want, rng.choice((1, 2, 3)))):
                kind = rng.random()
                if kind < 0.18:
                    place = rng.choice(_PLACES)
                    h, e = handle("Place", place)
                    month = f"{2023 + c % 20 // 6}-{rng.randrange(1, 13):02d}"
                    q = f"we moved to {place} in {month}"
                    stmts.append(statement("user", "lives_in", q, obj=h, valid_from=month))
                elif kind < 0.32:
                    org = rng.choice(_ORGS)
                    h, e = handle("Organization", org)
                    q = f"I work at {org} now"
                    stmts.append(statement("user", "works_at", q, obj=h))
                elif kind < 0.52:
                    who = rng.choice(_FIRST)
                    h, e = handle("Person", who)
                    q = f"my friend {who}"
                    stmts.append(statement("user", "friend_of", q, obj=h))
                    if rng.random() < 0.5:
                        job = rng.choice(_JOBS)
                        q2 = f"{who} is a {job}"
                        stmts.append(statement(h, "job_title", q2, value=job))
                        parts.append(q2)
                elif kind < 0.72:
                    like = rng.choice(_LIKES)
                    e = None
                    q = f"I really like {like}"
                    stmts.append(statement("user", "likes", q, value=like))
                elif kind < 0.86:
                    act, day_ = rng.choice(_ACTS)
                    h, e = handle("Activity", act)
                    q = f"I go to {act} every week"
                    stmts.append(statement("user", "attends", q, obj=h, recurrence=f"FREQ=WEEKLY;BYDAY={day_}"))
                else:
                    job = rng.choice(_JOBS)
                    e = None
                    q = f"I'm a {job}"
                    stmts.append(statement("user", "job_title", q, value=job))
                if e:
                    ents.append(e)
                parts.append(q)
            stmts = stmts[:want]
            want -= len(stmts)
            made += len(stmts)
            at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(base + t * 60))
            turns.append(
                {
                    "speaker": "user",
                    "text": ". ".join(parts) + ".",
                    "at": at,
                    "recorded": {"entities": ents, "statements": stmts, "followups": []},
                }
            )
            turns.append({"speaker": "assistant", "text": "Thanks, noted.", "at": at})
            t += 1
        out.append({"id": f"bench-{c:06d}", "namespace": ns, "model": "bench-generator", "turns": turns})
    return out


def more_of(statements: int, per_conversation: int = 10, share: float = 0.1) -> list[dict[str, Any]]:
    """Conversations of the people :func:`generate` made for ``statements``, holding about
    ``share`` as many statements again: more of what the same people said, for a load into a
    graph that holds them (their entities met again, their one-value facts' chains longer).
    Numbered on from the last conversation generated, so each is new; dated as
    :func:`generate` dates them, among the times said before (not after them all), so each
    chain they touch is read again whole."""
    first = _conversations_for(statements, per_conversation)
    people = -(-first // 20)
    extra = generate(statements + max(1, int(statements * share)), per_conversation)[first:]
    return [{**c, "namespace": f"person{i % people:05d}"} for i, c in enumerate(extra)]


def edit(conv: dict[str, Any], seed: int) -> dict[str, Any]:
    """Another version of a generated conversation: its first user turn says one thing more
    and its last statement is taken back, so both retraction and new writes happen."""
    rng = random.Random(seed)
    out: dict[str, Any] = json.loads(json.dumps(conv))
    users = [t for t in out["turns"] if t["speaker"] == "user" and t["recorded"]["statements"]]
    first, last = users[0], users[-1]
    like = rng.choice(_LIKES)
    extra = f"Lately I also like {like} (edit {seed})"
    first["text"] = first["text"] + " " + extra + "."
    first["recorded"]["statements"].append(statement("user", "likes", extra, value=f"{like} {seed}"))
    if len(last["recorded"]["statements"]) > 1:
        last["recorded"]["statements"].pop(0)
    return out
