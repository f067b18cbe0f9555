"""agefacts' own SQL tables beside the graph: the ingest log (what was loaded, with its
content hash, counts and the conversation itself), the question queue (follow-ups), and the
ontology each graph was loaded with.
Wall-clock times live here, never on graph elements, so a replay cannot change the graph."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from .compile import FollowupRow
from .db import Database
from .errors import DatabaseError, NamespaceMoved
from .models import Conversation, Turn
from .ontology import Ontology, default_ontology, parse_ontology

__all__ = [
    "AFTER_TURNS",
    "Loaded",
    "clear_move",
    "documents",
    "drop",
    "export",
    "forget_paid",
    "graph_ontology",
    "graph_ontology_or_shipped",
    "holds",
    "keep_paid",
    "loaded_ids",
    "lock",
    "lock_namespace",
    "moves",
    "note_move",
    "paid",
    "prior_hashes",
    "record",
    "record_appended",
    "record_ontology",
    "splice",
    "stored",
]


@dataclass(frozen=True)
class Loaded:
    """A conversation just written, for the ledger."""

    conv: Conversation
    content_hash: str
    counts: dict[str, Any]  # its plan's (agefacts.compile.Plan)
    followups: Sequence[FollowupRow]
    source: str
    document: str  # its JSON as hashed, kept for export and Memory.add


def prior_hashes(db: Database, idents: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """The content hash each (namespace, conversation id) was last loaded with."""
    if not idents:
        return {}
    payload = json.dumps([{"ns": ns, "id": cid} for ns, cid in idents])
    rows = db.execute(
        "SELECT l.namespace, l.conversation, l.content_hash FROM agefacts.ingest_log l "
        "JOIN jsonb_to_recordset(%s::jsonb) AS r(ns text, id text) ON l.namespace = r.ns AND l.conversation = r.id "
        "WHERE l.graph = %s",
        (payload, db.graph),
    )
    return {(ns, cid): h for ns, cid, h in rows}


def lock(
    db: Database, idents: Sequence[tuple[str, str]], *, moves: bool = True, each: bool = True
) -> dict[tuple[str, str], str]:
    """Inside the caller's transaction: take a lock per conversation (held to the end of the
    transaction, in one order for every loader so two cannot deadlock), then read the hashes
    as they are now. The read is a statement of its own, so it sees whatever a loader that
    held the lock before committed.

    Each conversation's namespace is locked too, shared (a move locks it alone: it waits for
    the writes under way, and the writes after it see its note): a namespace that is being
    moved, or was moved, from this server is refused with :class:`NamespaceMoved` (unless
    ``moves`` is false: the move's own writes).

    ``each`` false locks the namespaces alone: a first load (agefacts.firstload), whose
    transaction creates the graph's labels and so holds every other writer at its own
    creating of them until it commits, and which would hold a lock per conversation for the
    whole load (at 30,000 conversations more than a server's lock table holds)."""
    ordered = sorted(set(idents))
    if not ordered:
        return {}
    namespaces = sorted({ns for ns, _ in ordered})
    payload = json.dumps([{"ns": ns, "id": cid} for ns, cid in ordered])
    # One statement for both kinds: the namespaces' locks are shared among writers and the
    # move's holds no conversation's, so their order cannot make a deadlock.
    db.execute(
        "SELECT (SELECT count(pg_advisory_xact_lock_shared(hashtextextended(%(g)s || chr(30) || ns, 0))) "
        "  FROM unnest(%(ns)s::text[]) AS ns) "
        "+ (SELECT count(pg_advisory_xact_lock(hashtextextended(%(g)s || chr(31) || r.ns || chr(31) || r.id, 0))) "
        "  FROM jsonb_to_recordset(%(idents)s::jsonb) AS r(ns text, id text))",
        {"g": db.graph, "ns": namespaces, "idents": payload if each else "[]"},
    )
    # What was committed before the locks were had, in one read: the hashes, and the notes
    # of namespaces leaving this server.
    rows = db.execute(
        "SELECT 'h', l.namespace, l.conversation, l.content_hash FROM agefacts.ingest_log l "
        "JOIN jsonb_to_recordset(%(idents)s::jsonb) AS r(ns text, id text) "
        "ON l.namespace = r.ns AND l.conversation = r.id WHERE l.graph = %(g)s "
        "UNION ALL SELECT 'm', m.namespace, m.server, m.state FROM agefacts.moves m "
        "WHERE %(moves)s AND m.graph = %(g)s AND m.namespace = ANY(%(ns)s::text[])",
        {"g": db.graph, "ns": namespaces, "idents": payload, "moves": moves},
    )
    _refuse({ns: (server, state) for kind, ns, server, state in rows if kind == "m"})
    return {(ns, cid): h for kind, ns, cid, h in rows if kind == "h"}


def lock_namespace(db: Database, namespace: str) -> None:
    """Inside the caller's transaction: the namespace to itself (see :func:`lock`)."""
    db.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s || chr(30) || %s, 0))", (db.graph, namespace))


def moves(db: Database, namespaces: Sequence[str] | None = None) -> dict[str, tuple[str, str]]:
    """The notes of namespaces that left this server or are leaving it: (server, state) by
    namespace (of ``namespaces``, or all)."""
    rows = db.execute(
        "SELECT namespace, server, state FROM agefacts.moves WHERE graph = %s "
        "AND (%s::text[] IS NULL OR namespace = ANY(%s::text[]))",
        (db.graph, namespaces, namespaces),
    )
    return {ns: (server, state) for ns, server, state in rows}


def _refuse(notes: dict[str, tuple[str, str]]) -> None:
    """A write to a namespace that is leaving this server, or left it, refused."""
    for ns, (server, state) in sorted(notes.items()):
        if state == "moving":
            raise NamespaceMoved(
                f"namespace {ns!r} is being moved to server {server!r}: its memory takes no writes until the "
                "move is done; send this again then",
                ns,
                server,
                moving=True,
            )
        raise NamespaceMoved(
            f"namespace {ns!r} was moved to server {server!r}; the placement that sent this here does not say "
            "so yet (`agefacts move` pins it in the placement file it is given)",
            ns,
            server,
            moving=False,
        )


def holds(db: Database, namespace: str) -> str | None:
    """What this server holds of the namespace: its note of it leaving (``moving`` or
    ``moved``), else ``data`` when a conversation of it is loaded here, else None."""
    rows = db.execute(
        "SELECT coalesce((SELECT state FROM agefacts.moves WHERE graph = %s AND namespace = %s), "
        "CASE WHEN EXISTS (SELECT 1 FROM agefacts.ingest_log WHERE graph = %s AND namespace = %s) "
        "THEN 'data' END)",
        (db.graph, namespace, db.graph, namespace),
    )
    got = rows[0][0]
    return None if got is None else str(got)


def note_move(db: Database, namespace: str, server: str, state: str) -> None:
    """Note on this server that ``namespace`` is leaving for ``server`` (``moving``) or left
    (``moved``)."""
    db.execute(
        "INSERT INTO agefacts.moves (graph, namespace, server, state) VALUES (%s, %s, %s, %s) "
        "ON CONFLICT (graph, namespace) DO UPDATE SET server = EXCLUDED.server, state = EXCLUDED.state, "
        "noted_at = now()",
        (db.graph, namespace, server, state),
    )


def clear_move(db: Database, namespace: str) -> None:
    """This server holds the namespace (again): no note of it leaving."""
    db.execute("DELETE FROM agefacts.moves WHERE graph = %s AND namespace = %s", (db.graph, namespace))


def record(db: Database, loaded: Sequence[Loaded]) -> None:
    """The ingest log and the question queue, for conversations just written."""
    g = db.graph
    idents = json.dumps([{"ns": x.conv.namespace, "id": x.conv.id} for x in loaded])
    # The document holds every turn again: turns appended since are folded into it.
    db.execute(
        "DELETE FROM agefacts.ingest_turns t USING jsonb_to_recordset(%s::jsonb) AS r(ns text, id text) "
        "WHERE t.graph = %s AND t.namespace = r.ns AND t.conversation = r.id",
        (idents, g),
    )
    # Columns as arrays zipped by unnest, the documents (a conversation's whole JSON each) as
    # a binary array: as text inside one JSON parameter every quote in them was escaped here
    # and parsed there again (a tenth of a large load's client time).
    db.execute(
        "INSERT INTO agefacts.ingest_log (graph, namespace, conversation, content_hash, counts, source, loaded_at, document) "
        "SELECT %s, r.ns, r.id, r.h, r.counts::jsonb, r.src, now(), r.doc "
        "FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %b::text[]) AS r(ns, id, h, counts, src, doc) "
        "ON CONFLICT (graph, namespace, conversation) DO UPDATE SET content_hash = EXCLUDED.content_hash, "
        "counts = EXCLUDED.counts, source = EXCLUDED.source, loaded_at = EXCLUDED.loaded_at, "
        "document = EXCLUDED.document",
        (
            g,
            [x.conv.namespace for x in loaded],
            [x.conv.id for x in loaded],
            [x.content_hash for x in loaded],
            [json.dumps(x.counts) for x in loaded],
            [x.source for x in loaded],
            [x.document for x in loaded],
        ),
    )
    _questions(db, loaded)


def record_appended(db: Database, loaded: Loaded, first: int, turns: Sequence[str]) -> None:
    """The ingest log and the question queue, for a conversation whose turns from ``first`` on
    (``turns``, each its JSON) were just appended: the row is updated and the new turns kept
    beside the document, which is not written again."""
    x = loaded
    db.execute(
        "UPDATE agefacts.ingest_log SET content_hash = %s, counts = %s::jsonb, source = %s, loaded_at = now() "
        "WHERE graph = %s AND namespace = %s AND conversation = %s",
        (x.content_hash, json.dumps(x.counts), x.source, db.graph, x.conv.namespace, x.conv.id),
    )
    db.execute(
        "INSERT INTO agefacts.ingest_turns (graph, namespace, conversation, ordinal, turn) "
        "SELECT %s, %s, %s, %s + r.i - 1, r.turn FROM unnest(%s::text[]) WITH ORDINALITY AS r(turn, i)",
        (db.graph, x.conv.namespace, x.conv.id, first, list(turns)),
    )
    _questions(db, [x])


AFTER_TURNS = '],"gold":null}'
"""What follows the turns in a conversation's JSON when it has no gold proposal: where turns
are appended to a document."""


def splice(document: str, turns: Sequence[str]) -> str:
    """A conversation's JSON with ``turns`` (each a turn's JSON) after its own."""
    if not turns:
        return document
    if not document.endswith(AFTER_TURNS):
        raise ValueError("turns are appended only to a conversation without a gold proposal")
    head = document[: -len(AFTER_TURNS)]
    return head + ("" if head.endswith("[") else ",") + ",".join(turns) + AFTER_TURNS


def _questions(db: Database, loaded: Sequence[Loaded]) -> None:
    g = db.graph
    convs = json.dumps([{"ns": x.conv.namespace, "id": x.conv.id} for x in loaded])
    db.execute(
        "DELETE FROM agefacts.questions q USING jsonb_to_recordset(%s::jsonb) AS r(ns text, id text) "
        "WHERE q.graph = %s AND q.namespace = r.ns AND q.conversation = r.id",
        (convs, g),
    )
    rows = [
        {
            "ns": x.conv.namespace,
            "id": x.conv.id,
            "gap": f.gap,
            "ek": f.entity_key,
            "pr": f.priority,
            "q": f.question,
            "why": f.reason,
            "at": f.asked_at,
        }
        for x in loaded
        for f in x.followups
    ]
    if rows:
        db.execute(
            "INSERT INTO agefacts.questions (graph, namespace, conversation, gap, entity_key, priority, question, reason, asked_at) "
            "SELECT %s, r.ns, r.id, r.gap, r.ek, r.pr, r.q, r.why, r.at FROM jsonb_to_recordset(%s::jsonb) "
            "AS r(ns text, id text, gap text, ek text, pr text, q text, why text, at text)",
            (g, json.dumps(rows)),
        )
    # A question about a name is answered once the entity has one, whichever load named it:
    # resolved at the earliest time a conversation gave the name.
    # (MENTIONED_IN exists: every load creates all of agefacts' own labels first.)
    namespaces = sorted({x.conv.namespace for x in loaded})
    db.execute(
        sql.SQL(
            "UPDATE agefacts.questions q SET resolved_at = r.first FROM ("
            "  SELECT q2.namespace, q2.conversation, q2.gap, min(((e.properties::text)::jsonb)->>'at') AS first "
            "  FROM agefacts.questions q2 "
            "  JOIN {v} v ON ag_catalog.agtype_access_operator(v.properties, '\"k\"'::ag_catalog.agtype) "
            "     = (to_jsonb(q2.entity_key)::text)::ag_catalog.agtype "
            "  JOIN {m} e ON e.start_id = v.id "
            "  WHERE q2.graph = %s AND q2.namespace = ANY(%s) AND q2.resolved_at IS NULL AND q2.gap LIKE '%%.name' "
            "    AND ((e.properties::text)::jsonb) ? 'name' "
            "  GROUP BY q2.namespace, q2.conversation, q2.gap) r "
            "WHERE q.graph = %s AND q.namespace = r.namespace AND q.conversation = r.conversation AND q.gap = r.gap"
        ).format(
            v=sql.SQL("{}._ag_label_vertex").format(sql.Identifier(g)),
            m=sql.SQL("{}.{}").format(sql.Identifier(g), sql.Identifier("MENTIONED_IN")),
        ),
        (g, namespaces, g),
    )


def loaded_ids(db: Database, namespace: str, conversations: Sequence[str] | None = None) -> list[str]:
    """The ids of the namespace's conversations loaded into this graph (of ``conversations``
    when given), sorted."""
    rows = db.execute(
        "SELECT conversation FROM agefacts.ingest_log WHERE graph = %s AND namespace = %s "
        "AND (%s::text[] IS NULL OR conversation = ANY(%s::text[])) ORDER BY conversation",
        (db.graph, namespace, conversations, conversations),
    )
    return [r[0] for r in rows]


_APPENDED = (
    "(SELECT array_agg(t.turn ORDER BY t.ordinal) FROM agefacts.ingest_turns t "
    "WHERE t.graph = l.graph AND t.namespace = l.namespace AND t.conversation = l.conversation)"
)


def documents(db: Database, namespace: str, conversations: Sequence[str] | None = None) -> list[tuple[str, str | None]]:
    """(id, the conversation as loaded) for the namespace's conversations, sorted by id; the
    document is None for one loaded before agefacts kept them."""
    rows = db.execute(
        "SELECT l.conversation, l.document, " + _APPENDED + " FROM agefacts.ingest_log l WHERE l.graph = %s "
        "AND l.namespace = %s AND (%s::text[] IS NULL OR l.conversation = ANY(%s::text[])) ORDER BY l.conversation",
        (db.graph, namespace, conversations, conversations),
    )
    return [(r[0], None if r[1] is None else splice(r[1], r[2] or ())) for r in rows]


def stored(db: Database, namespace: str, conversation: str) -> tuple[str, str | None] | None:
    """(content hash, the conversation as loaded) of one conversation, or None when it was
    never loaded; the document is None for one loaded before agefacts kept them."""
    rows = db.execute(
        "SELECT l.content_hash, l.document, " + _APPENDED + " FROM agefacts.ingest_log l WHERE l.graph = %s "
        "AND l.namespace = %s AND l.conversation = %s",
        (db.graph, namespace, conversation),
    )
    if not rows:
        return None
    h, document, appended = rows[0]
    return h, None if document is None else splice(document, appended or ())


def drop(db: Database, namespace: str, conversations: Sequence[str]) -> None:
    """Forget the ledger and question rows of these conversations, and what was paid for them
    and not written."""
    for table in ("ingest_log", "ingest_turns", "questions", "extractions"):
        db.execute(
            sql.SQL("DELETE FROM agefacts.{} WHERE graph = %s AND namespace = %s AND conversation = ANY(%s)").format(
                sql.Identifier(table)
            ),
            (db.graph, namespace, list(conversations)),
        )


def _said(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def keep_paid(db: Database, namespace: str, conversation: str, turns: Sequence[Turn], model: str | None) -> None:
    """Keep what a model answered for these person's turns (their extraction, or their error),
    and the model that answered, until they are written (:func:`forget_paid`): committed at
    once, so that a process killed before the write leaves it for the add made again."""
    if not turns:
        return
    # One row a text: a turn said twice in one add was answered alike (by its text) twice.
    by_text = {t.text: t for t in turns}
    payload = json.dumps(
        [{"said": _said(x), "turn": t.model_dump_json(exclude_none=True)} for x, t in by_text.items()],
        ensure_ascii=False,
    )
    db.execute(
        "INSERT INTO agefacts.extractions AS x (graph, namespace, conversation, said, turn, model) "
        "SELECT %s, %s, %s, r.said, r.turn, %s FROM jsonb_to_recordset(%s::jsonb) AS r(said text, turn text) "
        "ON CONFLICT (graph, namespace, conversation, said) DO UPDATE SET turn = excluded.turn, "
        "model = excluded.model, paid_at = now()",
        (db.graph, namespace, conversation, model, payload),
    )


def paid(db: Database, namespace: str, conversation: str) -> tuple[dict[str, Turn], str | None]:
    """What was paid for person's turns of this conversation and not written, by the turn's
    text, and the model that answered last."""
    out: dict[str, Turn] = {}
    model = None
    for doc, by in db.execute(
        "SELECT turn, model FROM agefacts.extractions WHERE graph = %s AND namespace = %s AND conversation = %s "
        "ORDER BY paid_at",
        (db.graph, namespace, conversation),
    ):
        turn = Turn.model_validate_json(doc)
        out[turn.text] = turn
        model = by or model
    return out, model


def forget_paid(db: Database, namespace: str, conversation: str, texts: Sequence[str]) -> None:
    """What was paid for these turns' texts is written: not kept any more."""
    if texts:
        db.execute(
            "DELETE FROM agefacts.extractions WHERE graph = %s AND namespace = %s AND conversation = %s "
            "AND said = ANY(%s)",
            (db.graph, namespace, conversation, sorted({_said(t) for t in texts})),
        )


def export(db: Database, namespace: str, conversations: Sequence[str] | None = None) -> list[Conversation]:
    """The namespace's conversations as they were loaded, with their recorded extractions:
    loading them into an empty graph gives the graph they gave here."""
    from .errors import QueryError

    docs = documents(db, namespace, conversations)
    if conversations is not None and (unknown := sorted(set(conversations) - {i for i, _ in docs})):
        raise QueryError(
            f"namespace {namespace!r} has no conversation {', '.join(map(repr, unknown))} loaded in graph {db.graph!r}"
        )
    if missing := [i for i, d in docs if d is None]:
        raise QueryError(
            f"{len(missing)} conversation(s) of namespace {namespace!r} ({', '.join(missing[:5])}"
            f"{', ...' if len(missing) > 5 else ''}) were loaded before agefacts kept what it loads; "
            "load their files again with `agefacts load --force` and export again"
        )
    return [Conversation.model_validate_json(d) for _, d in docs if d is not None]


_NO_RIGHT = "42501"  # insufficient_privilege
_log = logging.getLogger(__name__)


def _ontology_json(ontology: Ontology) -> tuple[str, str]:
    text = json.dumps(ontology.model_dump(mode="json"), sort_keys=True, ensure_ascii=False)
    return text, hashlib.sha256(text.encode()).hexdigest()


def record_ontology(db: Database, ontology: Ontology) -> bool:
    """Keep ``ontology`` as the one the graph is loaded with; whether it replaced another.
    The common case (the same ontology again) reads one row and writes nothing, and on a
    connection that kept it already, reads nothing."""
    text, digest = _ontology_json(ontology)
    # A Memory adds with one ontology again and again: each add's loader need not read it back.
    if db.kept_ontology == digest:
        return False
    try:
        rows = db.execute("SELECT digest FROM agefacts.graph_ontology WHERE graph = %s", (db.graph,))
        if rows and rows[0][0] == digest:
            db.kept_ontology = digest
            return False
        db.execute(
            "INSERT INTO agefacts.graph_ontology (graph, ontology, digest) VALUES (%s, %s::jsonb, %s) "
            "ON CONFLICT (graph) DO UPDATE SET ontology = EXCLUDED.ontology, digest = EXCLUDED.digest, "
            "loaded_at = now()",
            (db.graph, text, digest),
        )
    except DatabaseError as exc:
        if exc.sqlstate != _NO_RIGHT:
            raise
        # A role granted before this table existed: the load goes on; `agefacts setup` grants it.
        _log.info("the ontology of graph %r not kept: %s", db.graph, exc)
        return False
    db.kept_ontology = digest
    return bool(rows)


def graph_ontology(db: Database) -> Ontology | None:
    """The ontology the graph was last loaded with, or None (never loaded, or loaded by an
    agefacts that did not keep it)."""
    try:
        rows = db.execute("SELECT ontology FROM agefacts.graph_ontology WHERE graph = %s", (db.graph,))
    except DatabaseError as exc:
        if exc.sqlstate != _NO_RIGHT:
            raise
        _log.info("the ontology of graph %r not read: %s", db.graph, exc)
        return None
    if not rows:
        return None
    return parse_ontology(rows[0][0], f"the ontology graph {db.graph!r} was loaded with")


def graph_ontology_or_shipped(db: Database) -> Ontology:
    """What judges the graph's facts when no ontology is given: the one it was last loaded
    with, else the shipped one."""
    return graph_ontology(db) or default_ontology()
