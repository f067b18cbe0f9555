"""The derived properties: the one statement of the rules by which what several conversations
wrote becomes an entity's or a statement's properties.

These are pure functions over plain rows (the properties of the edges a vertex has), so the
result depends only on what the graph holds, never on the order it was loaded in. The bulk
path applies them to rows it reads from the label tables; for a graph written by hand (the
compiled Cypher, the Cypher load path) each rule is spelled in Cypher here too, beside its
Python, so that a rule changes in one place; a differential property test holds the two
equal on generated groups.

- An entity's ``name``, ``attrs`` and ``resolution`` come from the latest conversation that gave
  them (by the mention's ``at``, then its key), its ``mentions`` from all of them, distinct, in
  the engine's text order. An entity no conversation mentions any more is left alone.
- A statement's ``recorded_at`` is its earliest evidence's ``at``, its ``confidence`` the
  highest any evidence gave, and its ``model``, ``extractor`` and ``schema_ref`` those of the
  earliest evidence (by ``at``, then key) that has them.
- What holds when, as known when (the reading of time): :func:`agefacts.timeline.versions`,
  stored as fact versions by the load (:meth:`agefacts.bulk.BulkWriter.refresh_versions`).
- Evidence: one piece per place a statement was read, see :func:`one_per_place`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from . import cypher as cy

if TYPE_CHECKING:
    from .models import Evidence

__all__ = [
    "ENTITY_DERIVED",
    "EVIDENCE_INPUTS",
    "HISTORY_ORDER",
    "MENTION_INPUTS",
    "SAID_INPUTS",
    "Order",
    "STATEMENT_DERIVED",
    "entity_props",
    "entity_recompute",
    "inputs_of",
    "one_per_place",
    "sorted_json",
    "statement_props",
    "statement_recompute",
    "value_ident",
]

Order = Callable[[Iterable[str]], list[str]]

# What :func:`statement_props` computes; what a writer must not take from one conversation.
STATEMENT_DERIVED = ("recorded_at", "confidence", "model", "extractor", "schema_ref")
ENTITY_DERIVED = ("name", "attrs", "resolution", "mentions")  # what :func:`entity_props` computes
# The edge properties each rule reads: edges that agree on these give the same result, so a
# vertex whose edges were replaced by equal ones needs no recomputing.
MENTION_INPUTS = ("k", "at", "name", "attrs", "mentions")
EVIDENCE_INPUTS = ("k", "at", "confidence", "model", "extractor", "schema_ref")
# What of a piece of evidence its statement's fact versions read (the key names the message,
# so its conversation and place; timeline.versions reads the rest).
SAID_INPUTS = ("k", "at", "quote", "char_start", "char_end")


def inputs_of(props: Mapping[str, Any], fields: Sequence[str]) -> str:
    """What of an edge's properties a rule reads, as comparable text."""
    return sorted_json([props.get(f) for f in fields])


def entity_props(mentions: Sequence[Mapping[str, Any]], order: Order = sorted) -> dict[str, Any] | None:
    """The derived properties of an entity from the properties of its ``MENTIONED_IN`` edges;
    None (leave the entity alone) when it has none. In the result a None value means "not
    stored" and a field left out means "left as it is". ``order``
    sorts the mention strings as the engine compares text (its collation)."""
    if not mentions:
        return None
    latest = sorted(mentions, key=lambda m: (m.get("at") or "", m["k"]), reverse=True)
    name = next((m["name"] for m in latest if m.get("name") is not None), None)
    attrs = next((m["attrs"] for m in latest if m.get("attrs") is not None), None)
    words = {x for m in mentions for x in m.get("mentions") or ()}
    out: dict[str, Any] = {
        "name": name,
        "attrs": attrs,
        "resolution": "resolved" if name is not None else "nil_placeholder",
    }
    # No mention words at all keeps whatever the entity had (the Cypher's UNWIND of nothing
    # sets nothing), so the field is left out rather than set to None (which removes it).
    if words:
        out["mentions"] = order(words)
    return out


def statement_props(evidence: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The derived properties of a statement from the properties of its ``EVIDENCED_BY``
    edges; None when it has none (such a statement is removed, not recomputed)."""
    if not evidence:
        return None
    first = sorted(evidence, key=lambda e: (e.get("at") or "", e["k"]))
    confidences = [e["confidence"] for e in evidence if e.get("confidence") is not None]
    out: dict[str, Any] = {
        "recorded_at": first[0].get("at"),
        "confidence": max(confidences) if confidences else None,
    }
    for f in STATEMENT_DERIVED[2:]:
        out[f] = next((e[f] for e in first if e.get(f) is not None), None)
    return out


_TIERS = ("exact", "whitespace", "typography")  # best first


def one_per_place(evidence: Iterable[Evidence]) -> tuple[Evidence, ...]:
    """The evidence of one statement, one per place it was read (turn and span), in order.

    Two claims of one statement on one place (a model that quoted "huge fan" at 0.73 and
    "huge  fan" at 0.6 in one reply) are one piece of evidence with the highest confidence
    either gave and the best tier either was found by (exact, then whitespace, then
    typography): whichever came first. Kept as two, they were one edge whose properties
    depended on set order, so one input loaded into two graphs gave two digests."""
    places: dict[tuple[int, int, int], Evidence] = {}
    for ev in evidence:
        place = (ev.turn, ev.char_start, ev.char_end)
        old = places.get(place)
        if old is None:
            places[place] = ev
            continue
        confidences = [c for c in (old.confidence, ev.confidence) if c is not None]
        best = min(old, ev, key=lambda e: _TIERS.index(e.match))
        places[place] = best.model_copy(update={"confidence": max(confidences) if confidences else None})
    return tuple(places[p] for p in sorted(places))


def value_ident(value: Any) -> str:
    """What a literal value is, for comparing two statements' values: its canonical JSON,
    except that a whole float is the integer it equals, since the engine's Cypher finds ``0``
    and ``0.0`` equal (it compares an integer with a float as floats; every whole float that
    is stored is below 1e15, :func:`agefacts.gate.normalise_value`, where that comparison is
    exact). An object is compared by its vertex instead (``"id:..."``), and a predicate takes
    one kind, so the two never meet."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return _SORTED(value)


# Made once: json.dumps with options makes an encoder per call, and these are called for every
# statement a load or a reading of time compares (the same text as json.dumps writes).
_SORTED = json.JSONEncoder(sort_keys=True).encode
sorted_json = json.JSONEncoder(sort_keys=True, ensure_ascii=False).encode
"""``json.dumps(value, sort_keys=True, ensure_ascii=False)``: comparable text of a value."""


HISTORY_ORDER = "coalesce(s.valid_from, s.valid_until, s.recorded_at), s.recorded_at, s.k"
"""The order ``agefacts history`` lists a subject's statements of one predicate in, over
statements bound to ``s`` (``// order: history`` in a named query): by the start they state
(else the end they state, else when they were said), then by known time, then by key."""


# -- the same rules in Cypher ------------------------------------------------------------------------
# For a graph written by hand (the compiled Cypher, the Cypher load path), each rule above again. It never relies on the order of a collect(): an ORDER BY before an aggregation that
# groups is not kept (the engine may sort again by the grouping keys), so "the earliest" and
# "the latest" are min() and max() of [time, key, value] lists, which AGE orders element by
# element and in which the unique key decides every tie. (AGE has no reduce().)
def entity_recompute(label: str, k: str) -> list[str]:
    """An entity's name, resolution and attributes come from the latest conversation that
    gave them, its mentions from all; recomputed from every MENTIONED_IN edge."""
    node = f"(n:{cy.label(label)})"
    where = f"WHERE n.k = {cy.literal(k)} "
    return [
        f"MATCH {node}-[m:MENTIONED_IN]->(:Conversation) {where}"
        "WITH n, max(CASE WHEN m.name IS NULL THEN null ELSE [coalesce(m.at, ''), m.k, m.name] END) AS named, "
        "max(CASE WHEN m.attrs IS NULL THEN null ELSE [coalesce(m.at, ''), m.k, m.attrs] END) AS attributed "
        "SET n.name = named[2], n.attrs = attributed[2], "
        "n.resolution = CASE WHEN named IS NULL THEN 'nil_placeholder' ELSE 'resolved' END",
        # No grouping key: the aggregation keeps the sorted order.
        f"MATCH {node}-[m:MENTIONED_IN]->(:Conversation) {where}UNWIND m.mentions AS x "
        f"WITH DISTINCT x ORDER BY x WITH collect(x) AS xs WHERE size(xs) > 0 "
        f"MATCH {node} {where}SET n.mentions = xs",
    ]


def statement_recompute(k: str) -> str:
    """Known time is the earliest evidence; provenance is that of the earliest evidence that
    has it; confidence the highest any evidence gave."""

    def first(f: str) -> str:
        return f"min(CASE WHEN e.{f} IS NULL THEN null ELSE [e.at, e.k, e.{f}] END)"

    return (
        f"MATCH (s:Statement)-[e:EVIDENCED_BY]->(:Message) WHERE s.k = {cy.literal(k)} "
        f"WITH s, min(e.at) AS recorded, max(e.confidence) AS conf, {first('model')} AS fm, "
        f"{first('extractor')} AS fx, {first('schema_ref')} AS fr "
        "SET s.recorded_at = recorded, s.confidence = conf, s.model = fm[2], "
        "s.extractor = fx[2], s.schema_ref = fr[2]"
    )
