"""Small builders shared by the tests."""

from __future__ import annotations

from typing import Any

from agefacts.models import Conversation


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
