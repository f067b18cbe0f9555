"""Retrieval for an assistant: link a question to known entities, return the facts about
them with their citations, and never serve a fact the ontology does not allow.

Linking matches each entity's names, mentions and role words ("my husband") as token
sequences in the question, longest first, and a matched span cannot link again: "new york
city" links before "york", and "york" then finds nothing left to match. A question that names
nobody links nobody and returns nothing rather than guessing.

A fact is served only when its predicate is in the ontology, its subject and object types fit
the predicate's signature, and it has the right kind of object (entity or value). The rest is
listed under ``rejected`` with the reason, so a store written by an older or careless loader
cannot pass a schema-violating fact off as evidence.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from .db import Database
from .ontology import Ontology
from .query import facts as facts_of
from .query import run_named

__all__ = [
    "Answer",
    "Linked",
    "ROLE_WORDS",
    "ask",
    "check",
    "link",
]

_TOKEN = re.compile(r"\w+", re.UNICODE)

ROLE_WORDS = {
    "spouse_of": ["husband", "wife", "spouse"],
    "partner_of": ["partner", "boyfriend", "girlfriend"],
    "sibling_of": ["sister", "brother", "sibling"],
    "parent_of": ["son", "daughter", "child", "kid"],
    "child_of": ["mother", "father", "mum", "mom", "dad", "parent"],
    "friend_of": ["friend"],
    "colleague_of": ["colleague", "coworker"],
    "boss_of": ["boss", "manager"],
}
"""Words that name an entity by its role to the user (``attrs.rel``), said with "my"."""


# Pronouns and determiners are not names: a mention like "it" alone links nothing.
_STOP = {"it", "he", "she", "they", "them", "this", "that", "someone", "somebody", "the", "a", "an", "i", "me", "you"}


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(unicodedata.normalize("NFC", text).casefold())


@dataclass(frozen=True)
class Linked:
    key: str
    namespace: str
    name: str | None
    surface: str  # the words of the question that linked it


@dataclass
class Answer:
    question: str
    entities: list[Linked] = field(default_factory=list)
    facts: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "entities": [e.__dict__ for e in self.entities],
            "facts": self.facts,
            "rejected": self.rejected,
        }


def _inventory(db: Database, namespace: str | None) -> list[tuple[list[str], dict[str, Any]]]:
    rows = run_named(db, "entity_names", {"namespace": namespace}).dicts()
    names: list[tuple[list[str], dict[str, Any]]] = []
    for r in rows:
        surfaces = set()
        if r["name"]:
            surfaces.add(r["name"])
        for m in r["mentions"] or []:
            surfaces.add(m)
        rel = (r["attrs"] or {}).get("rel", "") if isinstance(r["attrs"], dict) else ""
        pred, _, target = rel.partition(":")
        if target == "user":
            for word in ROLE_WORDS.get(pred, []):
                surfaces.add(f"my {word}")
        if r["role"] == "user":
            continue  # "I" and "me" are not names; ask about the user with the facts command
        for s in surfaces:
            toks = _tokens(s)
            if toks and not (len(toks) == 1 and toks[0] in _STOP):
                names.append((toks, r))
    return names


def link(db: Database, question: str, namespace: str | None = None) -> list[Linked]:
    """The entities the question names, in the order they were matched (longest first)."""
    q = _tokens(question)
    claimed = [False] * len(q)
    out: list[Linked] = []
    seen: set[str] = set()
    inventory = sorted(
        _inventory(db, namespace), key=lambda item: (-len(item[0]), -len(" ".join(item[0])), item[1]["key"])
    )
    for toks, ent in inventory:
        n = len(toks)
        for i in range(len(q) - n + 1):
            if q[i : i + n] == toks and not any(claimed[i : i + n]):
                for j in range(i, i + n):
                    claimed[j] = True
                if ent["key"] not in seen:
                    seen.add(ent["key"])
                    out.append(Linked(ent["key"], ent["namespace"], ent["name"], " ".join(toks)))
    return out


def check(fact: dict[str, Any], ontology: Ontology) -> str | None:
    """Why the ontology does not allow this fact, or None when it does."""
    spec = ontology.predicate(fact["predicate"])
    if spec is None:
        return f"predicate {fact['predicate']!r} is not in the ontology"
    if spec.subject is not None and fact.get("subject_type") not in spec.subject:
        return f"{spec.name!r} takes a subject of type {'|'.join(spec.subject)}, not {fact.get('subject_type')}"
    if fact.get("object_key") is not None:
        if not spec.takes_object:
            return f"{spec.name!r} takes a literal value, not an entity"
        if spec.object is not None and fact.get("object_type") not in spec.object:
            return f"{spec.name!r} takes an object of type {'|'.join(spec.object)}, not {fact.get('object_type')}"
    elif not spec.takes_value:
        return f"{spec.name!r} takes an entity as its object, not a literal"
    return None


def ask(
    db: Database,
    question: str,
    ontology: Ontology,
    *,
    namespace: str | None = None,
    k: int = 10,
    valid_at: str | None = None,
    known_at: str | None = None,
) -> Answer:
    """Facts about the entities a question names, each with its quote and source message."""
    answer = Answer(question)
    answer.entities = link(db, question, namespace)
    seen: set[str] = set()
    for ent in answer.entities:
        for row in facts_of(db, ent.key, valid_at=valid_at, known_at=known_at).dicts():
            if row["statement"] in seen:
                continue
            seen.add(row["statement"])
            why = check(row, ontology)
            if why is None:
                answer.facts.append(row)
            else:
                answer.rejected.append({**row, "reason": why})
    answer.facts = answer.facts[: max(0, k)]
    return answer
