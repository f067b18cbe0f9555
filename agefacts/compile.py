"""The compiler: a conversation and its consolidated result in, deterministic openCypher out.

It is a pure function. :func:`plan` builds the graph the conversation writes (vertices and
edges with their keys and properties, and the groups to recompute); :func:`to_cypher` renders
it, one statement per line, each ready to be wrapped in
``SELECT * FROM cypher('facts', $$ ... $$) AS (v agtype)``. The same input gives the same
bytes whatever the hash seed: everything is sorted by key.

How the text is written:

- Vertices: ``MERGE`` on the label and ``k``, then ``SET`` of the properties that are a function
  of the key, so replaying a line changes nothing.
- Edges: a guarded create. On the embedded engine (AGE 1.7.0 built for 32-bit WebAssembly) a
  ``MERGE`` of an edge between vertices bound by earlier clauses stores it with start_id =
  end_id = 0: Cypher cannot see it and every replay adds another (native AGE stores it
  correctly). So each edge is ``MATCH`` both ends by key, ``OPTIONAL MATCH`` the keyed edge,
  and ``CREATE`` only ``WHERE e IS NULL``. A test pins the engine's behaviour, to come back to
  plain MERGE the day it is fixed. A plain, unguarded CREATE never appears.
- Properties that several conversations contribute to (an entity's name and mentions, a
  statement's known time and confidence) are recomputed from all the evidence in the graph
  after the writes, so the graph does not depend on the order of loading: by the Cypher
  spelling of each rule, which :mod:`agefacts.derive` keeps beside its Python. The fact
  versions (the reading of time) are the one rule Cypher cannot state: ``agefacts derive``
  writes them after compiled Cypher run by hand, as every load does itself.
- Follow-ups are trailing comments: they are the caller's questions, not facts.
- Keyphrases live beside the facts: a ``Keyphrase`` vertex per namespace and text, an
  ``APPEARS_IN`` edge to each message that says it (with the span), and ``CO_OCCURS`` edges
  between the keyphrases of one conversation, whose count and PMI are the conversation's own:
  nothing another conversation loads can change them, so they need no recomputing.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from . import cypher as cy
from ._version import __version__
from .derive import entity_recompute, statement_recompute
from .errors import CompileError
from .keys import (
    conversation_key,
    edge_key,
    entity_key,
    keyphrase_key,
    message_key,
    statement_key,
    user_key,
)
from .models import Conversation, ConversationResult, Entity, KeyphraseHit, llm_provenance
from .names import CORE_EDGE_LABELS, CORE_VERTEX_LABELS, USER
from .ontology import Ontology
from .temporal import normalise_instant as _instant

__all__ = [
    "Chain",
    "EXTRACTOR",
    "Edge",
    "FollowupRow",
    "Plan",
    "Vertex",
    "compile_conversation",
    "COOCCURRENCE_TOP",
    "cooccurrence",
    "edge_cypher",
    "executable",
    "plan",
    "to_cypher",
    "vertex_cypher",
]

EXTRACTOR = f"agefacts/{__version__}"


# Slotted and not frozen: a frozen dataclass sets each field through object.__setattr__, and a
# plan makes about seven of these per statement (frozen, they were a tenth of compiling).
@dataclass(slots=True)
class Vertex:
    label: str
    k: str
    props: dict[str, Any]


@dataclass(slots=True)
class Edge:
    label: str
    start_label: str
    start: str
    end_label: str
    end: str
    k: str
    props: dict[str, Any]


@dataclass(frozen=True)
class FollowupRow:
    gap: str
    entity_key: str | None
    priority: str
    question: str
    reason: str | None
    asked_at: str | None


Chain = tuple[str, ...]
"""What a statement's fact versions are read with: (subject label, subject key, predicate) for
every statement of that predicate about the subject, which a predicate of one value needs; for
a predicate of many values, one fact of it: (..., object label, object key), or (..., "", the
value as JSON)."""


@dataclass
class Plan:
    """Everything one conversation writes, sorted, plus what must be recomputed."""

    namespace: str
    conversation: str
    vertices: list[Vertex] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    entities: list[tuple[str, str]] = field(default_factory=list)  # (label, k) to recompute
    statements: list[str] = field(default_factory=list)  # statement keys to recompute
    # Each statement's chain (statement key -> Chain), whose fact versions are recomputed.
    chain_of: dict[str, Chain] = field(default_factory=dict)
    followups: list[FollowupRow] = field(default_factory=list)
    counts: dict[str, Any] = field(default_factory=dict)
    # What did not become data, each as the turn, what it was, the reason code and its sentence.
    rejections: list[tuple[int, str, str, str]] = field(default_factory=list)

    @property
    def vertex_labels(self) -> list[str]:
        return sorted({v.label for v in self.vertices} | CORE_VERTEX_LABELS)

    @property
    def edge_labels(self) -> list[str]:
        # All of agefacts' own edge labels, used or not: recomputing queries name them all.
        return sorted({e.label for e in self.edges} | CORE_EDGE_LABELS)

    @property
    def chains(self) -> list[Chain]:
        """The chains its statements belong to."""
        return sorted(set(self.chain_of.values()))


_ALL: Any = object()


def _clean(props: dict[str, Any]) -> dict[str, Any]:
    """None is not stored: AGE drops null properties, and an absent value means unknown."""
    return {k: v for k, v in props.items() if v is not None}


def _counts(conv: Conversation) -> dict[str, Any]:
    """How many messages the conversation has, its speakers' names, and how many turns each
    said (``turns``, in the names' order): a search weighs a word by how rare it is among a
    namespace's messages and a speaker's name by how many turns are theirs, and summing these
    per conversation is what keeps it from reading every message to count them
    (docs/recall.md)."""
    said = Counter(t.name for t in conv.turns if t.name is not None)
    names = sorted(said)
    return {"messages": len(conv.turns), "speakers": names, "turns": [said[n] for n in names]}


def plan(
    conv: Conversation,
    result: ConversationResult,
    ontology: Ontology,
    *,
    since: int = 0,
    first_at: str | None | object = _ALL,
    mentioned: set[str] | None = None,
    keys: Mapping[str, str] | None = None,
) -> Plan:
    """Everything the conversation writes. With ``since``, what its turns from ``since`` on
    add to what the turns before wrote (a conversation appended to): their messages, the
    statements of ``result`` (only their evidence from those turns), the mentions of the
    entity keys in ``mentioned``, every follow-up; ``first_at`` is the earliest time of its
    turns and ``keys`` each entity's key by handle, when known, so that they need not be
    worked out again."""
    ns, cid = conv.namespace, conv.id
    p = Plan(namespace=ns, conversation=cid)
    ck = conversation_key(ns, cid)
    vertices: dict[str, Vertex] = {}
    edges: dict[str, Edge] = {}

    def add_vertex(v: Vertex) -> None:
        old = vertices.get(v.k)
        if old is not None and old != v:
            raise CompileError(f"two different vertices share key {v.k} in conversation {cid!r}")
        vertices[v.k] = v

    def add_edge(label: str, sl: str, s: str, el: str, e: str, props: dict[str, Any], *extra: Any) -> None:
        k = edge_key(label, s, e, *extra)
        edges[k] = Edge(label, sl, s, el, e, k, {"k": k, **_clean(props)} if props else {"k": k})

    add_vertex(
        Vertex("Conversation", ck, _clean({"k": ck, "namespace": ns, "id": cid, "title": conv.title, **_counts(conv)}))
    )
    msg_keys: dict[int, str] = {}
    if first_at is _ALL:
        times = [t.at for t in conv.turns if t.at]
        first_at = min(_instant(t) for t in times) if times else None
    assert first_at is None or isinstance(first_at, str)
    for i in range(since, len(conv.turns)):
        turn = conv.turns[i]
        mk = message_key(ns, cid, i)
        msg_keys[i] = mk
        add_vertex(
            Vertex(
                "Message",
                mk,
                _clean(
                    {
                        "k": mk,
                        "namespace": ns,
                        "conversation": cid,
                        "ordinal": i,
                        "speaker": turn.speaker,
                        "name": turn.name,
                        "at": _instant(turn.at) if turn.at else None,
                        "text": turn.text,
                    }
                ),
            )
        )
        add_edge("PART_OF", "Message", mk, "Conversation", ck, {})

    for hit in result.keyphrases:
        kk = keyphrase_key(ns, hit.text)
        add_vertex(Vertex("Keyphrase", kk, {"k": kk, "namespace": ns, "text": hit.text}))
        add_edge(
            "APPEARS_IN",
            "Keyphrase",
            kk,
            "Message",
            msg_keys[hit.turn],
            {
                "mention": hit.mention,
                "char_start": hit.char_start,
                "char_end": hit.char_end,
                "byte_start": hit.byte_start,
                "byte_end": hit.byte_end,
                "tier": hit.match,
                "score": hit.score,
                "extractor": hit.extractor,
            },
        )
    for (a, b), (count, pmi) in cooccurrence(ns, result.keyphrases).items():
        add_edge(
            "CO_OCCURS",
            "Keyphrase",
            a,
            "Keyphrase",
            b,
            {"conversation": cid, "conversation_k": ck, "messages": count, "pmi": pmi},
            ck,
        )

    # Entities: the user always; others by key, several handles may share one key.
    uk = user_key(ns)
    ut = ontology.user_type
    add_vertex(Vertex(ut, uk, {"k": uk, "namespace": ns, "type": ut, "role": USER, "resolution": "resolved"}))
    handle_of: dict[str, tuple[str, str]] = {USER: (ut, uk)}
    by_key: dict[str, list[Entity]] = {}
    for ent in result.entities:
        k = keys[ent.handle] if keys is not None else entity_key(ns, cid, ent)
        handle_of[ent.handle] = (ent.type, k)
        by_key.setdefault(k, []).append(ent)
    for k, ents in sorted(by_key.items()):
        if mentioned is not None and k not in mentioned:
            continue
        label = ents[0].type
        add_vertex(Vertex(label, k, {"k": k, "namespace": ns, "type": label}))
        mentions = sorted({m for e in ents for m in result.mentions.get(e.handle, [e.mention]) if m})
        names = sorted({e.name for e in ents if e.name and e.resolved})
        attrs: dict[str, str] = {}
        for e in sorted(ents, key=lambda e: e.handle):
            attrs.update(e.attrs)
        add_edge(
            "MENTIONED_IN",
            label,
            k,
            "Conversation",
            ck,
            {
                "at": first_at,
                "mentions": mentions,
                "name": names[0] if names else None,
                "attrs": attrs or None,
                "handles": sorted(e.handle for e in ents),
            },
        )
        p.entities.append((label, k))

    # Statements.
    for fact in result.statements:
        sl, sk = handle_of[fact.subject]
        ok = handle_of[fact.object][1] if fact.object is not None else None
        stk = statement_key(
            ns,
            sk,
            fact.predicate,
            ok,
            fact.value,
            fact.valid_from,
            fact.valid_until,
            fact.recurrence,
            fact.ends_validity,
            fact.corrects,
        )
        spec = ontology.predicate(fact.predicate)
        single = spec is not None and spec.single_valued
        add_vertex(
            Vertex(
                "Statement",
                stk,
                _clean(
                    {
                        "k": stk,
                        "namespace": ns,
                        "predicate": fact.predicate,
                        "value": fact.value,
                        "valid_from": fact.valid_from,
                        "valid_until": fact.valid_until,
                        "recurrence": fact.recurrence,
                        "ends_fact": True if fact.ends_validity else None,
                        "corrects": True if fact.corrects else None,
                        "single_valued": True if single else None,
                    }
                ),
            )
        )
        add_edge("SUBJECT_OF", sl, sk, "Statement", stk, {})
        if fact.object is not None:
            ol, okey = handle_of[fact.object]
            add_edge("ABOUT", "Statement", stk, ol, okey, {})
        if since:
            # An entity of the turns before that a new statement is about: its edges' ends
            # are written with them (the one a full plan writes, its derived properties kept).
            for h in (fact.subject, fact.object):
                if h is not None and h != USER:
                    add_vertex(
                        Vertex(
                            handle_of[h][0],
                            handle_of[h][1],
                            {"k": handle_of[h][1], "namespace": ns, "type": handle_of[h][0]},
                        )
                    )
        for ev in fact.evidence:
            if ev.turn < since:
                continue  # written with its own turn
            add_edge(
                "EVIDENCED_BY",
                "Statement",
                stk,
                "Message",
                msg_keys[ev.turn],
                {
                    "quote": ev.quote,
                    "char_start": ev.char_start,
                    "char_end": ev.char_end,
                    "byte_start": ev.byte_start,
                    "byte_end": ev.byte_end,
                    "tier": ev.match,
                    "at": _instant(ev.at) if ev.at else None,
                    "confidence": ev.confidence,
                    "model": (model := conv.turns[ev.turn].model or conv.model),
                    "extractor": llm_provenance(model),
                    "schema_ref": ontology.ref,
                },
                ev.char_start,
                ev.char_end,
            )
        p.statements.append(stk)
        chain: Chain
        if single:
            chain = (sl, sk, fact.predicate)
        elif fact.object is not None:
            chain = (sl, sk, fact.predicate, *handle_of[fact.object])
        else:
            chain = (sl, sk, fact.predicate, "", json.dumps(fact.value, ensure_ascii=False))
        p.chain_of[stk] = chain

    for f in result.followups:
        h = f.handle
        asked = conv.turns[-1].at if conv.turns and conv.turns[-1].at else first_at
        p.followups.append(
            FollowupRow(
                f.gap,
                handle_of[h][1] if h in handle_of else None,
                f.priority,
                f.question,
                f.reason,
                _instant(asked) if asked else None,
            )
        )

    p.vertices = sorted(vertices.values(), key=lambda v: (_VORDER.get(v.label, 2), v.k))
    p.edges = sorted(edges.values(), key=lambda e: (_EORDER.get(e.label, 9), e.k))
    p.entities = sorted(set(p.entities), key=lambda t: t[1])
    p.statements = sorted(set(p.statements))
    # What is written, by distinct key (two claims of one statement are one statement; two on
    # one place are one evidence edge), and how many claims the turns admitted.
    p.counts = {
        "entities": len(by_key),
        "statements": len(p.statements),
        "evidence": sum(1 for e in p.edges if e.label == "EVIDENCED_BY"),
        "claims": result.claims,
        "rejected": len(result.rejected),
        "followups": len(p.followups),
        "keyphrases": len(result.keyphrases),
        "rejected_reasons": dict(sorted(Counter(r.reason for r in result.rejected).items())),
        "people": _people(by_key),
        # User messages no extraction has read yet (none recorded, none failed): stored and
        # searchable, but no fact comes of them until a model (or a person) records one.
        "unextracted": sum(
            1
            for t in conv.turns[since:]
            if t.speaker == "user" and t.recorded is None and t.error is None and t.text.strip()
        ),
    }
    p.rejections = [(r.turn, r.kind, r.reason, r.detail) for r in result.rejected]
    return p


def _people(by_key: dict[str, list[Entity]]) -> dict[str, Any]:
    """Who is who, for the load's summary: each named entity by key (its name and role, so a
    run can say where one name met in several conversations is one person), and each role
    that named several people (two sisters are two people, not one)."""
    named: dict[str, list[str | None]] = {}
    for k, ents in sorted(by_key.items()):
        names = sorted({e.name for e in ents if e.name and e.resolved})
        if names:
            named[k] = [names[0], next((e.attrs["rel"] for e in ents if e.attrs.get("rel")), None)]
    roles: dict[str, set[str]] = {}
    for name, rel in named.values():
        if rel and name:
            roles.setdefault(rel, set()).add(name)
    return {"named": named, "apart": {r: sorted(n) for r, n in sorted(roles.items()) if len(n) > 1}}


_VORDER = {"Conversation": 0, "Message": 1, "Statement": 3, "Keyphrase": 4}
_EORDER = {
    "PART_OF": 0,
    "MENTIONED_IN": 1,
    "SUBJECT_OF": 2,
    "ABOUT": 3,
    "EVIDENCED_BY": 4,
    "APPEARS_IN": 5,
    "CO_OCCURS": 6,
}


COOCCURRENCE_TOP = 5
"""Keyphrases of one message that pair with each other: its best five (by score, then text).
Every pair of a message's keyphrases made edges that grow with the square of what it says
(20 keyphrases a message: 190 pairs, and 6 times the load time for 2.4 times the phrases);
five make at most ten a message, and the statistical extractor's default is five."""


def cooccurrence(namespace: str, hits: Iterable[KeyphraseHit]) -> dict[tuple[str, str], tuple[int, float]]:
    """The keyphrases of one conversation said in the same message (each message's best
    :data:`COOCCURRENCE_TOP`), by pair of keys (the lesser first): in how many messages
    (``messages``: ``count`` is a Cypher keyword, so ``r.count`` would not parse), and their
    pointwise mutual information over the conversation's messages that have a keyphrase,
    ``ln(count * N / (n_a * n_b))`` (natural log, rounded to 6 places so that every engine
    stores the same number)."""
    best: dict[int, dict[str, float]] = defaultdict(dict)
    for hit in hits:
        key = keyphrase_key(namespace, hit.text)
        best[hit.turn][key] = max(hit.score, best[hit.turn].get(key, -1.0))
    by_turn = {
        turn: {k for k, _ in sorted(scores.items(), key=lambda ks: (-ks[1], ks[0]))[:COOCCURRENCE_TOP]}
        for turn, scores in best.items()
    }
    n = len(by_turn)
    alone = Counter(k for keys in by_turn.values() for k in keys)
    pairs = Counter(pair for keys in by_turn.values() for pair in combinations(sorted(keys), 2))
    return {
        pair: (count, round(math.log(count * n / (alone[pair[0]] * alone[pair[1]])), 6) + 0.0)
        for pair, count in sorted(pairs.items())
    }


# -- rendering ------------------------------------------------------------------------------------
def vertex_cypher(v: Vertex) -> str:
    rest = {k: val for k, val in v.props.items() if k != "k"}
    sets = ", ".join(f"n.{cy.prop(k)} = {cy.literal(val)}" for k, val in sorted(rest.items()))
    line = f"MERGE (n:{cy.label(v.label)} {{k: {cy.literal(v.k)}}})"
    return line + (f" SET {sets}" if sets else "")


def edge_cypher(e: Edge) -> str:
    # Ends are matched with WHERE n.k = ..., which AGE serves from the key index; a pattern
    # property {k: ...} would scan the label.
    return (
        f"MATCH (a:{cy.label(e.start_label)}), (b:{cy.label(e.end_label)}) "
        f"WHERE a.k = {cy.literal(e.start)} AND b.k = {cy.literal(e.end)} "
        f"OPTIONAL MATCH (a)-[e:{cy.label(e.label)} {{k: {cy.literal(e.k)}}}]->(b) "
        f"WITH a, b, e WHERE e IS NULL "
        f"CREATE (a)-[:{cy.label(e.label)} {cy.props_map(e.props)}]->(b)"
    )


def to_cypher(p: Plan) -> list[str]:
    lines = [cy.comment(f"agefacts {EXTRACTOR}: namespace {p.namespace!r}, conversation {p.conversation!r}")]
    lines += [vertex_cypher(v) for v in p.vertices]
    lines += [edge_cypher(e) for e in p.edges]
    for label, k in p.entities:
        lines += entity_recompute(label, k)
    lines += [statement_recompute(k) for k in p.statements]
    for f in p.followups:
        lines.append(
            cy.comment(
                "follow-up "
                + json.dumps(
                    {"gap": f.gap, "priority": f.priority, "question": f.question, "reason": f.reason},
                    ensure_ascii=False,
                    sort_keys=True,
                )
            )
        )
    return lines


def compile_conversation(conv: Conversation, ontology: Ontology, result: ConversationResult | None = None) -> str:
    """The compiled Cypher of one conversation, as text (one statement per line)."""
    from .consolidate import result_of

    res = result if result is not None else result_of(conv, ontology)
    return "\n".join(to_cypher(plan(conv, res, ontology))) + "\n"


def executable(lines: Iterable[str]) -> list[str]:
    """The lines to run: comments are for the reader and the question queue."""
    return [line for line in lines if line and not line.startswith("//")]
