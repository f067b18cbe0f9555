"""Grading: a conversation's consolidated result against its hand-written gold.

Forgiving on surface form, strict on facts. Entities are compared by what identifies them, not
by handle (the model's "e2" may be gold's "e1"): the user; else the name; else the role to
the user (``attrs.rel``); else type and mention, all case-folded with whitespace collapsed. A
statement matches when subject, predicate and object (or value, compared the same way) match.
Valid times are not part of the match; they are reported when they differ.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .models import Claim, Conversation, ConversationResult, Entity, Fact, Proposal
from .names import USER
from .ontology import Ontology

__all__ = [
    "Report",
    "TABLE_COLUMNS",
    "combine",
    "grade",
    "grade_table",
]


def _norm(text: Any) -> str:
    s = unicodedata.normalize("NFKC", str(text)).casefold()
    s = "".join(ch for ch in s if ch.isalnum() or ch.isspace() or ch in ":-")
    return " ".join(s.split())


def _ident(handle: str | None, entities: dict[str, Entity]) -> str:
    if handle is None:
        return ""
    if handle == USER:
        return "user"
    e = entities.get(handle)
    if e is None:
        return f"?{handle}"
    if e.name:
        return "name:" + _norm(e.name)
    if e.attrs.get("rel"):
        return "rel:" + _norm(e.attrs["rel"])
    return f"{e.type}:" + _norm(e.mention)


@dataclass
class Report:
    conversation: str = ""
    statements_gold: int = 0
    statements_found: int = 0
    statements_extra: int = 0
    immediate_gold: int = 0
    immediate_hit: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    missed: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)

    @property
    def recall(self) -> float | None:
        return self.statements_found / self.statements_gold if self.statements_gold else None

    def row(self) -> dict[str, Any]:
        return {
            "conversation": self.conversation,
            "gold": self.statements_gold,
            "found": self.statements_found,
            "recall": None if self.recall is None else round(self.recall, 3),
            "extra": self.statements_extra,
            "immediate_gold": self.immediate_gold,
            "immediate_hit": self.immediate_hit,
            "rejected": dict(sorted(self.rejected.items())),
            "missed": self.missed,
            "over_extracted": self.extra,
        }


def _gold_entities(gold: Proposal) -> dict[str, Entity]:
    out: dict[str, Entity] = {}
    for e in gold.entities:
        out[e.handle] = e
    return out


def grade(conv: Conversation, result: ConversationResult) -> Report:
    gold = conv.gold or Proposal()
    gents = _gold_entities(gold)
    rents = {e.handle: e for e in result.entities}

    def gkey(s: Fact | Claim) -> tuple[str, str, str]:
        obj = _ident(s.object, gents) if s.object is not None else "=" + _norm(s.value)
        return (_ident(s.subject, gents), s.predicate, obj)

    def rkey(s: Fact) -> tuple[str, str, str]:
        obj = _ident(s.object, rents) if s.object is not None else "=" + _norm(s.value)
        return (_ident(s.subject, rents), s.predicate, obj)

    want = Counter(gkey(s) for s in gold.statements)
    # Facts that only end another fact are not statements of their own.
    have = Counter(rkey(s) for s in result.statements if not s.ends_validity)
    rep = Report(conversation=conv.id)
    rep.statements_gold = sum(want.values())
    rep.statements_found = sum((want & have).values())
    rep.statements_extra = sum((have - want).values())
    rep.missed = sorted(" ".join(k) for k in (want - have).elements())
    rep.extra = sorted(" ".join(k) for k in (have - want).elements())
    gold_imm = {_gap(f.gap, gents) for f in gold.followups if f.priority == "immediate"}
    got_imm = {_gap(f.gap, rents) for f in result.followups if f.priority == "immediate"}
    # A follow-up the model asked and a later turn answered was still asked: count it.
    for turn in conv.turns:
        if turn.recorded:
            got_imm |= {
                _gap(f.gap, {**rents, **{e.handle: e for e in turn.recorded.entities}})
                for f in turn.recorded.followups
                if f.priority == "immediate"
            }
    rep.immediate_gold = len(gold_imm)
    rep.immediate_hit = len(gold_imm & got_imm)
    rep.rejected = Counter(r.reason for r in result.rejected)
    return rep


def _gap(gap: str, entities: dict[str, Entity]) -> str:
    handle, _, rest = gap.partition(".")
    e = entities.get(handle)
    if e is not None and e.attrs.get("rel"):
        who = "rel:" + _norm(e.attrs["rel"])
    elif e is not None:
        who = f"{e.type}:" + _norm(e.mention)
    else:
        who = handle
    return f"{who}.{rest or 'name'}"


TABLE_COLUMNS = ["conversation", "gold", "found", "recall", "extra", "immediate_gold", "immediate_hit", "rejected"]


def grade_table(
    conversations: Sequence[Conversation], ontology: Ontology, *, flat: bool = False
) -> tuple[list[str], list[list[Any]]]:
    """Grade every conversation that has gold, plus a TOTAL row: columns and rows, every
    field of :meth:`Report.row`, or with ``flat`` the fields of a text table (rejection
    counts as one ``reason=n`` cell)."""
    from .consolidate import result_of

    reports = [grade(conv, result_of(conv, ontology)) for conv in conversations if conv.gold is not None]
    rows = [r.row() for r in reports] + ([combine(reports).row()] if reports else [])
    if flat:
        return TABLE_COLUMNS, [
            [r[c] if c != "rejected" else ", ".join(f"{k}={v}" for k, v in r[c].items()) for c in TABLE_COLUMNS]
            for r in rows
        ]
    return (list(rows[0]) if rows else []), [list(r.values()) for r in rows]


def combine(reports: list[Report]) -> Report:
    total = Report(conversation="TOTAL")
    for r in reports:
        total.statements_gold += r.statements_gold
        total.statements_found += r.statements_found
        total.statements_extra += r.statements_extra
        total.immediate_gold += r.immediate_gold
        total.immediate_hit += r.immediate_hit
        total.rejected.update(r.rejected)
    return total
