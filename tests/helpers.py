"""Small builders shared by the tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from importlib import resources
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from agefacts.models import Conversation
from agefacts.ontology import default_ontology


def claim(
    subject: str,
    predicate: str,
    quote: str,
    *,
    obj: str | None = None,
    value: Any = None,
    polarity="asserted",
    tense="current",
    **kw,
) -> dict:
    d: dict[str, Any] = {"subject": subject, "predicate": predicate, "quote": quote}
    if obj is not None:
        d["object"] = obj
    if value is not None:
        d["value"] = value
    if polarity is not None:
        d["polarity"] = polarity
    if tense is not None:
        d["tense"] = tense
    d.update(kw)
    return d


def user_turn(text: str, at: str, entities=(), statements=(), followups=()) -> dict:
    return {
        "speaker": "user",
        "text": text,
        "at": at,
        "recorded": {"entities": list(entities), "statements": list(statements), "followups": list(followups)},
    }


def conversation(cid: str, turns: list[dict], namespace: str = "test", **kw) -> Conversation:
    return Conversation.model_validate({"id": cid, "namespace": namespace, "turns": turns, **kw})


def place(handle: str, name: str) -> dict:
    return {"handle": handle, "type": "Place", "mention": name, "resolution": "resolved", "name": name}


# What a model replies for "I live in Porto." and "I love fado." (the Memory tests' endpoint).
LIVES = {
    "entities": [{"handle": "e1", "type": "Place", "mention": "Porto", "resolution": "resolved", "name": "Porto"}],
    "statements": [
        {"subject": "user", "predicate": "lives_in", "object": "e1", "quote": "I live in Porto"}
        | {"polarity": "asserted", "tense": "current"}
    ],
    "followups": [],
}
LIKES = {
    "entities": [],
    "statements": [
        {"subject": "user", "predicate": "likes", "value": "fado", "quote": "I love fado"}
        | {"polarity": "asserted", "tense": "current"}
    ],
    "followups": [],
}


def at_once(work, n: int) -> list[BaseException]:
    """Run ``work(i)`` for i in range(n), each in a thread, released together; what any of
    them raised."""
    import threading

    errors: list[BaseException] = []
    barrier = threading.Barrier(n)

    def run(i: int) -> None:
        try:
            barrier.wait(10)
            work(i)
        except BaseException as exc:  # returned to the test, which reports it
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return errors


# -- shared data ------------------------------------------------------------------------------------
EXAMPLES = Path(str(resources.files("agefacts.examples")))
ONTO = default_ontology()
VIAS = ["bulk", "cypher"]  # both load paths


def likes(cid: str, thing: str, at: str, title: str | None = None, text: str | None = None):
    text = text or f"I like {thing}"
    return conversation(
        cid,
        [
            user_turn(
                text, at, statements=[claim("user", "likes", f"I like {thing}" if thing in text else text, value=thing)]
            )
        ],
        title=title,
    )


NUMBERS = [
    1e16,
    -0.0,
    1.5,
    2.0,
    7,
    -3,
    1e-7,
    2**63 - 1,
    -(2**63),
    4503599627370495.0,
    1234567890123456.5,
    999999999999999.0,
]


def numbers_conversation(values, cid: str = "numbers"):
    text = " ".join(f"n{i}" for i in range(len(values)))
    return conversation(
        cid,
        [
            user_turn(
                text,
                "2024-01-01T10:00:00Z",
                entities=[
                    {
                        "handle": "e1",
                        "type": "Person",
                        "mention": "n0",
                        "resolution": "resolved",
                        "name": "Tom\n",
                        "attrs": {"rel\n": "friend_of:user", "nick": "T"},
                    }
                ],
                statements=[claim("user", "speaks", f"n{i}", value=v) for i, v in enumerate(values)]
                + [claim("e1", "job_title", "n0", value="cook ")],
            )
        ],
    )


def shop(cid: str, name: str, at: str):
    text = f"I work at {name} now"
    return conversation(
        cid,
        [
            user_turn(
                text,
                at,
                entities=[
                    {"handle": "e1", "type": "Organization", "mention": name, "resolution": "resolved", "name": name}
                ],
                statements=[claim("user", "works_at", text, obj="e1")],
            )
        ],
        namespace="shop",
    )


# -- hypothesis strategies ----------------------------------------------------------------------------
TIMES = st.sampled_from(["2024", "2024-03", "2024-03-01", "2024-03-01T10:00:00Z", "2024-06", "2025-01-01", "2025"])


@st.composite
def spelled_times(draw, dated: bool = True):
    """A time as data spells it: a year, a month or a day (when ``dated``), or a datetime with
    or without a zone (offsets of whole quarter hours) and with or without a fraction of a
    second, in Python's or JavaScript's form."""
    dt = draw(st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2027, 12, 31)))
    forms = ["py", "js", "floating", "whole"] + (["year", "month", "day"] if dated else [])
    form = draw(st.sampled_from(forms))
    if form == "year":
        return f"{dt.year:04d}"
    if form == "month":
        return f"{dt.year:04d}-{dt.month:02d}"
    if form == "day":
        return dt.date().isoformat()
    if form == "floating":
        return dt.isoformat()
    zone = timezone(timedelta(minutes=15 * draw(st.integers(-48, 56))))
    aware = dt.replace(tzinfo=zone)
    if form == "js":
        u = aware.astimezone(UTC)
        return u.strftime("%Y-%m-%dT%H:%M:%S.") + f"{u.microsecond // 1000:03d}Z"
    if form == "whole":
        return aware.replace(microsecond=0).isoformat()
    return aware.isoformat()


KNOWN = st.sampled_from(
    ["2024-01-01T10:00:00Z", "2024-04-01T10:00:00Z", "2024-07-01T10:00:00Z", "2025-02-01T10:00:00Z"]
)


def fresh(db):
    """``db``'s graph, dropped and made again: empty."""
    db.drop_graph()
    db.ensure_graph()
    return db


def fuzz(examples: int):
    """Hypothesis settings for a generated test on the engine; AGEFACTS_FUZZ_EXAMPLES runs more
    examples than CI does, for a deeper search."""
    import os

    from hypothesis import HealthCheck, settings

    return settings(
        max_examples=int(os.environ.get("AGEFACTS_FUZZ_EXAMPLES", str(examples))),
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
