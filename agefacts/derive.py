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
- Supersession, for the statements about one subject with one single-valued predicate: see
  :func:`supersede`.
- Evidence: one piece per place a statement was read, see :func:`one_per_place`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import cypher as cy
from .keys import SUPERSEDES_PREFIX, supersedes_key

if TYPE_CHECKING:
    from .models import Evidence

__all__ = [
    "ENTITY_DERIVED",
    "EVIDENCE_INPUTS",
    "MENTION_INPUTS",
    "Member",
    "Order",
    "STATEMENT_DERIVED",
    "SUPERSESSION_ORDER",
    "Succession",
    "entity_props",
    "entity_recompute",
    "inputs_of",
    "one_per_place",
    "statement_props",
    "statement_recompute",
    "supersede",
    "supersession",
    "supersession_key",
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


def inputs_of(props: Mapping[str, Any], fields: Sequence[str]) -> str:
    """What of an edge's properties a rule reads, as comparable text."""
    return json.dumps([props.get(f) for f in fields], sort_keys=True, ensure_ascii=False)


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
    return json.dumps(value, sort_keys=True)


@dataclass(frozen=True)
class Member:
    """One statement of a (subject, single-valued predicate) group, as supersession sees it.

    ``ident`` is what the statement says the value is (the object's key, or the literal value
    as canonical JSON); ``stated_until`` is the ``valid_until`` the statement stated itself
    (not one that supersession inferred)."""

    k: str
    ident: str
    ends_fact: bool
    valid_from: str | None
    stated_until: str | None
    recorded_at: str
    corrects: bool = False

    @property
    def closing(self) -> bool:
        """A statement that only ends a fact: a negation, or the fact with only an end."""
        return self.ends_fact or (self.valid_from is None and self.stated_until is not None)

    @property
    def begins(self) -> str:
        return self.valid_from or self.recorded_at

    @property
    def ending(self) -> str:
        return self.stated_until or self.valid_from or self.recorded_at


def supersession_key(m: Member) -> tuple[str, str, str]:
    """Statements are ordered by valid time (``valid_from``; for a fact that states only its
    end, ``valid_until``; else ``recorded_at``), then known time, then key."""
    return (m.valid_from or m.stated_until or m.recorded_at, m.recorded_at, m.k)


SUPERSESSION_ORDER = "coalesce(s.valid_from, s.valid_until, s.recorded_at), s.recorded_at, s.k"
""":func:`supersession_key` in Cypher, over statements bound to ``s``: for the recomputing
Cypher below, and the order of ``agefacts history`` (``// order: supersession`` in a named
query)."""


@dataclass(frozen=True)
class Succession:
    """What supersession makes of one group: each member's derived properties (the
    ``valid_until``, ``valid_until_inferred``, ``superseded_at``, ``valid_start``, None meaning not stored) and the ``SUPERSEDES`` edges as
    (edge key, newer statement key, older statement key)."""

    props: dict[str, dict[str, Any]]
    edges: list[tuple[str, str, str]]


def supersede(members: Iterable[Member]) -> Succession:
    """Recompute one (subject, single-valued predicate) group from scratch.

    A fact's successor is the first later statement with another object or value, or a later
    statement that ends this very fact (a negation, or the same fact with only an end). The
    successor closes the fact: its ``valid_until`` becomes the successor's start, or the end
    the closing statement gives (marked ``valid_until_inferred``), unless the fact stated its
    own; ``superseded_at`` becomes the successor's ``recorded_at``, or the fact's own when the
    successor was learned first (a closing cannot be known before the fact itself).

    For reading, a statement without ``valid_from`` (and without a stated end) that has a
    predecessor in the group starts at its ``recorded_at``, which is where supersession ended
    its predecessor: ``valid_start`` holds that start, so the group shows one value at any
    valid time. Only a group's first statement is open at the start."""
    everyone = list(members)
    # A correction says something said was wrong, never that the world changed: it neither
    # closes a fact nor is closed (closing "started in May" at May, an empty interval).
    ordered = sorted((m for m in everyone if not m.corrects), key=supersession_key)
    props: dict[str, dict[str, Any]] = {
        m.k: {"valid_until": m.stated_until, "valid_until_inferred": None, "superseded_at": None, "valid_start": None}
        for m in everyone
        if m.corrects
    }
    edges: list[tuple[str, str, str]] = []
    for i, old in enumerate(ordered):
        target: dict[str, Any] = {
            "valid_until": old.stated_until,
            "valid_until_inferred": None,
            "superseded_at": None,
            "valid_start": old.recorded_at
            if i > 0 and old.valid_from is None and old.stated_until is None and not old.ends_fact
            else None,
        }
        if not old.ends_fact:
            for new in ordered[i + 1 :]:
                same = new.ident == old.ident
                if new.closing == same:
                    start = new.ending if same else new.begins
                    target["superseded_at"] = max(new.recorded_at, old.recorded_at)
                    if old.stated_until is None:
                        target["valid_until"] = start
                        target["valid_until_inferred"] = True
                    edges.append((supersedes_key(old.k, new.k), new.k, old.k))
                    break
        props[old.k] = target
    return Succession(props, sorted(edges))


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


def supersession(label: str, subject: str, predicate: str) -> list[str]:
    """Recompute one (subject, single-valued predicate) group from scratch, by the rule of
    :func:`supersede` (ordering, successor, closing, and the reading start
    ``valid_start`` of a statement without ``valid_from`` that has a predecessor)."""
    pattern = f"MATCH (x:{cy.label(label)})-[:SUBJECT_OF]->(s:Statement)"
    where = f"WHERE x.k = {cy.literal(subject)} AND s.predicate = {cy.literal(predicate)}"
    # One ordered list of the group, collected without a grouping key so its order holds.
    ordered = (
        f"{pattern} {where} AND s.corrects IS NULL OPTIONAL MATCH (s)-[:ABOUT]->(o) "
        # ORDER BY names no alias: AGE before 1.7.0 cannot resolve one ("could not find rte").
        "WITH s, coalesce(o.k, s.value) AS ident "
        f"ORDER BY {SUPERSESSION_ORDER} "
        "WITH collect(s.k) AS ks, collect(ident) AS ids, collect(coalesce(s.ends_fact, false)) AS negs, "
        "collect(coalesce(s.ends_fact, false) OR (s.valid_from IS NULL AND s.valid_until IS NOT NULL)) AS closing, "
        "collect(s.valid_from IS NULL AND s.valid_until IS NULL AND s.ends_fact IS NULL) AS open_start, "
        "collect(coalesce(s.valid_from, s.recorded_at)) AS begins, "
        "collect(coalesce(s.valid_until, s.valid_from, s.recorded_at)) AS endings, "
        "collect(s.recorded_at) AS learned "
    )
    return [
        f"MATCH (x:{cy.label(label)})-[:SUBJECT_OF]->(s:Statement)-[r:SUPERSEDES]->(:Statement) {where} DELETE r",
        f"{pattern} {where} AND s.valid_until_inferred = true SET s.valid_until = null",
        f"{pattern} {where} SET s.valid_until_inferred = null, s.superseded_at = null, s.valid_start = null",
        ordered + "UNWIND range(1, size(ks) - 1) AS i "
        "WITH ks, learned, open_start, i WHERE open_start[i] "
        "MATCH (s:Statement) WHERE s.k = ks[i] SET s.valid_start = learned[i]",
        ordered + "UNWIND range(0, size(ks) - 1) AS i "
        "WITH ks, ids, negs, closing, begins, endings, learned, i, "
        "[j IN range(i + 1, size(ks) - 1) WHERE (NOT closing[j] AND ids[j] <> ids[i]) OR (closing[j] AND ids[j] = ids[i])] AS later "
        "WHERE NOT negs[i] AND size(later) > 0 "
        "WITH ks[i] AS old_k, ks[head(later)] AS new_k, learned[head(later)] AS new_known, "
        "CASE WHEN ids[head(later)] = ids[i] THEN endings[head(later)] ELSE begins[head(later)] END AS new_start "
        "MATCH (old:Statement), (new:Statement) WHERE old.k = old_k AND new.k = new_k "
        "SET old.superseded_at = CASE WHEN new_known > old.recorded_at THEN new_known ELSE old.recorded_at END, "
        "old.valid_until_inferred = CASE WHEN old.valid_until IS NULL THEN true ELSE null END, "
        "old.valid_until = coalesce(old.valid_until, new_start) "
        f"WITH old, new, {cy.literal(SUPERSEDES_PREFIX)} + old_k + '>' + new_k AS ek "
        "OPTIONAL MATCH (new)-[e:SUPERSEDES {k: ek}]->(old) "
        "WITH old, new, ek, e WHERE e IS NULL "
        "CREATE (new)-[:SUPERSEDES {k: ek}]->(old)",
    ]
