"""Taking a fact back by hand: :func:`correction` builds the conversation that says a fact was
wrong (and, given, what is right), to be loaded, replayed, exported and forgotten like any
other."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .db import Database
from .errors import QueryError, UsageError
from .keys import entity_key, user_key
from .models import Conversation, Entity
from .named import run_named
from .reads import TimeArg, as_of, find_entities

__all__ = ["correction"]


def correction(
    db: Database,
    entity: str,
    predicate: str,
    said: str,
    *,
    namespace: str,
    by: str,
    instead: str | None = None,
    reason: str | None = None,
    at: TimeArg = None,
) -> Conversation:
    """A conversation that takes one fact back: ``entity`` (a key, a name, or ``user``)
    ``predicate`` ``said`` (the object's name or the value, as the facts show it) was wrong,
    and, with ``instead``, what is right. It is authored (no model; ``by`` says who, ``at`` when,
    default now), holds one message that says so, and is loaded, replayed, exported and
    forgotten like any conversation: its negated statement, marked as a correction, withdraws
    what was said of the fact up to ``at``. Its id is ``correction-`` and a hash of what it says."""
    for name, text in (("namespace", namespace), ("by", by), ("predicate", predicate), ("said", said)):
        if not isinstance(text, str) or not text.strip():
            raise UsageError(f"{name} must be non-empty text, not {text!r}")
    found = find_entities(db, entity, namespace)
    if not found:
        raise QueryError(f"no entity {entity!r} in namespace {namespace!r}: give a key, a name or a mention")
    when = as_of(None, at)[1]
    subject = found[0]
    rows = [
        r
        for r in run_named(db, "fact_statements", {"entity": subject["key"], "known_at": when}).dicts()
        if r["subject_key"] == subject["key"] and r["predicate"] == predicate and not r["ends_fact"]
    ]
    target = said.strip().casefold()
    match = [r for r in rows if str(r["object"] if r["object"] is not None else r["value"]).casefold() == target]
    if not match:
        known = sorted({str(r["object"] if r["object"] is not None else r["value"]) for r in rows})
        listed = ", ".join(map(repr, known)) if known else "none"
        raise QueryError(
            f"{subject['name']} has no {predicate} {said!r} in namespace {namespace!r} to correct "
            f"(what was said of {predicate}: {listed})"
        )
    old = match[0]

    def declared(key: str, handle: str) -> dict[str, Any] | None:
        """The entity entry that keys to ``key`` (None for the owner, the handle ``user``)."""
        if key == user_key(namespace):
            return None
        ((typ, name, attrs),) = db.cypher(
            "MATCH (n) WHERE n.k = $k RETURN n.type, n.name, n.attrs", {"k": key}, ("type", "name", "attrs")
        ).rows
        ent: dict[str, Any] = {"handle": handle, "type": typ, "mention": name or handle, "resolution": "resolved"}
        if name:
            ent["name"] = name
        rel = (attrs or {}).get("rel")
        if rel:
            ent["attrs"] = {"rel": rel}
        if entity_key(namespace, "", Entity.model_validate(ent)) != key:
            raise QueryError(
                f"{ent['mention']!r} is a placeholder of one conversation and cannot be named from another: "
                "forget or correct that conversation instead"
            )
        return ent

    entities: list[dict[str, Any]] = []
    handle_of: dict[str, str] = {}
    for key in (subject["key"], old["object_key"]):
        if key is not None and key not in handle_of:
            ent = declared(key, f"e{len(entities) + 1}")
            handle_of[key] = ent["handle"] if ent else "user"
            if ent:
                entities.append(ent)
    shown = f"{subject['name']} {predicate} {said}"
    text = f"{by} corrects: {shown} is not so"
    statements: list[dict[str, Any]] = [
        {
            "subject": handle_of[subject["key"]],
            "predicate": predicate,
            **({"object": handle_of[old["object_key"]]} if old["object_key"] else {"value": old["value"]}),
            "quote": shown,
            "polarity": "negated",
            "tense": "current",
            "correction": True,
        }
    ]
    if instead is not None:
        fix: dict[str, Any] = {"value": instead}
        if old["object_key"] is not None:
            again = find_entities(db, instead, namespace)
            if again:
                ent = declared(again[0]["key"], f"e{len(entities) + 1}")
            else:
                # Named here for the first time ("it is Bath", Bath never mentioned): an entity of
                # the type of the one it replaces.
                ent = {
                    "handle": f"e{len(entities) + 1}",
                    "type": old["object_type"],
                    "mention": instead,
                    "resolution": "resolved",
                    "name": instead,
                }
            if ent:
                entities.append(ent)
            fix = {"object": ent["handle"] if ent else "user"}
        text += f"; it is {instead}"
        statements.append(
            {"subject": handle_of[subject["key"]], "predicate": predicate, **fix, "quote": f"it is {instead}",
             "polarity": "asserted", "tense": "current"}
        )  # fmt: skip
    if reason:
        text += f" ({reason})"
    ident = json.dumps([namespace, subject["key"], predicate, said, instead, by, when], ensure_ascii=False)
    return Conversation.model_validate(
        {
            "id": "correction-" + hashlib.sha256(ident.encode()).hexdigest()[:16],
            "namespace": namespace,
            "title": f"correction by {by}",
            "notes": reason,
            "turns": [
                {
                    # The owner's turn (what the gate reads), said in the words of who corrected:
                    # shown as theirs wherever the message is shown.
                    "speaker": "user",
                    "name": by,
                    "text": text,
                    "at": when,
                    "recorded": {"entities": entities, "statements": statements, "followups": []},
                }
            ],
        }
    )
