"""Consolidation: per-turn results into one conversation result.

- Entities union by handle: a later turn fills in a name and resolution (a placeholder such as
  "my husband" named in a later turn stays one entity) and adds attributes. The first mention
  is kept as ``mention``.
- Statements dedupe by content; the evidence of every turn that said it is kept, in order, one
  piece per place (:func:`agefacts.derive.one_per_place`).
- Follow-ups dedupe by gap, keep the strongest priority, and are dropped once the gap is
  filled (the entity gained the name or attribute the gap asked for).
- Rejections are kept as they are: they are the record of what the model got wrong.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .derive import one_per_place
from .models import (
    Conversation,
    ConversationResult,
    Entity,
    Fact,
    Followup,
    KeyphraseHit,
    Rejection,
    TurnResult,
)
from .names import USER
from .ontology import Ontology

__all__ = [
    "Consolidation",
    "consolidate",
    "result_of",
    "turn_results",
]

_PRIORITY = {"banked": 0, "immediate": 1}


def _filled(gap: str, entities: dict[str, Entity]) -> bool:
    handle, _, field = gap.partition(".")
    ent = entities.get(handle)
    if ent is None:
        return False
    field = field or "name"
    if field == "name":
        return bool(ent.name)
    return field in ent.attrs or (field.startswith("attrs.") and field[6:] in ent.attrs)


class Consolidation:
    """Turn results folded one at a time, in turn order: what :func:`consolidate` does, kept
    open so that later turns can be folded in (an add to a conversation a memory wrote folds
    only its new turns). ``copy`` is cheap (the entities and facts are immutable), so a fold
    that is not written can be dropped."""

    def __init__(self) -> None:
        self.entities: dict[str, Entity] = {}
        self.facts: dict[tuple[Any, ...], Fact] = {}
        self.followups: dict[str, Followup] = {}
        self.rejected: list[Rejection] = []
        self.mentions: dict[str, list[str]] = {}
        self.keyphrases: list[KeyphraseHit] = []
        self.claims = 0

    def copy(self) -> Consolidation:
        c = Consolidation()
        c.entities, c.facts, c.followups = dict(self.entities), dict(self.facts), dict(self.followups)
        c.rejected, c.keyphrases, c.claims = list(self.rejected), list(self.keyphrases), self.claims
        c.mentions = {h: list(m) for h, m in self.mentions.items()}
        return c

    def add(self, tr: TurnResult) -> None:
        self.claims += len(tr.statements)
        self.keyphrases.extend(tr.keyphrases)
        for ent in tr.entities:
            if ent.mention and ent.mention not in self.mentions.setdefault(ent.handle, []):
                self.mentions[ent.handle].append(ent.mention)
            old = self.entities.get(ent.handle)
            self.entities[ent.handle] = old.merged(ent) if old is not None else ent
        for fact in tr.statements:
            key = fact.content()
            prev = self.facts.get(key)
            if prev is not None:
                conf = [c for c in (prev.confidence, fact.confidence) if c is not None]
                evidence = one_per_place(prev.evidence + fact.evidence)
                fact = prev.model_copy(update={"evidence": evidence, "confidence": max(conf) if conf else None})
            self.facts[key] = fact
        for f in tr.followups:
            was = self.followups.get(f.gap)
            if was is None or _PRIORITY[f.priority] > _PRIORITY[was.priority]:
                self.followups[f.gap] = f
        self.rejected.extend(tr.rejected)

    def result(self, conversation: str, namespace: str, facts: list[Fact] | None = None) -> ConversationResult:
        """The consolidated result (``facts``: only these statements, for a plan of part of
        a conversation)."""
        kept = [
            f for gap, f in self.followups.items() if not (gap.split(".")[0] != USER and _filled(gap, self.entities))
        ]
        return ConversationResult(
            conversation=conversation,
            namespace=namespace,
            entities=sorted(self.entities.values(), key=lambda e: e.handle),
            statements=list(self.facts.values()) if facts is None else facts,
            followups=sorted(kept, key=lambda f: f.gap),
            rejected=self.rejected,
            mentions={h: m for h, m in sorted(self.mentions.items()) if h in self.entities},
            keyphrases=self.keyphrases,
            claims=self.claims,
        )


def consolidate(conversation: str, namespace: str, turns: Iterable[TurnResult]) -> ConversationResult:
    c = Consolidation()
    for tr in sorted(turns, key=lambda t: t.turn):
        c.add(tr)
    return c.result(conversation, namespace)


def turn_results(conv: Conversation, ontology: Ontology, known: dict[str, Entity], start: int = 0) -> list[TurnResult]:
    """Ground and gate the turns of ``conv`` from ``start`` on, in order; ``known`` (the
    entities of the turns before, by handle) is updated as they go."""
    from .gate import gate_keyphrases, gate_turn

    results: list[TurnResult] = []
    for i in range(start, len(conv.turns)):
        turn = conv.turns[i]
        if turn.error:
            results.append(
                TurnResult(
                    turn=i, rejected=[Rejection(turn=i, kind="turn", reason="extraction_failed", detail=turn.error)]
                )
            )
        if turn.keyphrases:
            hits, refused = gate_keyphrases(i, turn.text, turn.keyphrases)
            results.append(TurnResult(turn=i, keyphrases=hits, rejected=refused))
        if turn.speaker != "user" or turn.recorded is None:
            continue
        tr = gate_turn(i, turn.text, turn.at, turn.recorded, ontology, known)
        for ent in tr.entities:
            known[ent.handle] = known[ent.handle].merged(ent) if ent.handle in known else ent
        results.append(tr)
    return results


def result_of(conv: Conversation, ontology: Ontology) -> ConversationResult:
    """Ground, gate and consolidate every recorded user turn of a conversation.

    Each turn is gated knowing the entities of the turns before it, so a statement may refer
    to a handle introduced earlier. A turn whose extraction failed is kept as a rejection."""
    return consolidate(conv.id, conv.namespace, turn_results(conv, ontology, {}))
