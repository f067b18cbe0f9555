"""Retrieval for an assistant: link a question to known entities, return the facts about
them with their citations, and never serve a fact the ontology does not allow.

Linking matches each entity's names, mentions and role words ("my husband") as token
sequences in the question, longest first, and a matched span cannot link again: "new york
city" links before "york", and "york" then finds nothing left to match. A first-person word
left over ("I", "me", "my") links the namespace's owner ("Where do I live?"), but "my" in
"my sister" is the sister's, and "me" in "tell me about Kyoto" is the one asking. A question
that names nobody links nobody and returns nothing rather than guessing, with the reason.

Facts are ranked by the question: those whose predicate its words name (the predicate's
name and the ``words`` the ontology gives it: "live", "home", "moved" for ``lives_in``)
first, then the most recent on the valid-time axis; ``k`` bounds the answer.

A fact is served only when its predicate is in the ontology, its subject and object types fit
the predicate's signature, and it has the right kind of object (entity or value). The rest is
listed under ``rejected`` with the reason, so a store written by an older or careless loader
cannot pass a schema-violating fact off as evidence.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from .db import AsyncDatabase, Database
from .ontology import Ontology
from .query import TimeArg, check_scope, facts_of_keys, facts_of_keys_async, run_named, run_named_async

__all__ = [
    "Answer",
    "FIRST_PERSON",
    "Linked",
    "ROLE_WORDS",
    "answer_from",
    "ask",
    "ask_async",
    "check",
    "context_line",
    "link",
    "link_rows",
    "rank",
    "relevance",
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
    reason: str | None = None  # why nothing is served, when nothing is

    def to_json(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "entities": [e.__dict__ for e in self.entities],
            "facts": self.facts,
            "rejected": self.rejected,
            "reason": self.reason,
        }

    def context(self) -> str:
        """A prompt-ready block: one line per fact with what it says, when it was true, and
        the words it was read from (conversation, message and the time it was sent), so an
        assistant can cite it."""
        if not self.facts:
            return f"(no facts: {self.reason or 'nothing found'})"
        return "\n".join(context_line(i, f) for i, f in enumerate(self.facts, 1))


def context_line(n: int, f: dict[str, Any]) -> str:
    """One fact as one line of a prompt-ready block."""
    what = f["object"] if f.get("object_key") is not None else json.dumps(f["value"], ensure_ascii=False)
    since, until = f.get("valid_from"), f.get("valid_until")
    valid = f"from {since or 'the start'}" + (f" until {until}" if until else "")
    if f.get("recurrence"):
        valid += f", repeating {f['recurrence']}"
    said = json.dumps(f.get("quote"), ensure_ascii=False)
    return (
        f"[{n}] {f['subject']} {f['predicate']} {what} ({valid}; known since {f['recorded_at']}) "
        f"- said {said} in conversation {f['conversation']} message {f['message']} at {f.get('quoted_at')}"
    )


FIRST_PERSON = frozenset({"i", "me", "my", "mine", "myself"})
"""Words by which the namespace's owner speaks of themself: a question that uses one (not as
part of a role such as "my sister") is about the owner."""

# "Tell me about Kyoto" asks about Kyoto: "me" after a verb of asking is the one asking.
_ASKING = frozenset({"tell", "show", "remind", "give", "let", "help", "ask", "teach", "explain"})

_NAME_PARTS_IGNORED = {"in", "at", "of", "to", "from", "has"}


def _surfaces(rows: list[dict[str, Any]]) -> list[tuple[list[str], dict[str, Any]]]:
    """What each entity can be called, as token sequences."""
    names: list[tuple[list[str], dict[str, Any]]] = []
    for r in rows:
        if r["role"] == "user":
            continue  # the owner is found by first-person words, below
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
        for s in surfaces:
            toks = _tokens(s)
            if toks and not (len(toks) == 1 and toks[0] in _STOP):
                names.append((toks, r))
    return names


def link_rows(question: str, rows: list[dict[str, Any]], namespace: str | None) -> list[Linked]:
    """The entities a question names, given every entity's names (the ``entity_names``
    query's rows), in the order they were matched: longest names first, then the owner when
    the question speaks in the first person and a namespace says whose."""
    q = _tokens(question)
    claimed = [False] * len(q)
    out: list[Linked] = []
    seen: set[str] = set()
    inventory = sorted(_surfaces(rows), key=lambda item: (-len(item[0]), -len(" ".join(item[0])), item[1]["key"]))
    spans: set[tuple[int, int]] = set()
    for toks, ent in inventory:
        n = len(toks)
        for i in range(len(q) - n + 1):
            # A span already matched links again only by the very same words: every entity
            # that "my husband" names (in several namespaces, say) is linked, none chosen.
            if q[i : i + n] == toks and ((i, n) in spans or not any(claimed[i : i + n])):
                spans.add((i, n))
                for j in range(i, i + n):
                    claimed[j] = True
                if ent["key"] not in seen:
                    seen.add(ent["key"])
                    out.append(Linked(ent["key"], ent["namespace"], ent["name"], " ".join(toks)))
    if namespace is not None:
        said = [
            w
            for i, (w, used) in enumerate(zip(q, claimed, strict=True))
            if w in FIRST_PERSON and not used and not (w == "me" and i > 0 and q[i - 1] in _ASKING)
        ]
        for r in rows:
            if r["role"] == "user" and r["namespace"] == namespace and r["key"] not in seen and said:
                seen.add(r["key"])
                out.append(Linked(r["key"], r["namespace"], r["name"] or "user", said[0]))
    return out


def link(db: Database, question: str, namespace: str | None = None) -> list[Linked]:
    """The entities the question names (see :func:`link_rows`)."""
    return link_rows(question, run_named(db, "entity_names", {"namespace": namespace}).dicts(), namespace)


def _vocabulary(ontology: Ontology) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for p in ontology.predicates:
        words = {w.casefold() for w in p.words}
        words |= {part for part in p.name.split("_") if part not in _NAME_PARTS_IGNORED}
        out[p.name] = words
    return out


def _same_word(token: str, word: str) -> bool:
    # "work" is "works" and "working": a shared start of four letters or more counts.
    if token == word:
        return True
    short, long_ = sorted((token, word), key=len)
    return len(short) >= 4 and long_.startswith(short)


def _score(tokens: set[str], words: set[str]) -> int:
    return sum(1 for t in tokens if any(_same_word(t, w) for w in words))


def relevance(question: str, predicate: str, ontology: Ontology) -> int:
    """How many of the question's words name the predicate (its name's parts and the
    ``words`` the ontology gives it)."""
    return _score(set(_tokens(question)), _vocabulary(ontology).get(predicate, set()))


def rank(question: str, facts: list[dict[str, Any]], ontology: Ontology) -> list[dict[str, Any]]:
    """Facts in the order an assistant wants them: those whose predicate the question's
    words name first, then the most recent on the valid-time axis (its start as stated, or
    when it became known), then as they came."""
    vocabulary = _vocabulary(ontology)
    tokens = set(_tokens(question))

    def score(f: dict[str, Any]) -> int:
        return _score(tokens, vocabulary.get(f["predicate"], set()))

    by_time = sorted(facts, key=lambda f: str(f.get("valid_from") or f.get("recorded_at") or ""), reverse=True)
    return sorted(by_time, key=lambda f: -score(f))


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


def answer_from(
    question: str,
    ontology: Ontology,
    entities: list[Linked],
    rows: list[list[dict[str, Any]]],
    k: int,
) -> Answer:
    """The answer from the linked entities and each one's facts (``rows[i]`` are the facts
    of ``entities[i]``): served facts ranked and cut to ``k``, the rest with their reason."""
    answer = Answer(question, list(entities))
    seen: set[str] = set()
    served: list[dict[str, Any]] = []
    for facts in rows:
        for row in facts:
            if row["statement"] in seen:
                continue
            seen.add(row["statement"])
            why = check(row, ontology)
            if why is None:
                served.append(row)
            else:
                answer.rejected.append({**row, "reason": why})
    answer.facts = rank(question, served, ontology)[: max(0, k)]
    if not entities:
        answer.reason = "the question names no known entity"
    elif not answer.facts:
        answer.reason = "no fact about " + ", ".join(e.name or e.key for e in entities) + " is valid at that time"
    return answer


def ask(
    db: Database,
    question: str,
    ontology: Ontology,
    *,
    namespace: str | None = None,
    all_namespaces: bool = False,
    k: int = 10,
    valid_at: TimeArg = None,
    known_at: TimeArg = None,
) -> Answer:
    """Facts about the entities a question names (the owner too, when it speaks in the first
    person), ranked by the question's words, each with its quote and source message. When
    what it names lies in more than one namespace, give a ``namespace`` (or
    ``all_namespaces=True`` to look in every one); first-person words need a namespace."""
    entities = link(db, question, namespace)
    check_scope(namespace, all_namespaces, (e.namespace for e in entities), "what the question names")
    # Linked entities are known by key: no second lookup of each one.
    rows = [facts_of_keys(db, [e.key], valid_at, known_at).dicts() for e in entities]
    return answer_from(question, ontology, entities, rows, k)


async def ask_async(
    db: AsyncDatabase,
    question: str,
    ontology: Ontology,
    *,
    namespace: str | None = None,
    all_namespaces: bool = False,
    k: int = 10,
    valid_at: TimeArg = None,
    known_at: TimeArg = None,
) -> Answer:
    """:func:`ask` on an asynchronous connection."""
    names = await run_named_async(db, "entity_names", {"namespace": namespace})
    entities = link_rows(question, names.dicts(), namespace)
    check_scope(namespace, all_namespaces, (e.namespace for e in entities), "what the question names")
    rows = [(await facts_of_keys_async(db, [e.key], valid_at, known_at)).dicts() for e in entities]
    return answer_from(question, ontology, entities, rows, k)
