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
from .models import USER, Conversation, ConversationResult, Entity, Fact, Followup, TurnResult
from .ontology import Ontology

__all__ = [
    "consolidate",
    "result_of",
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


def consolidate(conversation: str, namespace: str, turns: Iterable[TurnResult]) -> ConversationResult:
    entities: dict[str, Entity] = {}
    facts: dict[tuple[Any, ...], Fact] = {}
    followups: dict[str, Followup] = {}
    rejected = []
    mentions: dict[str, list[str]] = {}
    keyphrases = []
    claims = 0
    for tr in sorted(turns, key=lambda t: t.turn):
        claims += len(tr.statements)
        keyphrases.extend(tr.keyphrases)
        for ent in tr.entities:
            if ent.mention and ent.mention not in mentions.setdefault(ent.handle, []):
                mentions[ent.handle].append(ent.mention)
            entities[ent.handle] = entities[ent.handle].merged(ent) if ent.handle in entities else ent
        for fact in tr.statements:
            key = fact.content()
            if key in facts:
                old = facts[key]
                conf = [c for c in (old.confidence, fact.confidence) if c is not None]
                evidence = one_per_place(old.evidence + fact.evidence)
                facts[key] = old.model_copy(update={"evidence": evidence, "confidence": max(conf) if conf else None})
            else:
                facts[key] = fact
        for f in tr.followups:
            prev = followups.get(f.gap)
            if prev is None or _PRIORITY[f.priority] > _PRIORITY[prev.priority]:
                followups[f.gap] = f
        rejected.extend(tr.rejected)
    kept = [f for gap, f in followups.items() if not (gap.split(".")[0] != USER and _filled(gap, entities))]
    return ConversationResult(
        conversation=conversation,
        namespace=namespace,
        entities=sorted(entities.values(), key=lambda e: e.handle),
        statements=list(facts.values()),
        followups=sorted(kept, key=lambda f: f.gap),
        rejected=rejected,
        mentions={h: m for h, m in sorted(mentions.items()) if h in entities},
        keyphrases=keyphrases,
        claims=claims,
    )


def result_of(conv: Conversation, ontology: Ontology) -> ConversationResult:
    """Ground, gate and consolidate every recorded user turn of a conversation.

    Each turn is gated knowing the entities of the turns before it, so a statement may refer
    to a handle introduced earlier. A turn whose extraction failed is kept as a rejection."""
    from .gate import gate_keyphrases, gate_turn
    from .models import Rejection

    known: dict[str, Entity] = {}
    results: list[TurnResult] = []
    for i, turn in enumerate(conv.turns):
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
    return consolidate(conv.id, conv.namespace, results)
