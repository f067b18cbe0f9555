"""The bulk path: a batch of compiled plans written set-wise into AGE's label tables.

AGE's MERGE scans its label for every row, so loading through Cypher slows quadratically.
Here every vertex and edge of a batch of conversations goes in set-wise, per label. On a
server, the keys that exist are looked up through the key index (sql/002_indexes.sql), those
rows are upserted, and the rest go in by ``COPY`` with ids taken from the label's sequence; an
edge with an end new to the graph is new too. A copied key that exists after all (a racing
writer committed it between the look-up and the copy) undoes the copy to a savepoint and the
batch is upserted instead. The upsert is ``INSERT ... SELECT FROM json_array_elements(<one
JSON parameter>)`` with ids from ``_graphid(label id, nextval(label sequence))`` and ``ON
CONFLICT`` on the key index, which is all the embedded engine takes: ``COPY FROM STDIN``
kills its connection (pinned by a test).

The graph written is the one executing the compiled Cypher and then ``agefacts derive`` writes
(``agefacts digest`` is equal; tests check it on the examples and on generated corpora): a
vertex upsert merges the new
properties over the old as ``MERGE ... SET`` does, an edge insert does nothing when the keyed
edge exists as the guarded create does, and the properties computed from the whole graph
(entity names and mentions, statement known times) are recomputed by the rules of
:mod:`agefacts.derive`, and the fact versions by :func:`agefacts.timeline.versions`, over rows
read back from the label tables, and only what changes is written. Mention words are ordered by the engine, as AGE's own text comparison (collation)
orders them.

Retraction (what a changed conversation's old version wrote) is set-wise too, and serves both
load paths: :mod:`agefacts.retract`.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from . import derive
from .clock import StageClock, stage
from .compile import Chain, Plan
from .db import Database, copy_value
from .errors import DatabaseError
from .names import CORE_EDGE_LABELS, CORE_VERTEX_LABELS
from .retract import Retraction, Stale
from .tables import (
    _AG,
    _ENTRY,
    _KEY,
    _KEY_INDEXED,
    _as_agtype_key,
    _field,
    _key,
    _namespace_is,
    _props,
    _value_in,
    dumps,
)

_log = logging.getLogger("agefacts.load")
_UNIQUE_VIOLATION = "23505"
_NOT_SUPPORTED = "0A000"

__all__ = [
    "Batch",
    "BulkWriter",
    "ReadElsewhere",
    "assemble",
    "read_versions_far",
    "statement_row",
]


class BulkWriter(Retraction):
    """Writes plans into ``db``'s graph (and retracts what conversations wrote:
    :class:`agefacts.retract.Retraction`). The caller owns the transaction.

    ``copy_new``: on a server, rows whose keys are new go in by ``COPY`` (False: every row by
    the upsert, as on the embedded engine); ``copy_conflicts`` counts the batches whose copy
    met an existing key and were upserted instead."""

    def __init__(self, db: Database, *, copy_new: bool = True, clock: StageClock | None = None):
        super().__init__(db)
        self.copy_new = copy_new
        self.clock = clock
        self.copy_conflicts = 0
        # The fact versions' labels hold nothing yet and have no key index (a first load,
        # agefacts.firstload): new versions go in as new rows, with nothing to merge.
        self.fresh_versions = False
        # Work for the server while the next write_versions_of reads time on its thread (a
        # first load builds its indexes meanwhile): run once, then forgotten.
        self.while_reading: Callable[[], None] | None = None
        # Where the next write_versions_of reads time instead of its thread: worker processes
        # with nothing left to prepare (a first load's end, a load's last batch). Given a part's
        # rows and the keys held, it starts reading them there and returns what waits for the
        # reading. Run once.
        self.read_elsewhere: ReadElsewhere | None = None

    # -- writing -----------------------------------------------------------------------------
    def write(self, plans: Sequence[Plan]) -> None:
        self.write_batch(assemble(plans))

    def write_batch(self, batch: Batch, stale: Stale | None = None) -> None:
        """Write an assembled batch. All the Python work was done by :func:`assemble` (the
        loader runs it in its worker thread); what is left here is the database's. ``stale``
        is what :meth:`retract` returned for the replaced conversations of this batch: it is
        settled once the new versions are written, and recomputed with the batch. The fact
        versions of every chain a statement written or removed here belongs to are
        recomputed last, from the statements as they then are."""
        with stage(self.clock, "labels"):
            self.db.ensure_labels(vertex=batch.vertex_labels, edge=batch.edge_labels)
        with stage(self.clock, "rows"):
            ids, existed = self._write_rows(batch)
        entities: dict[str, set[str]] = defaultdict(set)
        for k, label in batch.entity_labels.items():
            if k in existed or k in batch.unsure:
                entities[label].add(k)
        statements = {k for k in batch.statement_keys if k in existed}
        alike = _rewritten_alike(batch, stale) if stale else set()
        chains = _changed_chains(batch, stale)
        with stage(self.clock, "derived properties"):
            if stale:
                left = self.settle(stale)
                for label, k in left.entities:
                    entities[label].add(k)
                statements |= left.statements
            renamed = self.recompute({label: keys - alike for label, keys in entities.items()}, statements - alike)
        with stage(self.clock, "fact versions"):
            self.refresh_versions(chains | self.chains_about(renamed))

    def _write_rows(self, batch: Batch) -> tuple[dict[str, tuple[int, int]], set[str]]:
        """Write the batch's vertices and edges; return each vertex key's id and the keys
        that existed before. On a server, rows whose keys are new go in by ``COPY``; should
        one turn out to exist after all (a writer racing this one committed it first, or an
        edge some other writer left behind), the batch's rows are written again by the
        upsert, which takes any row, so the write stays idempotent."""
        if self.copy_new and self.db.copies:
            try:
                with self.db.transaction():  # a savepoint: a conflict undoes the copy alone
                    return self._copy_rows(batch)
            except DatabaseError as exc:
                if exc.sqlstate == _NOT_SUPPORTED:
                    # COPY FROM into a table under row-level security (a tenant's role): this
                    # connection writes every row by the upsert, which the policies check.
                    _log.info("rows cannot be copied here (%s); they are upserted", str(exc).splitlines()[0])
                    self.copy_new = False
                elif exc.sqlstate == _UNIQUE_VIOLATION:
                    self.copy_conflicts += 1
                    _log.info(
                        "a copied row existed already (%s); the batch is upserted instead", str(exc).splitlines()[0]
                    )
                else:
                    raise
        return self._upsert_rows(batch)

    def _upsert_rows(self, batch: Batch) -> tuple[dict[str, tuple[int, int]], set[str]]:
        ids: dict[str, tuple[int, int]] = {}
        existed: set[str] = set()
        for label, rows, keys in batch.vertices:
            with stage(self.clock, "vertices"):
                got, old = self._upsert_vertices(label, rows, keys, _keep(label))
            ids.update(got)
            existed |= old
        for label, erows, _ in batch.edges:
            with stage(self.clock, "edges"):
                self._insert_edges_json(label, _edge_payload(erows, ids))
        return ids, existed

    def _copy_rows(self, batch: Batch) -> tuple[dict[str, tuple[int, int]], set[str]]:
        """Vertices found by key are upserted (few: entities and statements other
        conversations share), the others copied with ids taken from their label's sequence;
        an edge with an end written here is new too, and copied. The keys of every label are
        looked up in one statement, and the ids of every label taken in one more (for the
        vertices, then for the edges): a round trip each rather than one per label."""
        ids: dict[str, tuple[int, int]] = {}
        existed: set[str] = set()
        with stage(self.clock, "key look-up"):
            found = self._ids_of_labels({label: keys for label, _, keys in batch.vertices})
        new: dict[str, list[int]] = {}
        for label, rows, keys in batch.vertices:
            there = found.get(label, {})
            if there:
                old = [i for i, k in enumerate(keys) if k in there]
                with stage(self.clock, "vertices"):
                    got, was = self._upsert_vertices(
                        label, [rows[i] for i in old], [keys[i] for i in old], _keep(label)
                    )
                ids.update(got)
                existed |= was
            new[label] = [i for i, k in enumerate(keys) if k not in there]
        with stage(self.clock, "key look-up"):  # ids from the labels' sequences
            entries = self._entries({label: len(todo) for label, todo in new.items()})
        for label, rows, keys in batch.vertices:
            if not new[label]:
                continue
            lid, taken = entries[label]
            high = lid << 48
            for i, n in zip(new[label], taken, strict=True):
                ids[keys[i]] = (lid, n)
            with stage(self.clock, "vertices"):
                self.write_new_vertices(label, ((high | n, rows[i]) for i, n in zip(new[label], taken, strict=True)))
        gid = {k: a << 48 | b for k, (a, b) in ids.items()}
        new_edges: dict[str, list[tuple[str, str, str]]] = {}
        for label, erows, _ in batch.edges:
            old_edges = [r for r in erows if r[0] in existed and r[1] in existed]
            if old_edges:
                with stage(self.clock, "edges"):
                    self._insert_edges_json(label, _edge_payload(old_edges, ids))
            new_edges[label] = [r for r in erows if r[0] not in existed or r[1] not in existed]
        with stage(self.clock, "edges"):
            self.copy_new_edges(new_edges, gid)
        return ids, existed

    def _ids_of_labels(self, keys: Mapping[str, Sequence[str]]) -> dict[str, dict[str, int]]:
        """For each label, the ids of its vertices that have the given keys, found through
        its key index, in one statement (the keys as binary arrays: a batch's are tens of
        thousands, each quoted and parsed again as text)."""
        labels = [label for label, ks in keys.items() if ks]
        if not labels:
            return {}
        parts = [
            sql.SQL("SELECT {i}, u.k, u.id::text FROM ({lookup}) u").format(
                i=sql.Literal(i), lookup=self._lookup(label, "%b")
            )
            for i, label in enumerate(labels)
        ]
        out: dict[str, dict[str, int]] = defaultdict(dict)
        for i, k, gid in self.db.execute(sql.SQL(" UNION ALL ").join(parts), [list(keys[label]) for label in labels]):
            out[labels[i]][k] = int(gid)
        return out

    def _entries(self, counts: Mapping[str, int]) -> dict[str, tuple[int, list[int]]]:
        """For each label, its label id and that many new entries of its sequence (the ids'
        lower 48 bits), taken in one statement."""
        labels = [label for label, n in counts.items() if n]
        if not labels:
            return {}
        out: dict[str, tuple[int, list[int]]] = {label: (self._label(label)[0], []) for label in labels}
        for i, n in self.db.execute(
            "SELECT u.i, nextval(u.seq::regclass) FROM unnest(%s::text[], %s::int[]) WITH ORDINALITY AS u(seq, n, i) "
            "CROSS JOIN LATERAL generate_series(1, u.n) ORDER BY u.i",
            ([self._seq(label) for label in labels], [counts[label] for label in labels]),
        ):
            out[labels[i - 1]][1].append(int(n))
        return out

    def _upsert_vertices(
        self, label: str, rows: Sequence[str], keys: Sequence[str], keep: Sequence[str] = ()
    ) -> tuple[dict[str, tuple[int, int]], set[str]]:
        """Insert or merge (leaving the properties named in ``keep`` of an existing vertex as
        they are) the vertices ``rows`` (JSON objects, their keys ``keys``); return each key's id
        as (label id, entry), and the keys that existed before. Ids travel as pairs because
        graphid's text input is unreliable on the embedded engine (32-bit), while
        ``_graphid(label, entry)`` builds one correctly. A vertex of another namespace is never
        merged into (:func:`_foreign_key`)."""
        lid, _ = self._label(label)
        table = self._table(label)
        merged = "((v.properties::text)::jsonb || ((EXCLUDED.properties::text)::jsonb - %(keep)s::text[]))::text"
        q = sql.SQL(
            "INSERT INTO {t} AS v (id, properties) "
            "SELECT ag_catalog._graphid(%(lid)s, nextval(%(seq)s::regclass)), (r.p::text)::" + _AG + " "
            # json, not jsonb: each element is handed on as the text it was sent as, where
            # jsonb parsed the whole batch into its binary form only to print each row again
            # for agtype to parse (a fifth of the upsert's time); agtype keeps no more of the
            # text than jsonb did (numbers are written as the values they are: tables.dumps).
            "FROM json_array_elements(%(rows)s::json) AS r(p) "
            "ON CONFLICT (" + _KEY_INDEXED + ") "
            "DO UPDATE SET properties = (" + merged + ")::" + _AG + " "
            # A row the merge would leave as it is is not written again (a new row version, its
            # index entries and WAL for nothing); the statement does not return it, so its id
            # is looked up below; nor is a row of another namespace, found there too.
            "WHERE v.properties::text IS DISTINCT FROM ((" + merged + ")::" + _AG + ")::text "
            "AND " + _field("v", "namespace") + " IS NOT DISTINCT FROM " + _field("EXCLUDED", "namespace") + " "
            # xmax is 0 on a freshly inserted row and set on one that ON CONFLICT updated.
            "RETURNING v.id::text, " + _KEY.format(t="v") + "::text, v.xmax::text <> '0'"
        ).format(t=table)
        out, existed = {}, set()
        params = {"lid": lid, "seq": self._seq(label), "rows": _array(rows), "keep": list(keep)}
        for gid, key, old in self.db.execute(q, params):
            n = int(gid)
            out[key] = (n >> 48, n & _ENTRY)  # an agtype string cast to text is the bare string
            if old:
                existed.add(key)
        left = [i for i, k in enumerate(keys) if k not in out]
        if left:
            for key, n in self._holders(label, _array([rows[i] for i in left])).items():
                out[key] = (n >> 48, n & _ENTRY)
                existed.add(key)
        return out, existed

    def _holders(self, label: str, rows: str) -> dict[str, int]:
        """The ids of the ``label`` vertices holding the keys of ``rows`` (a JSON array of
        objects with ``k`` and ``namespace``), found through the key index; a key held by a
        vertex of another namespace is refused (:func:`_foreign_key`)."""
        found = self.db.execute(
            sql.SQL(
                "SELECT r.p->>'k', v.id::text, " + _field("v", "namespace") + "::text, r.p->>'namespace' "
                "FROM jsonb_array_elements(%s::jsonb) AS r(p) "
                "CROSS JOIN LATERAL (SELECT v.id, v.properties FROM {t} v WHERE {kv} = "
                + _as_agtype_key("r.p->>'k'")
                + " OFFSET 0) v"
            ).format(t=self._table(label), kv=_key("v")),
            (rows,),
        )
        out = {}
        for key, gid, there, ours in found:
            if there != ours:
                raise _foreign_key(label, key, there, ours)
            out[key] = int(gid)
        return out

    def check_keys(self, vertices: Iterable[tuple[str, str, str | None]]) -> None:
        """Refuse to write vertices (label, key, namespace) one of whose keys a vertex of
        another namespace holds (:func:`_foreign_key`): the upsert checks as it writes; compiled
        Cypher, whose ``MERGE`` would take that vertex, is checked before it runs."""
        by_label: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for label, k, ns in vertices:
            by_label[label].append({"k": k, "namespace": ns})
        there = self._labels()
        for label, rows in sorted(by_label.items()):
            if label in there:
                self._holders(label, dumps(rows))

    def _insert_edges(self, label: str, rows: list[list[Any]]) -> None:
        self._insert_edges_json(
            label, dumps([{"a": a, "b": b, "c": c, "d": d, "p": props} for a, b, c, d, props in rows])
        )

    def _insert_edges_json(self, label: str, payload: str) -> None:
        lid, _ = self._label(label)
        q = sql.SQL(
            "INSERT INTO {t} (id, start_id, end_id, properties) "
            "SELECT ag_catalog._graphid(%s, nextval(%s::regclass)), ag_catalog._graphid(r.a, r.b), "
            "ag_catalog._graphid(r.c, r.d), (r.p::text)::" + _AG + " "
            # json: as the vertices' upsert (_upsert_vertices).
            "FROM json_to_recordset(%s::json) AS r(a int, b bigint, c int, d bigint, p json) "
            "ON CONFLICT (" + _KEY_INDEXED + ") DO NOTHING"
        ).format(t=self._table(label))
        self.db.execute(q, (lid, self._seq(label), payload))

    def drop_edges(self, label: str, keys: Sequence[str]) -> int:
        """Delete the ``label`` edges with these keys (an edge whose properties are written
        anew: edges are inserted with ON CONFLICT DO NOTHING); returns how many were."""
        if not keys:
            return 0
        rows = self.db.execute(
            sql.SQL(
                "WITH d AS (DELETE FROM {t} WHERE "
                + _KEY_INDEXED
                + " = ANY(ARRAY(SELECT "
                + _as_agtype_key("u.k")
                + " FROM unnest(%s::text[]) AS u(k))) RETURNING 1) SELECT count(*) FROM d"
            ).format(t=self._table(label)),
            (list(keys),),
        )
        return int(rows[0][0])

    # -- recomputing what several conversations contribute to ---------------------------------
    def recompute(self, entities: Mapping[str, set[str]], statements: set[str]) -> set[tuple[str, str]]:
        """Apply :mod:`agefacts.derive` to the given entities (by label) and statements, from
        the rows the graph holds now, and write what changed. Returns the entities (label,
        key) whose name changed (the reading of time orders values by name)."""
        renamed: set[tuple[str, str]] = set()
        for label, keys in sorted(entities.items()):
            if keys:
                renamed |= {(label, k) for k in self._recompute_entities(label, sorted(keys))}
        if statements:
            self._recompute_statements(sorted(statements))
        return renamed

    def _edges_of(
        self, label: str, keys: list[str], edge: str
    ) -> dict[str, tuple[int, dict[str, Any], list[dict[str, Any]]]]:
        """For each ``label`` vertex with one of ``keys``: its id, its properties, and the
        properties of its outgoing ``edge`` edges."""
        out: dict[str, tuple[int, dict[str, Any], list[dict[str, Any]]]] = {}
        for k, vid, vp, ep in self.db.execute(
            sql.SQL(
                "SELECT u.k, u.id::text, u.properties::text, e.properties::text FROM ({lookup}) u "
                "LEFT JOIN LATERAL (SELECT e.properties FROM {e} e WHERE e.start_id = u.id OFFSET 0) e ON true"
            ).format(lookup=self._lookup(label), e=self._table(edge)),
            (keys,),
        ):
            if k not in out:
                out[k] = (int(vid), _props(vp), [])
            if ep is not None:
                out[k][2].append(_props(ep))
        return out

    def _engine_order(self, words: set[str]) -> Callable[[Any], list[str]]:
        """Text in the order the engine compares it (its collation), which is the order
        AGE's ORDER BY gives the same strings in Cypher."""
        if not words:
            return sorted
        ranked = [
            w for (w,) in self.db.execute("SELECT x FROM unnest(%s::text[]) AS u(x) ORDER BY x", (sorted(words),))
        ]
        rank = {w: i for i, w in enumerate(ranked)}
        # A single word needs no order; only sets of several were ranked.
        return lambda ws: sorted(ws, key=lambda w: rank.get(w, -1))

    def _recompute_entities(self, label: str, keys: list[str]) -> set[str]:
        """Returns the keys of those whose name changed."""
        rows = self._edges_of(label, keys, "MENTIONED_IN")
        to_order: set[str] = set()
        for _, _, mentions in rows.values():
            words = {w for m in mentions for w in m.get("mentions") or ()}
            if len(words) > 1:
                to_order |= words
        order = self._engine_order(to_order)
        patches, renamed = [], set()
        for k, (vid, props, mentions) in rows.items():
            target = derive.entity_props(mentions, order)
            if target is not None:
                patch = _patch(vid, props, target)
                if patch and ("name" in patch[0]["set"] or "name" in patch[0]["unset"]):
                    renamed.add(k)
                patches += patch
        self._write_patches(label, patches)
        return renamed

    def _recompute_statements(self, keys: list[str]) -> None:
        rows = self._edges_of("Statement", keys, "EVIDENCED_BY")
        patches = []
        for vid, props, evidence in rows.values():
            target = derive.statement_props(evidence)
            if target is not None:
                patches += _patch(vid, props, target)
        self._write_patches("Statement", patches)

    def _write_patches(self, label: str, patches: list[dict[str, Any]]) -> None:
        """Set and remove properties of vertices by id: ``{"a": label id, "b": entry, "set":
        {...}, "unset": [...]}`` each."""
        if not patches:
            return
        self.db.execute(
            sql.SQL(
                "UPDATE {t} v SET properties = (((((v.properties::text)::jsonb) - r.unset) || r.set)::text)::"
                + _AG
                + " "
                "FROM (SELECT ag_catalog._graphid(r.a, r.b) AS id, r.set, ARRAY(SELECT jsonb_array_elements_text(r.unset)) AS unset "
                "  FROM jsonb_to_recordset(%s::jsonb) AS r(a int, b bigint, set jsonb, unset jsonb)) r "
                "WHERE v.id = r.id AND v.id = ANY(ARRAY(SELECT ag_catalog._graphid(r2.a, r2.b) "
                "  FROM jsonb_to_recordset(%s::jsonb) AS r2(a int, b bigint)))"
            ).format(t=self._table(label)),
            (dumps(patches), dumps([{"a": p["a"], "b": p["b"]} for p in patches])),
        )

    # -- fact versions: the reading of time, stored ----------------------------------------------
    # A chain is named by its subject's label and key and a predicate: a subject's values of a
    # one-value predicate, or (several chains, read together) its facts of another.
    def chains_about(self, entities: Iterable[tuple[str, str]]) -> set[tuple[str, str, str]]:
        """The chains with a statement about one of these entities (label, key): their
        reading orders values by the object's name, so a renamed entity's are read again."""
        by_label: dict[str, list[str]] = defaultdict(list)
        for label, k in sorted(set(entities)):
            by_label[label].append(k)
        if not by_label:
            return set()
        fmt = self._fmt()
        parts = [
            sql.SQL(
                "SELECT so.start_id::text, " + _field("s", "predicate") + "::text FROM ({lookup}) x "
                "CROSS JOIN LATERAL (SELECT a.start_id FROM {ab} a WHERE a.end_id = x.id OFFSET 0) a "
                "CROSS JOIN LATERAL (SELECT s.properties FROM {st} s WHERE s.id = a.start_id OFFSET 0) s "
                "CROSS JOIN LATERAL (SELECT so.start_id FROM {so} so WHERE so.end_id = a.start_id OFFSET 0) so"
            ).format(lookup=self._lookup(label), **fmt)
            for label in by_label
        ]
        rows = self.db.execute(sql.SQL(" UNION ALL ").join(parts), list(by_label.values()))
        return self._named_chains(rows)

    def _named_chains(self, rows: Iterable[tuple[str, str]]) -> set[tuple[str, str, str]]:
        """Chains from (subject id, predicate) rows."""
        rows = list(rows)
        keys = self._keys_of({int(sid) for sid, _ in rows})
        return {(self._label_name(int(sid) >> 48), keys[int(sid)], pred) for sid, pred in rows if int(sid) in keys}

    def drop_succession(self, namespace: str | None = None) -> int:
        """Remove what loads before fact versions wrote of write-time supersession, which the
        versions replace and which could disagree with them: ``SUPERSEDES`` edges, and a
        statement's ``valid_until_inferred`` (with the ``valid_until`` it marked),
        ``superseded_at`` and ``valid_start``. Returns how many statements changed."""
        of_ns = "(%(ns)s::text IS NULL OR " + _namespace_is("v") + ")"
        gone = ["valid_until_inferred", "superseded_at", "valid_start"]
        rows = self.db.execute(
            sql.SQL(
                "WITH u AS (UPDATE {st} v SET properties = (((((v.properties::text)::jsonb) - %(gone)s::text[] - "
                "CASE WHEN ((v.properties::text)::jsonb) ->> 'valid_until_inferred' = 'true' THEN ARRAY['valid_until'] "
                "ELSE ARRAY[]::text[] END)::text)::" + _AG + ") "
                "WHERE ((v.properties::text)::jsonb) ?| %(gone)s::text[] AND " + of_ns + " RETURNING 1) "
                "SELECT count(*) FROM u"
            ).format(st=self._table("Statement")),
            {"gone": gone, "ns": namespace},
        )
        if "SUPERSEDES" in self._labels():
            self.db.execute(
                sql.SQL(
                    "DELETE FROM {sup} e WHERE e.start_id = ANY(ARRAY(SELECT v.id FROM {st} v WHERE " + of_ns + "))"
                ).format(sup=self._table("SUPERSEDES"), st=self._table("Statement")),
                {"ns": namespace},
            )
        return int(rows[0][0])

    def every_chain(self, namespace: str | None = None) -> set[tuple[str, str, str]]:
        """Every chain with a statement or a fact version in the graph (of one namespace)."""
        self.db.ensure_labels(vertex=sorted(CORE_VERTEX_LABELS), edge=sorted(CORE_EDGE_LABELS))
        fmt = self._fmt()
        out = self._named_chains(
            self.db.execute(
                sql.SQL(
                    "SELECT DISTINCT so.start_id::text, " + _field("s", "predicate") + "::text "
                    "FROM {st} s JOIN {so} so ON so.end_id = s.id WHERE %(ns)s::text IS NULL OR " + _namespace_is("s")
                ).format(**fmt),
                {"ns": namespace},
            )
        )
        # Versions whose subject is gone (their statements with it) are chains too: to remove.
        known = {(k, pred) for _, k, pred in out}
        for sk, pred in self.db.execute(
            sql.SQL(
                "SELECT DISTINCT " + _field("f", "subject_key") + "::text, " + _field("f", "predicate") + "::text "
                "FROM {f} f WHERE %(ns)s::text IS NULL OR " + _namespace_is("f")
            ).format(f=self._table("Fact")),
            {"ns": namespace},
        ):
            if (sk, pred) not in known:
                out.add(("", sk, pred))
        return out

    def _chain_statements(
        self, pairs: list[dict[str, Any]], fmt: Mapping[str, Any]
    ) -> tuple[dict[int, dict[str, Any]], dict[int, int]]:
        """The statements of chains given as (subject id, key, predicate, whole, and when not
        whole the facts: object ids, values as JSON), by id with their properties and
        ``subject_key``; and the object id of each that has one."""
        statements: dict[int, dict[str, Any]] = {}
        objects: dict[int, int] = {}
        if not pairs:
            return statements, objects
        found = self._versions_read(
            sql.SQL(
                "SELECT g.k, s.id::text, s.properties::text, o.id::text "
                "FROM jsonb_to_recordset(%s::jsonb) AS g(a int, b bigint, k text, pred text, whole boolean, "
                "objs text[], vals text[]) "
                "CROSS JOIN LATERAL (SELECT s.id, s.properties FROM {so} so JOIN {st} s ON s.id = so.end_id "
                "  WHERE so.start_id = ag_catalog._graphid(g.a, g.b) AND "
                + _field("s", "predicate")
                + "::text = g.pred OFFSET 0) s "
                "LEFT JOIN LATERAL (SELECT a.end_id AS id FROM {ab} a WHERE a.start_id = s.id OFFSET 0) o ON true "
                "WHERE g.whole OR o.id::text = ANY(g.objs) OR (o.id IS NULL AND " + _value_in("s", "g.vals") + ")"
            ).format(**fmt),
            (dumps(pairs),),
        )
        for sk, stid, ptext, obj in found:
            p = json.loads(ptext)
            p["subject_key"] = sk
            statements[int(stid)] = p
            if obj is not None:
                objects[int(stid)] = int(obj)
        return statements, objects

    def refresh_versions(self, chains: set[Chain]) -> None:
        """Recompute the fact versions (:func:`agefacts.timeline.versions`) of these chains
        from the statements the graph holds now, and write what changed: a version is a
        ``Fact`` vertex keyed by its content and the time it was first read,
        ``(subject)-[:HOLDS]->(fact)``, ``(fact)-[:OBJECT]->(object)`` and ``statements``, the
        keys of the statements it rests on (a list, where an edge to each cost a fifth of the
        versions' writes). A chain whose subject is gone loses its versions.

        A chain is (subject label, subject key, predicate): every statement of that predicate
        about the subject; or, for a predicate of many values, one fact of it, (..., object
        label, object key) or (..., "", the value as JSON): a person's likes are many chains,
        and a like said again reads its own, not all of them (each add of a like read every
        like the person had, so an add cost more the longer the chat)."""
        if not chains:
            return
        rows, id_of, asked = self.chain_rows(chains)
        have, foreign = self._versions_held(rows, asked)
        self.write_versions_of(rows, id_of, have, foreign)

    def chain_rows(self, chains: set[Chain]) -> tuple[list[dict[str, Any]], dict[str, int], list[dict[str, Any]]]:
        """The statements of these chains the graph holds, each with evidence, as the reading
        of time takes them (:func:`statement_row`); the ids of their subjects and objects, by
        key; and the chains as the read of the versions held asks for them."""
        fmt = self._fmt()
        whole = {c[:3] for c in chains if len(c) == 3}
        facts_of: dict[tuple[str, str, str], set[tuple[str, str]]] = defaultdict(set)
        for c in chains:
            if len(c) == 5 and c[:3] not in whole:
                facts_of[c[:3]].add((c[3], c[4]))
        # By label, the keys of the subjects, and of the objects of the facts read alone.
        keys_of: dict[str, set[str]] = defaultdict(set)
        for c in chains:
            if c[0]:
                keys_of[c[0]].add(c[1])
        for about in facts_of.values():
            for olabel, ok in about:
                if olabel:
                    keys_of[olabel].add(ok)
        id_of_key = {
            (lab, k): i
            for lab, ids in self._ids_of_labels({lab: sorted(ks) for lab, ks in keys_of.items()}).items()
            for k, i in ids.items()
        }
        sid_of = {c[1]: id_of_key[c[0], c[1]] for c in chains if (c[0], c[1]) in id_of_key}

        def of_facts(about: set[tuple[str, str]]) -> dict[str, list[str]]:
            return {
                "objs": sorted(str(id_of_key[o]) for o in about if o[0] and o in id_of_key),
                "vals": sorted(v for olabel, v in about if not olabel),
                "okeys": sorted(ok for olabel, ok in about if olabel),
            }

        def pairs_of(narrowed: Mapping[tuple[str, str, str], set[tuple[str, str]]]) -> list[dict[str, Any]]:
            return [
                {
                    "a": sid_of[k] >> 48,
                    "b": sid_of[k] & _ENTRY,
                    "k": k,
                    "pred": pred,
                    "whole": (label, k, pred) in whole,
                }
                | of_facts(narrowed.get((label, k, pred), set()))
                for label, k, pred in sorted(whole | set(narrowed))
                if k in sid_of
            ]

        # The statements of these chains, each with its object, and every piece of evidence.
        statements, objects = self._chain_statements(pairs_of(facts_of), fmt)
        # A predicate read fact by fact whose statements say it holds one value at a time (the
        # ontology changed since they were written) is read whole.
        single = {(p["subject_key"], p.get("predicate")) for p in statements.values() if p.get("single_valued")}
        widen = {c for c in facts_of if c[1:] in single}
        if widen:
            whole |= widen
            facts_of = {c: about for c, about in facts_of.items() if c not in widen}
            statements, objects = self._chain_statements(pairs_of(facts_of), fmt)
        said: dict[int, list[list[Any]]] = defaultdict(list)
        if statements:
            evidence = self._versions_read(
                sql.SQL(
                    "SELECT e.start_id::text, e.properties::text, "
                    + _field("m", "conversation")
                    + "::text, "
                    + _field("m", "ordinal")
                    + "::text FROM jsonb_to_recordset(%s::jsonb) AS u(a int, b bigint) "
                    "CROSS JOIN LATERAL (SELECT e.end_id, e.start_id, e.properties FROM {eb} e "
                    "  WHERE e.start_id = ag_catalog._graphid(u.a, u.b) OFFSET 0) e "
                    "CROSS JOIN LATERAL (SELECT m.properties FROM {msg} m WHERE m.id = e.end_id OFFSET 0) m"
                ).format(**fmt),
                (dumps([{"a": i >> 48, "b": i & _ENTRY} for i in sorted(statements)]),),
            )
            for stid, etext, conv, ordinal in evidence:
                e = json.loads(etext)
                said[int(stid)].append(
                    [e.get("at"), e["k"], e.get("quote"), conv, int(ordinal), e.get("char_start"), e.get("char_end")]
                )
        named = self._fields_of(set(objects.values()), ("k", "name"))
        rows = []
        id_of: dict[str, int] = dict(sid_of)
        for stid, p in statements.items():
            if not said[stid]:
                continue
            obj = objects.get(stid)
            okey, oname = named.get(obj, (None, None)) if obj is not None else (None, None)
            if okey is not None and obj is not None:
                id_of[okey] = obj
            rows.append(statement_row(p, p["subject_key"], okey, oname, said[stid]))
        asked = [
            {"k": k, "pred": pred, "whole": c in whole} | of_facts(facts_of.get(c, set()))
            for c in sorted(whole | set(facts_of))
            for _, k, pred in [c]
        ]
        return rows, id_of, asked

    def _versions_held(
        self, rows: list[dict[str, Any]], asked: list[dict[str, Any]]
    ) -> tuple[dict[str, tuple[int, dict[str, Any]]], dict[str, tuple[str | None, str | None]]]:
        """The versions the graph holds for the chains ``asked`` (:meth:`chain_rows`; found
        by subject key: the subject may be gone), by key: their id and properties; and those
        of another namespace than the rows' subject's, by key: (their namespace, ours)."""
        ns_of = {r["subject_key"]: r["namespace"] for r in rows}
        have: dict[str, tuple[int, dict[str, Any]]] = {}
        foreign: dict[str, tuple[str | None, str | None]] = {}
        versions_held = self._versions_read(
            sql.SQL(
                "SELECT v.id::text, v.properties::text FROM jsonb_to_recordset(%s::jsonb) AS "
                "u(k text, pred text, whole boolean, okeys text[], vals text[]) "
                "CROSS JOIN LATERAL (SELECT v.id, v.properties FROM {f} v WHERE "
                + _field("v", "subject_key")
                + " = "
                + _as_agtype_key("u.k")
                + " OFFSET 0) v WHERE "
                + _field("v", "predicate")
                + "::text = u.pred AND (u.whole OR "
                + _field("v", "object_key")
                + "::text = ANY(u.okeys) OR "
                + _value_in("v", "u.vals")
                + ")"
            ).format(f=self._table("Fact")),
            (dumps(asked),),
        )
        for vid, ptext in versions_held:
            p = json.loads(ptext)
            ours = ns_of.get(p.get("subject_key"), p.get("namespace"))
            if p.get("namespace") != ours:
                # Written by hand under another namespace: not ours to change or remove.
                foreign[p["k"]] = (p.get("namespace"), ours)
                continue
            have[p["k"]] = (int(vid), p)
        return have, foreign

    def write_versions_of(
        self,
        rows: list[dict[str, Any]] | Callable[[], list[dict[str, Any]]],
        id_of: Mapping[str, int],
        have: Mapping[str, tuple[int, dict[str, Any]]],
        foreign: Mapping[str, tuple[str | None, str | None]],
    ) -> None:
        """Read the fact versions of whole chains' statement rows (:func:`statement_row`) and
        write what changed against ``have`` (the versions the graph holds for those chains, by
        key: their id and properties), refusing a key ``foreign`` holds; ``id_of``: the ids of
        the rows' subjects and objects, by key. ``rows`` may be the call that makes them: with
        work of the server's own to do meanwhile (``while_reading``), they are made on a
        thread while the server does it."""
        # The versions are read a part of the chains at a time on a thread of their own, while
        # this one writes the part read before: the engine writes while Python reads (on the
        # bench's load the reading was a third of the versions' time, the writing half). The
        # reading uses no connection; this thread holds the transaction and does every write.
        # While the loader's worker processes prepare batches, reading the versions in them
        # instead was no faster on two cores, both busy; at a first load's end they have nothing
        # left to prepare, and read every part (``read_elsewhere``).
        wanted: set[str] = set()
        held: dict[str, dict[str, Any]] = {}
        held_keys = frozenset(have)
        elsewhere, self.read_elsewhere = self.read_elsewhere, None
        # With work of the server's own to do meanwhile (a first load's indexes), the thread
        # reads every part, the first too, while this one hands the server that work.
        meanwhile, self.while_reading = self.while_reading, None
        ahead = 1 if meanwhile is not None or elsewhere is not None else 0
        # The first part is read here, which nothing could overlap: one part (an add) starts no
        # thread.
        reading = None if self.clock is None else self.clock.client_only()
        futures: list[Future[Any]] = []
        with ThreadPoolExecutor(1, thread_name_prefix="agefacts-versions") as thread:

            def start(made: list[dict[str, Any]]) -> tuple[list[list[dict[str, Any]]], list[Callable[[], _Read]]]:
                """The rows in parts, and for each part read ahead what waits for its reading."""
                parts = list(_parts(made))
                if elsewhere is not None:
                    return parts, [elsewhere(part, held_keys) for part in parts]
                later = [thread.submit(_read_versions, part, held_keys, reading) for part in parts[1 - ahead :]]
                futures.extend(later)
                return parts, [f.result for f in later]

            try:
                if callable(rows) and meanwhile is not None:
                    started = thread.submit(lambda: start(rows()))
                    futures.append(started)
                    meanwhile()
                    parts, read = started.result()
                else:
                    parts, read = start(rows() if callable(rows) else rows)
                    if meanwhile is not None:
                        meanwhile()
                for i, part in enumerate(parts):
                    made, links, new, props = (
                        read[i - 1 + ahead]() if i or ahead else _read_versions(part, held_keys, reading)
                    )
                    if clash := sorted(foreign.keys() & set(made)):
                        raise _foreign_key("Fact", clash[0], *foreign[clash[0]])
                    wanted.update(made)
                    held.update(props)
                    if new:
                        with stage(self.clock, "versions written"):
                            self._write_versions(new, links, id_of)
            except BaseException:
                # The transaction is to be rolled back: the rest need not be read. (What a worker
                # process reads ends with the loader's pool, which is closed without waiting.)
                for f in futures:
                    f.cancel()
                raise
        with stage(self.clock, "versions written"):
            self._drop_versions([vid for k, (vid, _) in have.items() if k not in wanted])
            patches = []
            for k, (vid, p) in have.items():
                if k in wanted:
                    patches += _patch(vid, p, {f: held[k].get(f) for f in set(p) | set(held[k])})
            self._write_patches("Fact", patches)

    def _versions_read(self, query: sql.Composable, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """A read of what refreshing versions needs (statements, their evidence, the versions
        held), counted as such."""
        with stage(self.clock, "versions read"):
            return self.db.execute(query, params)

    def _drop_versions(self, gone: list[int]) -> None:
        """Delete the versions ``gone`` (ids) and their HOLDS and OBJECT edges."""
        if gone:
            payload = dumps([{"a": i >> 48, "b": i & _ENTRY} for i in gone])
            ids = "ARRAY(SELECT ag_catalog._graphid(u.a, u.b) FROM jsonb_to_recordset(%s::jsonb) AS u(a int, b bigint))"
            self.db.execute(
                sql.SQL(
                    "WITH d1 AS (DELETE FROM {h} e WHERE e.end_id = ANY(" + ids + ") RETURNING 1), "
                    "d2 AS (DELETE FROM {o} e WHERE e.start_id = ANY(" + ids + ") RETURNING 1) "
                    "DELETE FROM {f} v WHERE v.id = ANY(" + ids + ")"
                ).format(h=self._table("HOLDS"), o=self._table("OBJECT"), f=self._table("Fact")),
                (payload, payload, payload),
            )

    def _write_versions(
        self,
        new: Mapping[str, str],
        links: Mapping[str, list[tuple[str, str, str, str]]],
        id_of: Mapping[str, int],
    ) -> None:
        """Write new fact versions (``new``: key -> properties as JSON) and their HOLDS and
        OBJECT edges (``links``: fact key -> (label, edge key, start key, end key); the ids of
        the ends that are not facts in ``id_of``)."""
        keys = sorted(new)
        if self.fresh_versions:
            self._write_new_versions(keys, new, links, id_of)
            return
        got, _ = self._upsert_vertices("Fact", [new[k] for k in keys], keys)
        ids = {k: a << 48 | b for k, (a, b) in got.items()}
        edges: dict[str, list[list[Any]]] = defaultdict(list)
        for fk in keys:
            for label, ek, a, b in links[fk]:
                ia, ib = ids.get(a) or id_of[a], ids.get(b) or id_of[b]
                edges[label].append([ia >> 48, ia & _ENTRY, ib >> 48, ib & _ENTRY, {"k": ek}])
        for label, erows in sorted(edges.items()):
            self._insert_edges(label, erows)

    def _write_new_versions(
        self,
        keys: list[str],
        new: Mapping[str, str],
        links: Mapping[str, list[tuple[str, str, str, str]]],
        id_of: Mapping[str, int],
    ) -> None:
        """:meth:`_write_versions` into labels that hold no versions yet: every row is new."""
        lid, taken = self._entries({"Fact": len(keys)})["Fact"]
        ids = {k: lid << 48 | n for k, n in zip(keys, taken, strict=True)}
        self.write_new_vertices("Fact", ((ids[k], new[k]) for k in keys))
        edges: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
        for fk in keys:
            for label, ek, a, b in links[fk]:
                edges[label].append((a, b, dumps({"k": ek})))
                for end in (a, b):
                    if end not in ids:
                        ids[end] = id_of[end]
        self.copy_new_edges(dict(sorted(edges.items())), ids)

    def copy_new_edges(self, edges: Mapping[str, Sequence[tuple[str, str, str]]], id_of: Mapping[str, int]) -> None:
        """Edges new to their labels (by label: start key, end key, properties as JSON; the
        ends' ids in ``id_of``), their own ids taken from the labels' sequences in one
        statement, then written by :meth:`write_new_edges`."""
        with stage(self.clock, "key look-up"):  # ids from the labels' sequences
            entries = self._entries({label: len(rows) for label, rows in edges.items()})
        for label, rows in edges.items():
            if not rows:
                continue
            lid, taken = entries[label]
            high = lid << 48
            self.write_new_edges(
                label, ((high | n, id_of[s_], id_of[e_], pj) for (s_, e_, pj), n in zip(rows, taken, strict=True))
            )

    def write_new_vertices(self, label: str, rows: Iterable[tuple[int, str]]) -> None:
        """Vertices new to ``label``'s table, each its id and its properties as JSON, written
        with nothing looked for: the caller knows their keys are new (a first load,
        agefacts.firstload). By ``COPY`` on a server; on the embedded engine, whose connection
        ``COPY FROM STDIN`` breaks, by one plain ``INSERT`` from a JSON array, the ids as
        (label id, entry) pairs (graphid's text input is unreliable there: _upsert_vertices)."""
        if self.db.copies:
            self.db.copy(self._table(label), ("id", "properties"), (f"{i}\t{copy_value(p)}\n" for i, p in rows))
            return
        payload = ",".join('{"a":%d,"b":%d,"p":%s}' % (i >> 48, i & _ENTRY, p) for i, p in rows)  # noqa: UP031
        if payload:
            self.db.execute(
                sql.SQL(
                    "INSERT INTO {t} (id, properties) SELECT ag_catalog._graphid(r.a, r.b), (r.p::text)::" + _AG + " "
                    "FROM json_to_recordset(%s::json) AS r(a int, b bigint, p json)"
                ).format(t=self._table(label)),
                ("[" + payload + "]",),
            )

    def write_new_edges(self, label: str, rows: Iterable[tuple[int, int, int, str]]) -> None:
        """Edges new to ``label``'s table, each its id, its start's and end's, and its
        properties as JSON: as :meth:`write_new_vertices`."""
        if self.db.copies:
            self.db.copy(
                self._table(label),
                ("id", "start_id", "end_id", "properties"),
                (f"{i}\t{s_}\t{e_}\t{copy_value(p)}\n" for i, s_, e_, p in rows),
            )
            return
        payload = ",".join(
            '{"a":%d,"b":%d,"c":%d,"d":%d,"e":%d,"f":%d,"p":%s}'  # noqa: UP031
            % (i >> 48, i & _ENTRY, s_ >> 48, s_ & _ENTRY, e_ >> 48, e_ & _ENTRY, p)
            for i, s_, e_, p in rows
        )
        if payload:
            self.db.execute(
                sql.SQL(
                    "INSERT INTO {t} (id, start_id, end_id, properties) SELECT ag_catalog._graphid(r.a, r.b), "
                    "ag_catalog._graphid(r.c, r.d), ag_catalog._graphid(r.e, r.f), (r.p::text)::" + _AG + " "
                    "FROM json_to_recordset(%s::json) AS r(a int, b bigint, c int, d bigint, e int, f bigint, p json)"
                ).format(t=self._table(label)),
                ("[" + payload + "]",),
            )


# Rows of chains read at a time by refresh_versions: small enough that the first part's
# reading (which nothing overlaps) is short, large enough that a thread's hand-over is nothing.
_PART = 500

# What reading a part gives: every version's key; the edges of the new ones (fact key ->
# (label, edge key, start key, end key)); the new ones as JSON by key; and the properties of
# those whose keys were held already, by key.
_Read = tuple[list[str], dict[str, list[tuple[str, str, str, str]]], dict[str, str], dict[str, dict[str, Any]]]


# Reading a part's versions elsewhere (BulkWriter.read_elsewhere): started by a call with the
# part's rows and the keys held; what it returns waits for the reading and gives it.
ReadElsewhere = Callable[[list[dict[str, Any]], frozenset[str]], Callable[[], _Read]]


def _parts(rows: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """The statement rows in parts of about :data:`_PART` rows, in the chains' order
    (:func:`agefacts.timeline.chain_of`), never parting the chains of one subject and
    predicate: versions alike in content and known time are of one subject and predicate, and
    are told apart by their place in its order (:func:`_read_versions`), so a part reads them
    as all of them read at once would."""
    from . import timeline

    by_chain: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_chain[timeline.chain_of(r)].append(r)
    part: list[dict[str, Any]] = []
    last: tuple[str, ...] | None = None
    for chain, chain_rows in sorted(by_chain.items()):
        if len(part) >= _PART and chain[:2] != last:
            yield part
            part = []
        part += chain_rows
        last = chain[:2]
    if part:
        yield part


def _read_versions(rows: list[dict[str, Any]], held: Collection[str], clock: StageClock | None = None) -> _Read:
    """The fact versions of whole chains' statement rows (:data:`_Read`). A version's key is
    its content and when it was first known, and, for versions alike in both (only one
    subject and predicate makes such), their place in its order."""
    with stage(clock, "reading of time"):
        from . import timeline
        from .keys import edge_key, make_key

        keys: list[str] = []
        links: dict[str, list[tuple[str, str, str, str]]] = {}
        new: dict[str, str] = {}
        props_of_held: dict[str, dict[str, Any]] = {}
        seen: dict[str, int] = defaultdict(int)
        for v in timeline.versions(rows):
            row = dict(v.row)
            content = derive.sorted_json([row, v.known_from])
            seen[content] += 1
            fk = make_key("fact", row["namespace"], row["subject_key"], row["predicate"], content, seen[content])
            props = {f: x for f, x in row.items() if x is not None}
            props.update(k=fk, known_from=v.known_from, said_at=list(v.said_at))
            if v.known_until is not None:
                props["known_until"] = v.known_until
            keys.append(fk)
            if fk in held:
                props_of_held[fk] = props
                continue
            new[fk] = dumps(props)
            ends = [("HOLDS", row["subject_key"], fk)]
            if row.get("object_key") is not None:
                ends.append(("OBJECT", fk, row["object_key"]))
            links[fk] = [(label, edge_key(label, a, b), a, b) for label, a, b in ends]
        return keys, links, new, props_of_held


def statement_row(
    p: Mapping[str, Any], subject_key: str, object_key: str | None, object_name: str | None, said: list[list[Any]]
) -> dict[str, Any]:
    """A statement as the reading of time takes it (:mod:`agefacts.timeline`): from its
    properties ``p``, its subject's key, its object's key and name, and each piece of its
    evidence as [time, edge key, quote, conversation, message ordinal, char start, char end]."""
    return {
        "statement": p["k"],
        "subject_key": subject_key,
        "predicate": p.get("predicate"),
        "object_key": object_key,
        "object": object_name if object_name is not None else object_key,
        "value": p.get("value"),
        "valid_from": p.get("valid_from"),
        "stated_until": p.get("valid_until"),
        "recurrence": p.get("recurrence"),
        "ends_fact": bool(p.get("ends_fact")),
        "corrects": bool(p.get("corrects")),
        "single_valued": bool(p.get("single_valued")),
        "namespace": p.get("namespace"),
        "said": said,
    }


def read_versions_far(
    rows: list[dict[str, Any]], held: frozenset[str], timed: bool = False
) -> tuple[_Read, dict[str, float]]:
    """:func:`_read_versions` in a worker process (:mod:`agefacts.workers`), with the CPU
    seconds it spent by stage when ``timed``."""
    clock = StageClock() if timed else None
    got = _read_versions(rows, held, clock)
    return got, ({} if clock is None else {n: t["client_s"] or 0.0 for n, t in clock.spent().items()})


def _foreign_key(label: str, key: str, there: str | None, ours: str | None) -> DatabaseError:
    """The refusal to write a vertex whose key a vertex of another namespace holds: keys are
    made from content and namespace, so only a vertex written by hand (or planted) can; merged,
    its properties would become the other namespace's (an end it chose for someone's fact)."""
    return DatabaseError(
        f"key {key!r} ({label}) is held by a vertex of namespace {there!r}, not {ours!r}: agefacts never "
        "writes one namespace's key into another, so it was written by hand; it is left as it is and what "
        f"needed the key is not written (remove that vertex, e.g. MATCH (n:{label} {{k: '{key}'}}) DETACH DELETE n "
        "as its owner, and load again)"
    )


def _keep(label: str) -> Sequence[str]:
    """What an existing vertex of ``label`` keeps when merged: its derived properties, until
    they are recomputed from the whole graph (so that a change of a statement's recorded_at
    can be seen), or for good when its edges are written again alike."""
    if label == "Statement":
        return derive.STATEMENT_DERIVED
    return () if label in CORE_VERTEX_LABELS else derive.ENTITY_DERIVED


def _array(rows: Sequence[str]) -> str:
    return "[" + ",".join(rows) + "]"


def _edge_payload(erows: Sequence[tuple[str, str, str]], ids: Mapping[str, tuple[int, int]]) -> str:
    # Every edge's ends are vertices of the same batch, so their ids are known; the
    # properties are already JSON, so the rows are put together as text (by % on the hot
    # path: the fastest way Python has to put ints and text together).
    return (
        "["
        + ",".join(
            '{"a":%d,"b":%d,"c":%d,"d":%d,"p":%s}' % (*ids[s_], *ids[e_], pj)  # noqa: UP031
            for s_, e_, pj in erows
        )
        + "]"
    )


def _changed_chains(batch: Batch, stale: Stale | None) -> set[Chain]:
    """The chains whose fact versions a batch may change: those of what it writes, and the
    groups of what retraction removed (as retraction saw them, before settling takes away
    subjects left with nothing). A statement of a replaced conversation whose evidence comes
    back exactly as it was (the same pieces, times, quotes and places) changes no version, and
    unless something else of its chain changed, its chain is not read again: replacing one
    conversation read a person's every one-value fact, the whole of its history."""
    if not stale:
        return set(batch.chain_of.values())
    same = _written_again_alike(batch, stale, lambda k: derive.SAID_INPUTS if k in stale.statements else ())
    changed = {batch.chain_of[k] for k in batch.statement_keys if k not in same}
    return changed | {stale.group_of[k] for k in stale.statements if k not in same}


def _rewritten_alike(batch: Batch, stale: Stale) -> set[str]:
    """The vertices whose removed mention or evidence edges the batch writes again with the
    same inputs to their rule: their derived properties stand as they are."""
    return _written_again_alike(
        batch, stale, lambda k: derive.EVIDENCE_INPUTS if k in stale.statements else derive.MENTION_INPUTS
    )


def _written_again_alike(batch: Batch, stale: Stale, fields: Callable[[str], Sequence[str]]) -> set[str]:
    """The keys whose removed edges (``stale.removed``) the batch writes again alike in the
    properties ``fields`` names for each key (none: not compared)."""
    out = set()
    for k, was in stale.removed.items():
        now = batch.edges_of.get(k, ())
        read = fields(k)
        if read and len(now) == len(was):
            if sorted(derive.inputs_of(p, read) for p in was) == sorted(derive.inputs_of(p, read) for p in now):
                out.add(k)
    return out


def _patch(vid: int, props: Mapping[str, Any], target: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The change (as one patch row, or none) that gives a vertex the target values: a None
    target removes the property."""
    # A float and an int of equal value compare equal in Python but are different agtype.
    put = {
        f: v for f, v in target.items() if v is not None and (props.get(f) != v or type(props.get(f)) is not type(v))
    }
    drop = [f for f, v in target.items() if v is None and f in props]
    if not put and not drop:
        return []
    return [{"a": vid >> 48, "b": vid & _ENTRY, "set": put, "unset": drop}]


def _precompute(
    plans: Sequence[Plan],
    vertices: dict[str, dict[str, dict[str, Any]]],
    entity_labels: dict[str, str],
    statement_keys: set[str],
) -> tuple[set[str], dict[str, list[dict[str, Any]]]]:
    """Fill in the derived properties of this batch's entities and statements from the
    batch's own edges, by :mod:`agefacts.derive` (right for vertices the batch creates; the
    writer recomputes those that existed from the whole graph). Returns the entities whose
    mention words need the engine's text order (more than one distinct word), which are left
    to the writer's recompute, and each vertex's mention or evidence edges of the batch."""
    mentions: dict[str, list[dict[str, Any]]] = defaultdict(list)
    evidence: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in plans:
        for e in p.edges:
            if e.label == "MENTIONED_IN":
                mentions[e.start].append(e.props)
            elif e.label == "EVIDENCED_BY":
                evidence[e.start].append(e.props)
    unsure: set[str] = set()
    for k, label in entity_labels.items():
        if len({x for m in mentions[k] for x in m.get("mentions") or ()}) > 1:
            unsure.add(k)
            continue
        target = derive.entity_props(mentions[k])
        if target is not None:
            _apply(vertices[label][k], target)
    for k in statement_keys:
        target = derive.statement_props(evidence[k])
        if target is not None:
            _apply(vertices["Statement"][k], target)
    return unsure, {**mentions, **evidence}


def _apply(props: dict[str, Any], target: Mapping[str, Any]) -> None:
    for f, v in target.items():
        if v is None:
            props.pop(f, None)
        else:
            props[f] = v


@dataclass
class Batch:
    """A batch of plans put together for writing: vertex rows merged by key (later SETs win,
    as when the conversations' Cypher runs in order) with their derived properties filled in
    from the batch, as JSON text per label; edges per label with their properties as JSON."""

    vertices: list[tuple[str, list[str], list[str]]]  # label, its rows (each as JSON), their keys
    edges: list[tuple[str, list[tuple[str, str, str]], list[str]]]  # label, (start key, end key, JSON), their keys
    vertex_labels: list[str]
    edge_labels: list[str]
    entity_labels: dict[str, str]
    statement_keys: set[str]
    chain_of: dict[str, Chain]  # statement key -> its chain
    unsure: set[str]
    edges_of: dict[str, list[dict[str, Any]]]  # entity or statement key -> its mention or evidence edges' properties


def assemble(plans: Sequence[Plan]) -> Batch:
    """Pure work, no database: everything about a batch that Python computes."""
    vertices: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for p in plans:
        for v in p.vertices:
            vertices[v.label].setdefault(v.k, {}).update(v.props)
    entity_labels = {k: label for p in plans for label, k in p.entities}
    statement_keys = {k for p in plans for k in p.statements}
    # What a new vertex's recomputed properties will be, from this batch alone; a vertex
    # that already existed is recomputed from the whole graph when written instead.
    unsure, edges_of = _precompute(plans, vertices, entity_labels, statement_keys)
    edges: dict[str, dict[str, tuple[str, str, str]]] = defaultdict(dict)
    for p in plans:
        for e in p.edges:
            if e.k not in edges[e.label]:
                edges[e.label][e.k] = (e.start, e.end, dumps(e.props))
    return Batch(
        vertices=[(label, [dumps(r) for r in rows.values()], list(rows)) for label, rows in sorted(vertices.items())],
        edges=[(label, list(rows.values()), list(rows)) for label, rows in sorted(edges.items())],
        vertex_labels=sorted({label for p in plans for label in p.vertex_labels}),
        edge_labels=sorted({label for p in plans for label in p.edge_labels}),
        entity_labels=entity_labels,
        statement_keys=statement_keys,
        chain_of={k: c for p in plans for k, c in p.chain_of.items()},
        unsure=unsure,
        edges_of=edges_of,
    )
