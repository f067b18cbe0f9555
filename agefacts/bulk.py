"""The bulk path: a batch of compiled plans written set-wise into AGE's label tables.

AGE's MERGE scans its label for every row, so loading through Cypher slows quadratically.
Here every vertex and edge of a batch of conversations goes in with one SQL statement per
label: ``INSERT ... SELECT FROM jsonb_array_elements(<one JSON parameter>)`` with ids from
``_graphid(label id, nextval(label sequence))`` and ``ON CONFLICT`` on the unique key index
(sql/002_indexes.sql). Rows travel as one JSON array parameter rather than by COPY because
``COPY FROM STDIN`` kills the embedded engine's connection (pinned by a test).

The graph written is the one executing the compiled Cypher writes (``agefacts digest`` is
equal; a test checks it): a vertex upsert merges the new properties over the old as
``MERGE ... SET`` does, an edge insert does nothing when the keyed edge exists as the guarded
create does, and the properties computed from the whole graph (entity names and mentions,
statement known times, supersession) are recomputed with the same rules in SQL. Text compares
with the database's default collation, as AGE's own string comparison does.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from psycopg import sql

from .compile import Plan
from .db import Database

__all__ = ["BulkWriter"]

KEY = "ag_catalog.agtype_access_operator({t}.properties, '\"k\"'::ag_catalog.agtype)"
# The unique index's own expression, which ON CONFLICT must name exactly.
KEY_INDEXED = "ag_catalog.agtype_access_operator(properties, '\"k\"'::ag_catalog.agtype)"
AG = "ag_catalog.agtype"
_ENTRY = (1 << 48) - 1  # a graphid is the label id in the top 16 bits, the entry in the rest


def _key(alias: str) -> sql.SQL:
    return sql.SQL(KEY.format(t=alias))


def _as_agtype_key(expr: str) -> str:
    # A text key as the agtype string the key index holds.
    return f"(to_jsonb({expr})::text)::{AG}"


def _dumps(rows: Any) -> str:
    return json.dumps(rows, ensure_ascii=False, separators=(",", ":"))


class BulkWriter:
    """Writes plans into ``db``'s graph. The caller owns the transaction."""

    def __init__(self, db: Database):
        self.db = db
        self._info: dict[str, tuple[int, str]] = {}

    # -- labels ------------------------------------------------------------------------------
    def _label(self, name: str) -> tuple[int, str]:
        # Label ids are read fresh per batch (see write): a label made inside a transaction
        # that rolled back is gone again.
        if name not in self._info:
            rows = self.db.execute(
                "SELECT l.name, l.id, l.seq_name FROM ag_catalog.ag_label l "
                "JOIN ag_catalog.ag_graph g ON g.graphid = l.graph WHERE g.name = %s",
                (self.db.graph,),
            )
            for n, lid, seq in rows:
                self._info[n] = (lid, seq)
        return self._info[name]

    def _table(self, label: str) -> sql.Composed:
        return sql.SQL("{}.{}").format(sql.Identifier(self.db.graph), sql.Identifier(label))

    def _seq(self, label: str) -> str:
        return sql.Identifier(self.db.graph, self._label(label)[1]).as_string(self.db.conn)

    # -- writing -----------------------------------------------------------------------------
    def write(self, plans: Sequence[Plan]) -> None:
        self._info.clear()
        vlabels = sorted({v.label for p in plans for v in p.vertices})
        elabels = sorted({e.label for p in plans for e in p.edges} | {"SUPERSEDES"})
        self.db.ensure_labels(vertex=vlabels, edge=elabels)

        vertices: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
        for p in plans:
            for v in p.vertices:
                # Later SETs win, as when the conversations' Cypher runs in this order.
                vertices[v.label].setdefault(v.k, {}).update(v.props)
        ids: dict[str, tuple[int, int]] = {}
        for label, rows in sorted(vertices.items()):
            ids.update(self._upsert_vertices(label, list(rows.values())))

        edges: dict[str, dict[str, list]] = defaultdict(dict)
        for p in plans:
            for e in p.edges:
                # Every edge's ends are vertices of the same plan, so their ids are known.
                edges[e.label].setdefault(e.k, [*ids[e.start], *ids[e.end], e.props])
        for label, erows in sorted(edges.items()):
            self._insert_edges(label, list(erows.values()))

        entities: dict[str, set[str]] = defaultdict(set)
        for p in plans:
            for label, k in p.entities:
                entities[label].add(k)
        for label, keys in sorted(entities.items()):
            self._recompute_entities(label, sorted(keys))
        statements = sorted({k for p in plans for k in p.statements})
        if statements:
            self._recompute_statements(statements)
        groups = sorted({(g[1], g[2]) for p in plans for g in p.groups})
        if groups:
            self._supersede(groups)

    def _upsert_vertices(self, label: str, rows: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
        """Insert or merge, and return each key's id as (label id, entry): graphid's text
        input is unreliable on the embedded engine (32-bit), while ``_graphid(label, entry)``
        builds one correctly."""
        lid, _ = self._label(label)
        table = self._table(label)
        q = sql.SQL(
            "INSERT INTO {t} AS v (id, properties) "
            "SELECT ag_catalog._graphid(%s, nextval(%s::regclass)), (r.p::text)::" + AG + " "
            "FROM jsonb_array_elements(%s::jsonb) AS r(p) "
            "ON CONFLICT (" + KEY_INDEXED + ") "
            "DO UPDATE SET properties = (((v.properties::text)::jsonb || (EXCLUDED.properties::text)::jsonb)::text)::" + AG + " "
            "RETURNING v.id::text, " + KEY.format(t="v") + "::text"
        ).format(t=table)
        out = {}
        for gid, key in self.db.execute(q, (lid, self._seq(label), _dumps(rows))):
            n = int(gid)
            out[key] = (n >> 48, n & _ENTRY)  # an agtype string cast to text is the bare string
        return out

    def _insert_edges(self, label: str, rows: list[list]) -> None:
        lid, _ = self._label(label)
        q = sql.SQL(
            "INSERT INTO {t} (id, start_id, end_id, properties) "
            "SELECT ag_catalog._graphid(%s, nextval(%s::regclass)), ag_catalog._graphid(r.a, r.b), "
            "ag_catalog._graphid(r.c, r.d), (r.p::text)::" + AG + " "
            "FROM jsonb_to_recordset(%s::jsonb) AS r(a int, b bigint, c int, d bigint, p jsonb) "
            "ON CONFLICT (" + KEY_INDEXED + ") DO NOTHING"
        ).format(t=self._table(label))
        payload = [{"a": a, "b": b, "c": c, "d": d, "p": props} for a, b, c, d, props in rows]
        self.db.execute(q, (lid, self._seq(label), _dumps(payload)))

    # -- recomputing what several conversations contribute to ---------------------------------
    def _recompute_entities(self, label: str, keys: list[str]) -> None:
        """As the compiler's entity recompute: name, attrs and resolution from the latest
        mention that has them, mentions from all (left alone when there are none)."""
        q = sql.SQL(
            "WITH ent AS (SELECT v.id FROM {t} v JOIN unnest(%s::text[]) AS u(k) ON {kv} = " + _as_agtype_key("u.k") + "), "
            "m AS (SELECT e.start_id AS id, (e.properties::text)::jsonb AS p FROM {mi} e JOIN ent ON e.start_id = ent.id), "
            "has AS (SELECT DISTINCT id FROM m), "
            "named AS (SELECT DISTINCT ON (id) id, p->'name' AS v FROM m WHERE p ? 'name' "
            "  ORDER BY id, coalesce(p->>'at', '') DESC, p->>'k' DESC), "
            "attrs AS (SELECT DISTINCT ON (id) id, p->'attrs' AS v FROM m WHERE p ? 'attrs' "
            "  ORDER BY id, coalesce(p->>'at', '') DESC, p->>'k' DESC), "
            "ments AS (SELECT id, jsonb_agg(x ORDER BY x) AS v FROM "
            "  (SELECT DISTINCT id, jsonb_array_elements_text(p->'mentions') AS x FROM m) q GROUP BY id) "
            "UPDATE {t} v SET properties = ((("
            "  ((v.properties::text)::jsonb - ARRAY['name', 'attrs', 'resolution']) "
            "  - CASE WHEN ments.v IS NULL THEN ARRAY[]::text[] ELSE ARRAY['mentions'] END) "
            "  || jsonb_strip_nulls(jsonb_build_object('name', named.v, 'attrs', attrs.v, 'mentions', ments.v, "
            "     'resolution', CASE WHEN named.v IS NULL THEN 'nil_placeholder' ELSE 'resolved' END)))::text)::" + AG + " "
            "FROM has LEFT JOIN named USING (id) LEFT JOIN attrs USING (id) LEFT JOIN ments USING (id) "
            "WHERE v.id = has.id"
        ).format(t=self._table(label), kv=_key("v"), mi=self._table("MENTIONED_IN"))
        self.db.execute(q, (keys,))

    def _recompute_statements(self, keys: list[str]) -> None:
        """As the compiler's statement recompute: known time from the earliest evidence,
        confidence the highest, provenance that of the earliest evidence having it."""
        first = (
            "{name} AS (SELECT DISTINCT ON (id) id, p->'{f}' AS v FROM ev WHERE p ? '{f}' ORDER BY id, p->>'at', p->>'k')"
        )
        q = sql.SQL(
            "WITH st AS (SELECT s.id FROM {t} s JOIN unnest(%s::text[]) AS u(k) ON {ks} = " + _as_agtype_key("u.k") + "), "
            "ev AS (SELECT e.start_id AS id, (e.properties::text)::jsonb AS p FROM {eb} e JOIN st ON e.start_id = st.id), "
            "agg AS (SELECT id, min(p->>'at') AS first, max((p->>'confidence')::numeric) AS conf FROM ev GROUP BY id), "
            + ", ".join(first.format(name=n, f=f) for n, f in (("fm", "model"), ("fx", "extractor"), ("fr", "schema_ref")))
            + " UPDATE {t} s SET properties = (("
            "  ((s.properties::text)::jsonb - ARRAY['recorded_at', 'confidence', 'model', 'extractor', 'schema_ref']) "
            "  || jsonb_strip_nulls(jsonb_build_object('recorded_at', agg.first, 'confidence', agg.conf, "
            "     'model', fm.v, 'extractor', fx.v, 'schema_ref', fr.v)))::text)::" + AG + " "
            "FROM agg LEFT JOIN fm USING (id) LEFT JOIN fx USING (id) LEFT JOIN fr USING (id) WHERE s.id = agg.id"
        ).format(t=self._table("Statement"), ks=_key("s"), eb=self._table("EVIDENCED_BY"))
        self.db.execute(q, (keys,))

    def _supersede(self, groups: list[tuple[str, str]]) -> None:
        """As the compiler's supersession, for every (subject key, predicate) group at once."""
        g = sql.Identifier(self.db.graph)
        fmt = {
            "v": sql.SQL("{}._ag_label_vertex").format(g),
            "st": self._table("Statement"),
            "so": self._table("SUBJECT_OF"),
            "ab": self._table("ABOUT"),
            "sup": self._table("SUPERSEDES"),
            "kv": _key("v"),
        }
        grp = (
            "grp AS (SELECT DISTINCT v.id AS sid, u.pred FROM jsonb_to_recordset(%(groups)s::jsonb) AS u(k text, pred text) "
            "  JOIN {v} v ON {kv} = " + _as_agtype_key("u.k") + "), "
            "gs AS (SELECT grp.sid, grp.pred, s.id, (s.properties::text)::jsonb AS p FROM grp "
            "  JOIN {so} so ON so.start_id = grp.sid JOIN {st} s ON s.id = so.end_id "
            "  WHERE ((s.properties::text)::jsonb)->>'predicate' = grp.pred)"
        )
        params = {"groups": _dumps([{"k": k, "pred": pred} for k, pred in groups])}
        self.db.execute(sql.SQL("WITH " + grp + " DELETE FROM {sup} r USING gs WHERE r.start_id = gs.id").format(**fmt), params)
        self.db.execute(
            sql.SQL(
                "WITH " + grp + " UPDATE {st} s SET properties = (("
                "  gs.p - ARRAY['valid_until_inferred', 'superseded_at'] "
                "  - CASE WHEN gs.p->>'valid_until_inferred' = 'true' THEN ARRAY['valid_until'] ELSE ARRAY[]::text[] END"
                ")::text)::" + AG + " FROM gs WHERE s.id = gs.id"
            ).format(**fmt),
            params,
        )
        lid, _ = self._label("SUPERSEDES")
        params.update({"lid": lid, "seq": self._seq("SUPERSEDES")})
        self.db.execute(
            sql.SQL(
                "WITH " + grp + ", "
                "ord AS (SELECT gs.sid, gs.pred, gs.id, gs.p, gs.p->>'k' AS k, "
                "  coalesce(to_jsonb(((o.properties::text)::jsonb)->>'k'), gs.p->'value') AS ident, "
                "  coalesce((gs.p->>'ends_fact')::boolean, false) AS neg, "
                "  coalesce((gs.p->>'ends_fact')::boolean, false) OR (NOT gs.p ? 'valid_from' AND gs.p ? 'valid_until') AS closing, "
                "  coalesce(gs.p->>'valid_from', gs.p->>'recorded_at') AS begins, "
                "  coalesce(gs.p->>'valid_until', gs.p->>'valid_from', gs.p->>'recorded_at') AS endings, "
                "  gs.p->>'recorded_at' AS learned, "
                "  row_number() OVER (PARTITION BY gs.sid, gs.pred ORDER BY "
                "    coalesce(gs.p->>'valid_from', gs.p->>'valid_until', gs.p->>'recorded_at'), gs.p->>'recorded_at', gs.p->>'k') AS rn "
                "  FROM gs LEFT JOIN {ab} a ON a.start_id = gs.id LEFT JOIN {v} o ON o.id = a.end_id), "
                "pairs AS (SELECT o.id AS old_id, o.k AS old_k, o.p AS old_p, n.id AS new_id, n.k AS new_k, n.learned AS new_known, "
                "  CASE WHEN n.ident = o.ident THEN n.endings ELSE n.begins END AS new_start "
                "  FROM ord o CROSS JOIN LATERAL (SELECT * FROM ord j WHERE j.sid = o.sid AND j.pred = o.pred AND j.rn > o.rn "
                "    AND ((NOT j.closing AND j.ident <> o.ident) OR (j.closing AND j.ident = o.ident)) ORDER BY j.rn LIMIT 1) n "
                "  WHERE NOT o.neg), "
                "upd AS (UPDATE {st} s SET properties = (("
                "  pairs.old_p || jsonb_build_object("
                "    'superseded_at', CASE WHEN pairs.new_known > pairs.old_p->>'recorded_at' THEN pairs.new_known ELSE pairs.old_p->>'recorded_at' END, "
                "    'valid_until', coalesce(pairs.old_p->'valid_until', to_jsonb(pairs.new_start))) "
                "  || CASE WHEN pairs.old_p ? 'valid_until' THEN '{{}}'::jsonb ELSE '{{\"valid_until_inferred\": true}}'::jsonb END"
                "  )::text)::" + AG + " FROM pairs WHERE s.id = pairs.old_id RETURNING pairs.old_id, pairs.new_id, pairs.old_k, pairs.new_k) "
                "INSERT INTO {sup} (id, start_id, end_id, properties) "
                "SELECT ag_catalog._graphid(%(lid)s, nextval(%(seq)s::regclass)), upd.new_id, upd.old_id, "
                "  (jsonb_build_object('k', 'sup:' || upd.old_k || '>' || upd.new_k)::text)::" + AG + " FROM upd "
                "ON CONFLICT DO NOTHING"
            ).format(**fmt),
            params,
        )
