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
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from .compile import Plan
from .db import Database

__all__ = ["BulkWriter", "Batch", "assemble"]

# Lateral subqueries end in OFFSET 0 so the planner cannot flatten them into hash joins over
# whole label tables (it has no statistics to know the key lists are short).
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
        # The loader creates labels before it opens a batch's transaction, so a label id read
        # here is never one that a rollback takes away again.
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
        self.write_batch(assemble(plans))

    def write_batch(self, batch: Batch) -> None:
        """Write an assembled batch. All the Python work was done by :func:`assemble` (the
        loader runs it in its worker thread); what is left here is the database's."""
        self.db.ensure_labels(vertex=batch.vertex_labels, edge=batch.edge_labels)
        ids: dict[str, tuple[int, int]] = {}
        existed: set[str] = set()
        for label, rows in batch.vertices:
            got, old = self._upsert_vertices(label, rows)
            ids.update(got)
            existed |= old
        for label, erows in batch.edges:
            # Every edge's ends are vertices of the same batch, so their ids are known; the
            # properties are already JSON, so the rows are put together as text.
            payload = "[" + ",".join(
                '{"a":%d,"b":%d,"c":%d,"d":%d,"p":%s}' % (*ids[s_], *ids[e_], pj) for s_, e_, pj in erows
            ) + "]"
            self._insert_edges_json(label, payload)
        entities: dict[str, set[str]] = defaultdict(set)
        for k, label in batch.entity_labels.items():
            if k in existed or k in batch.unsure:
                entities[label].add(k)
        for label, keys in sorted(entities.items()):
            self._recompute_entities(label, sorted(keys))
        statements = sorted(k for k in batch.statement_keys if k in existed)
        if statements:
            self._recompute_statements(statements)
        if batch.groups:
            self._supersede(batch.groups)


    def _upsert_vertices(self, label: str, rows: str) -> tuple[dict[str, tuple[int, int]], set[str]]:
        """Insert or merge; return each key's id as (label id, entry), and the keys that
        existed before. Ids travel as pairs because graphid's text input is unreliable on the
        embedded engine (32-bit), while ``_graphid(label, entry)`` builds one correctly."""
        lid, _ = self._label(label)
        table = self._table(label)
        q = sql.SQL(
            "INSERT INTO {t} AS v (id, properties) "
            "SELECT ag_catalog._graphid(%s, nextval(%s::regclass)), (r.p::text)::" + AG + " "
            "FROM jsonb_array_elements(%s::jsonb) AS r(p) "
            "ON CONFLICT (" + KEY_INDEXED + ") "
            "DO UPDATE SET properties = (((v.properties::text)::jsonb || (EXCLUDED.properties::text)::jsonb)::text)::" + AG + " "
            # xmax is 0 on a freshly inserted row and set on one that ON CONFLICT updated.
            "RETURNING v.id::text, " + KEY.format(t="v") + "::text, v.xmax::text <> '0'"
        ).format(t=table)
        out, existed = {}, set()
        for gid, key, old in self.db.execute(q, (lid, self._seq(label), rows)):
            n = int(gid)
            out[key] = (n >> 48, n & _ENTRY)  # an agtype string cast to text is the bare string
            if old:
                existed.add(key)
        return out, existed

    def _insert_edges(self, label: str, rows: list[list]) -> None:
        self._insert_edges_json(label, _dumps([{"a": a, "b": b, "c": c, "d": d, "p": props} for a, b, c, d, props in rows]))

    def _insert_edges_json(self, label: str, payload: str) -> None:
        lid, _ = self._label(label)
        q = sql.SQL(
            "INSERT INTO {t} (id, start_id, end_id, properties) "
            "SELECT ag_catalog._graphid(%s, nextval(%s::regclass)), ag_catalog._graphid(r.a, r.b), "
            "ag_catalog._graphid(r.c, r.d), (r.p::text)::" + AG + " "
            "FROM jsonb_to_recordset(%s::jsonb) AS r(a int, b bigint, c int, d bigint, p jsonb) "
            "ON CONFLICT (" + KEY_INDEXED + ") DO NOTHING"
        ).format(t=self._table(label))
        self.db.execute(q, (lid, self._seq(label), payload))

    # -- recomputing what several conversations contribute to ---------------------------------
    def _recompute_entities(self, label: str, keys: list[str]) -> None:
        """As the compiler's entity recompute: name, attrs and resolution from the latest
        mention that has them, mentions from all (left alone when there are none)."""
        q = sql.SQL(
            "WITH ent AS (SELECT v.id FROM unnest(%s::text[]) AS u(k) "
            "  CROSS JOIN LATERAL (SELECT v.id FROM {t} v WHERE {kv} = " + _as_agtype_key("u.k") + " OFFSET 0) v), "
            "m AS (SELECT e.start_id AS id, (e.properties::text)::jsonb AS p FROM ent "
            "  CROSS JOIN LATERAL (SELECT * FROM {mi} e WHERE e.start_id = ent.id OFFSET 0) e), "
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
            "WHERE v.id = has.id AND v.id = ANY(ARRAY(SELECT id FROM has))"
        ).format(t=self._table(label), kv=_key("v"), mi=self._table("MENTIONED_IN"))
        self.db.execute(q, (keys,))

    def _recompute_statements(self, keys: list[str]) -> None:
        """As the compiler's statement recompute: known time from the earliest evidence,
        confidence the highest, provenance that of the earliest evidence having it."""
        first = (
            "{name} AS (SELECT DISTINCT ON (id) id, p->'{f}' AS v FROM ev WHERE p ? '{f}' ORDER BY id, p->>'at', p->>'k')"
        )
        q = sql.SQL(
            "WITH st AS (SELECT s.id FROM unnest(%s::text[]) AS u(k) "
            "  CROSS JOIN LATERAL (SELECT s.id FROM {t} s WHERE {ks} = " + _as_agtype_key("u.k") + " OFFSET 0) s), "
            "ev AS (SELECT e.start_id AS id, (e.properties::text)::jsonb AS p FROM st "
            "  CROSS JOIN LATERAL (SELECT * FROM {eb} e WHERE e.start_id = st.id OFFSET 0) e), "
            "agg AS (SELECT id, min(p->>'at') AS first, max((p->>'confidence')::numeric) AS conf FROM ev GROUP BY id), "
            + ", ".join(first.format(name=n, f=f) for n, f in (("fm", "model"), ("fx", "extractor"), ("fr", "schema_ref")))
            + " UPDATE {t} s SET properties = (("
            "  ((s.properties::text)::jsonb - ARRAY['recorded_at', 'confidence', 'model', 'extractor', 'schema_ref']) "
            "  || jsonb_strip_nulls(jsonb_build_object('recorded_at', agg.first, 'confidence', agg.conf, "
            "     'model', fm.v, 'extractor', fx.v, 'schema_ref', fr.v)))::text)::" + AG + " "
            "FROM agg LEFT JOIN fm USING (id) LEFT JOIN fx USING (id) LEFT JOIN fr USING (id) "
            "WHERE s.id = agg.id AND s.id = ANY(ARRAY(SELECT id FROM st))"
        ).format(t=self._table("Statement"), ks=_key("s"), eb=self._table("EVIDENCED_BY"))
        self.db.execute(q, (keys,))

    def _supersede(self, groups: list[tuple[str, str, str]]) -> None:
        """As the compiler's supersession, for every (subject key, predicate) group at once.

        The database orders each group (so text compares as AGE compares it); the successor
        rule runs here; then only the statements and SUPERSEDES edges that change are written,
        which after the first load of a group is usually one or two."""
        g = sql.Identifier(self.db.graph)
        fmt = {
            "v": sql.SQL("{}._ag_label_vertex").format(g),
            "st": self._table("Statement"),
            "so": self._table("SUBJECT_OF"),
            "ab": self._table("ABOUT"),
            "sup": self._table("SUPERSEDES"),
            "kv": _key("v"),
            "ks": _key("s"),
            "kr": _key("r"),
        }
        # Subjects are looked up in their own label's key index, one part per label.
        labels = sorted({g[0] for g in groups})
        grp = sql.SQL(" UNION ALL ").join(
            sql.SQL(
                "SELECT DISTINCT v.id AS sid, u.pred FROM jsonb_to_recordset(%s::jsonb) AS u(k text, pred text) "
                "CROSS JOIN LATERAL (SELECT v.id FROM {t} v WHERE {kv} = " + _as_agtype_key("u.k") + " OFFSET 0) v"
            ).format(t=self._table(label), kv=_key("v"))
            for label in labels
        )
        params = [_dumps([{"k": k, "pred": pred} for lab, k, pred in groups if lab == label]) for label in labels]
        rows = self.db.execute(
            sql.SQL(
                "WITH grp AS ({grp}), "
                # LATERAL keeps every step an index lookup whatever the planner guesses.
                "gs AS (SELECT grp.sid, grp.pred, s.id, s.p FROM grp CROSS JOIN LATERAL ("
                "  SELECT s.id, (s.properties::text)::jsonb AS p FROM {so} so JOIN {st} s ON s.id = so.end_id "
                "  WHERE so.start_id = grp.sid OFFSET 0) s WHERE s.p->>'predicate' = grp.pred), "
                "st AS (SELECT gs.sid, gs.pred, gs.id, gs.p, "
                "  CASE WHEN gs.p->>'valid_until_inferred' = 'true' THEN NULL ELSE gs.p->>'valid_until' END AS stated, "
                "  coalesce(to_jsonb(((o.properties::text)::jsonb)->>'k'), gs.p->'value')::text AS ident "
                "  FROM gs LEFT JOIN LATERAL (SELECT o.properties FROM {ab} a JOIN {v} o ON o.id = a.end_id "
                "    WHERE a.start_id = gs.id OFFSET 0) o ON true) "
                "SELECT st.sid::text, st.pred, st.id::text, st.p->>'k', st.ident, "
                "  coalesce((st.p->>'ends_fact')::boolean, false), st.stated, st.p->>'valid_from', st.p->>'recorded_at', "
                "  st.p->>'valid_until', coalesce((st.p->>'valid_until_inferred')::boolean, false), st.p->>'superseded_at', "
                "  row_number() OVER (PARTITION BY st.sid, st.pred ORDER BY "
                "    coalesce(st.p->>'valid_from', st.stated, st.p->>'recorded_at'), st.p->>'recorded_at', st.p->>'k') "
                "FROM st"
            ).format(grp=grp, **fmt),
            params,
        )
        by_group: dict[tuple[str, str], list[tuple]] = defaultdict(list)
        for r in rows:
            by_group[(r[0], r[1])].append(r)
        patches: list[dict[str, Any]] = []
        wanted: dict[str, tuple[str, str]] = {}  # SUPERSEDES k -> (newer statement id, older statement id)
        ids = {r[3]: int(r[2]) for r in rows}
        for members in by_group.values():
            members.sort(key=lambda r: r[12])
            for i, old in enumerate(members):
                _, _, _, k, ident, neg, stated, vfrom, known, until, inferred, superseded, _ = old
                target = (stated, False, None)  # valid_until, inferred, superseded_at
                if not neg:
                    for new in members[i + 1 :]:
                        closing = new[5] or (new[7] is None and new[6] is not None)
                        if (not closing and new[4] != ident) or (closing and new[4] == ident):
                            if new[4] == ident:
                                start = new[6] or new[7] or new[8]
                            else:
                                start = new[7] or new[8]
                            learned = new[8] if new[8] > known else known
                            target = (stated if stated is not None else start, stated is None, learned)
                            wanted[f"sup:{k}>{new[3]}"] = (new[3], k)
                            break
                if (until, inferred, superseded) != target:
                    patches.append({"k": k, "p": {"valid_until": target[0], "valid_until_inferred": target[1] or None, "superseded_at": target[2]}})
        if patches:
            self.db.execute(
                sql.SQL(
                    "UPDATE {st} s SET properties = (("
                    "  ((s.properties::text)::jsonb - ARRAY['valid_until', 'valid_until_inferred', 'superseded_at']) "
                    "  || jsonb_strip_nulls(r.p))::text)::" + AG + " "
                    "FROM jsonb_to_recordset(%s::jsonb) AS r(k text, p jsonb) WHERE {ks} = " + _as_agtype_key("r.k") + " "
                    "AND s.id = ANY(ARRAY(SELECT s2.id FROM jsonb_to_recordset(%s::jsonb) AS r2(k text) "
                    "  CROSS JOIN LATERAL (SELECT s2.id FROM {st} s2 WHERE " + KEY.format(t="s2") + " = " + _as_agtype_key("r2.k") + " OFFSET 0) s2))"
                ).format(**fmt),
                (_dumps(patches), _dumps([{"k": p["k"]} for p in patches])),
            )
        members = [{"a": int(r[2]) >> 48, "b": int(r[2]) & _ENTRY} for r in rows]
        existing = {
            k
            for (k,) in self.db.execute(
                sql.SQL(
                    "SELECT {kr}::text FROM jsonb_to_recordset(%s::jsonb) AS u(a int, b bigint) "
                    "CROSS JOIN LATERAL (SELECT r.properties FROM {sup} r WHERE r.start_id = ag_catalog._graphid(u.a, u.b) OFFSET 0) r"
                ).format(**fmt),
                (_dumps(members),),
            )
        } if members else set()
        stale = sorted(existing - set(wanted))
        if stale:
            self.db.execute(
                sql.SQL("DELETE FROM {sup} r WHERE r.id = ANY(ARRAY(SELECT r2.id FROM unnest(%s::text[]) AS u(k) "
                        "CROSS JOIN LATERAL (SELECT r2.id FROM {sup} r2 WHERE " + KEY.format(t="r2") + " = " + _as_agtype_key("u.k") + " OFFSET 0) r2))").format(**fmt),
                (stale,),
            )
        missing = sorted(set(wanted) - existing)
        if missing:
            lid, _ = self._label("SUPERSEDES")
            edges = []
            for k in missing:
                new_k, old_k = wanted[k]
                a, b = ids[new_k], ids[old_k]
                edges.append([a >> 48, a & _ENTRY, b >> 48, b & _ENTRY, {"k": k}])
            self._insert_edges("SUPERSEDES", edges)


def _precompute(
    plans: Sequence[Plan],
    vertices: dict[str, dict[str, dict[str, Any]]],
    entity_labels: dict[str, str],
    statement_keys: set[str],
) -> set[str]:
    """Fill in the recomputed properties of this batch's entities and statements from the
    batch's own edges, by the same rules as the recompute. Returns the entities whose
    mentions need sorting by the database's collation (more than one distinct mention),
    which are left to the SQL recompute."""
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
        ms = sorted(mentions[k], key=lambda m: (m.get("at") or "", m["k"]), reverse=True)
        names = [m["name"] for m in ms if "name" in m]
        attrs = [m["attrs"] for m in ms if "attrs" in m]
        props = vertices[label][k]
        props["resolution"] = "resolved" if names else "nil_placeholder"
        if names:
            props["name"] = names[0]
        if attrs:
            props["attrs"] = attrs[0]
        distinct = {x for m in ms for x in m.get("mentions", [])}
        if len(distinct) == 1:
            props["mentions"] = sorted(distinct)
        elif len(distinct) > 1:
            unsure.add(k)
    for k in statement_keys:
        ev = sorted(evidence[k], key=lambda e: (e["at"], e["k"]))
        props = vertices["Statement"][k]
        props["recorded_at"] = ev[0]["at"]
        confidences = [e["confidence"] for e in ev if "confidence" in e]
        if confidences:
            props["confidence"] = max(confidences)
        for field in ("model", "extractor", "schema_ref"):
            firsts = [e[field] for e in ev if field in e]
            if firsts:
                props[field] = firsts[0]
    return unsure


@dataclass
class Batch:
    """A batch of plans put together for writing: vertex rows merged by key (later SETs win,
    as when the conversations' Cypher runs in order) with their derived properties filled in
    from the batch, as JSON text per label; edges per label with their properties as JSON."""

    vertices: list[tuple[str, str]]
    edges: list[tuple[str, list[tuple[str, str, str]]]]
    vertex_labels: list[str]
    edge_labels: list[str]
    entity_labels: dict[str, str]
    statement_keys: set[str]
    unsure: set[str]
    groups: list[tuple[str, str, str]]


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
    unsure = _precompute(plans, vertices, entity_labels, statement_keys)
    edges: dict[str, dict[str, tuple[str, str, str]]] = defaultdict(dict)
    for p in plans:
        for e in p.edges:
            if e.k not in edges[e.label]:
                edges[e.label][e.k] = (e.start, e.end, _dumps(e.props))
    return Batch(
        vertices=[(label, _dumps(list(rows.values()))) for label, rows in sorted(vertices.items())],
        edges=[(label, list(rows.values())) for label, rows in sorted(edges.items())],
        vertex_labels=sorted({label for p in plans for label in p.vertex_labels}),
        edge_labels=sorted({label for p in plans for label in p.edge_labels}),
        entity_labels=entity_labels,
        statement_keys=statement_keys,
        unsure=unsure,
        groups=sorted({g for p in plans for g in p.groups}),
    )
