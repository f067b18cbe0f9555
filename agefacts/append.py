"""Appending to a conversation: what new turns add to what the turns before wrote.

A memory that adds messages to a long conversation would otherwise ground, gate, compile and
write the whole conversation again for each message, so a chat's cost grew with the square
of its length. A :class:`Tail` keeps what the turns before left (their consolidation, the
keys they wrote, the document as hashed); :func:`append` plans only the new turns against
it. The graph it leads to is the graph a load of the whole conversation gives (the
differential tests hold the two equal); where it could not be, :func:`append` says why and
the caller loads the whole conversation instead:

- a new turn names an entity that earlier turns left unnamed (its key changes, and with it
  the keys of every statement about it);
- the conversation has keyphrases (their co-occurrence weights are the whole conversation's);
- a new turn is earlier than every turn before, when entities are mentioned (each mention
  carries the conversation's first time);
- an earlier user turn is still waiting for its extraction.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from .compile import Plan, plan
from .consolidate import Consolidation, turn_results
from .keys import entity_key
from .ledger import AFTER_TURNS, splice
from .models import Conversation, Turn
from .ontology import Ontology
from .preparing import content_hash
from .temporal import normalise_instant

__all__ = ["Appended", "Tail", "append", "tail_of"]


@dataclass(frozen=True)
class Tail:
    """A conversation as written, with what appending to it needs."""

    conv: Conversation
    content_hash: str
    document: str  # its JSON as hashed
    folded: Consolidation  # its turns, consolidated
    keys: dict[str, str]  # entity key by handle
    entity_keys: frozenset[str]
    statements: frozenset[str]
    evidence: int  # distinct evidence edges
    first_at: str | None  # its earliest turn time
    waiting: bool  # a user turn has no extraction yet (or a failed one)


@dataclass(frozen=True)
class Appended:
    """What appending wrote (``plan``: the new turns' part, with the whole conversation's
    counts and follow-ups) and the tail it leaves."""

    plan: Plan
    tail: Tail
    mentions: frozenset[str]  # entity keys whose mention in this conversation is written anew
    first: int  # the place of the first new turn
    turns: tuple[str, ...]  # each new turn's JSON


def _first_at(turns: list[Turn]) -> str | None:
    times = [normalise_instant(t.at) for t in turns if t.at]
    return min(times) if times else None


def _waiting(turns: list[Turn]) -> bool:
    return any(t.speaker == "user" and (t.recorded is None or t.error is not None) for t in turns)


def tail_of(conv: Conversation, ontology: Ontology, document: str | None = None) -> Tail:
    """The tail of a conversation (reads every turn: once, for a conversation first met)."""
    document = document or conv.model_dump_json()
    folded = Consolidation()
    for tr in turn_results(conv, ontology, {}):
        folded.add(tr)
    whole = plan(conv, folded.result(conv.id, conv.namespace), ontology)
    keys = {h: entity_key(conv.namespace, conv.id, e) for h, e in folded.entities.items()}
    return Tail(
        conv=conv,
        content_hash=content_hash(conv, ontology, document=document),
        document=document,
        folded=folded,
        keys=keys,
        entity_keys=frozenset(keys.values()),
        statements=frozenset(whole.statements),
        evidence=whole.counts["evidence"],
        first_at=_first_at(conv.turns),
        waiting=_waiting(conv.turns),
    )


def append(tail: Tail, turns: list[Turn], ontology: Ontology) -> Appended | str:
    """Plan ``turns`` after the tail's; a string says why they cannot be appended (then the
    whole conversation is loaded)."""
    head = tail.conv
    if not turns:
        return "no new turns"
    if tail.waiting:
        return "an earlier user turn waits for its extraction"
    if head.gold is not None or not tail.document.endswith(AFTER_TURNS):
        return "the conversation carries a gold proposal"
    ns, cid, n = head.namespace, head.id, len(head.turns)
    conv = head.model_copy(update={"turns": [*head.turns, *turns]})
    known = dict(tail.folded.entities)
    results = turn_results(conv, ontology, known, start=n)
    folded = tail.folded.copy()
    for tr in results:
        folded.add(tr)
    if folded.keyphrases:
        return "the conversation has keyphrases"
    added = _first_at(turns)
    first_at = tail.first_at if added is None else added if tail.first_at is None else min(tail.first_at, added)
    if first_at != tail.first_at and tail.entity_keys:
        return "a new turn is earlier than the turns before"
    touched = {e.handle for tr in results for e in tr.entities}
    keys = {h: entity_key(ns, cid, folded.entities[h]) for h in touched}
    if any(h in tail.keys and tail.keys[h] != k for h, k in keys.items()):
        return "a new turn names an entity that earlier turns left unnamed"
    said = list(dict.fromkeys(f.content() for tr in results for f in tr.statements))
    result = folded.result(cid, ns, facts=[folded.facts[c] for c in said])
    mentions = frozenset(keys.values())
    every = {**tail.keys, **keys}
    p = plan(conv, result, ontology, since=n, first_at=first_at, mentioned=set(mentions), keys=every)
    entity_keys = tail.entity_keys | mentions
    statements = tail.statements | set(p.statements)
    evidence = tail.evidence + sum(1 for e in p.edges if e.label == "EVIDENCED_BY")
    p.counts = {
        "entities": len(entity_keys),
        "statements": len(statements),
        "evidence": evidence,
        "claims": folded.claims,
        "rejected": len(folded.rejected),
        "followups": len(p.followups),
        "keyphrases": 0,
        "rejected_reasons": dict(sorted(Counter(r.reason for r in folded.rejected).items())),
    }
    written = tuple(t.model_dump_json() for t in turns)
    document = splice(tail.document, written)
    return Appended(
        plan=p,
        tail=Tail(
            conv=conv,
            content_hash=content_hash(conv, ontology, document=document),
            document=document,
            folded=folded,
            keys=every,
            entity_keys=entity_keys,
            statements=frozenset(statements),
            evidence=evidence,
            first_at=first_at,
            waiting=_waiting(turns),
        ),
        mentions=mentions,
        first=n,
        turns=written,
    )
