"""Retraction: what a changed (or forgotten) conversation's old version wrote, removed set-wise,
for both load paths. :meth:`Retraction.retract` removes the old messages, evidence and
mentions of a batch of conversations in one statement; after the new versions are written
:meth:`Retraction.settle` removes the statements left without evidence and the entities left
without edges, and returns what is left to recompute."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from psycopg import sql

from .names import CORE_EDGE_LABELS, CORE_VERTEX_LABELS
from .tables import _AG, _ENTRY, _KEY, LabelTables, _as_agtype_key, _props, dumps

__all__ = ["Retraction", "Stale"]


@dataclass
class Stale:
    """What the old versions of replaced conversations touched: the statements they evidenced,
    the (subject label, subject key, predicate) groups of those statements, and the entities
    they mentioned (the groups are the chains whose fact versions are read again). After the
    new versions are written these are settled and recomputed: :meth:`Retraction.settle`
    returns what is left."""

    statements: set[str] = field(default_factory=set)
    groups: set[tuple[str, str, str]] = field(default_factory=set)
    entities: set[tuple[str, str]] = field(default_factory=set)
    keyphrases: set[int] = field(default_factory=set)  # ids of keyphrases that lost an APPEARS_IN edge
    # Per statement or entity key, the properties of its removed evidence or mention edges.
    removed: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    # Per statement key, the group it was found in.
    group_of: dict[str, tuple[str, str, str]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.statements or self.groups or self.entities or self.keyphrases)


class Retraction(LabelTables):
    """Removes what conversations wrote from ``db``'s graph. The caller owns the transaction."""

    def retract(self, conversation_keys: Sequence[str]) -> Stale:
        """Remove what the conversations with these keys wrote of their own (the conversation
        vertex, its messages, the evidence read from them, and its mentions) and return what
        that touched. Edges go explicitly: the embedded engine's DETACH DELETE leaves a
        vertex's edges behind."""
        stale = Stale()
        if not conversation_keys:
            return stale
        self.db.ensure_labels(vertex=sorted(CORE_VERTEX_LABELS), edge=sorted(CORE_EDGE_LABELS))
        fmt = self._fmt()
        scope = (
            "WITH c AS (SELECT id FROM ({conv}) c), "
            "m AS (SELECT p.start_id AS id FROM c CROSS JOIN LATERAL "
            "  (SELECT p.start_id FROM {po} p WHERE p.end_id = c.id OFFSET 0) p) "
        )
        rows = self.db.execute(
            sql.SQL(
                scope + ", s AS (SELECT DISTINCT e.start_id AS id FROM m CROSS JOIN LATERAL "
                "  (SELECT e.start_id FROM {eb} e WHERE e.end_id = m.id OFFSET 0) e) "
                # Ends are read as ids here and resolved to keys below, once per distinct id
                # and in their own label's table (the user is the subject of many statements).
                "SELECT 's', " + _KEY.format(t="v") + "::text, so.start_id::text, "
                "  ag_catalog.agtype_access_operator(v.properties, '\"predicate\"'::"
                + _AG
                + ")::text, s.id::text FROM s "
                "CROSS JOIN LATERAL (SELECT v.properties FROM {st} v WHERE v.id = s.id OFFSET 0) v "
                "CROSS JOIN LATERAL (SELECT so.start_id FROM {so} so WHERE so.end_id = s.id OFFSET 0) so "
                "UNION ALL "
                "SELECT 'e', NULL, mi.start_id::text, NULL, NULL FROM c "
                "CROSS JOIN LATERAL (SELECT mi.start_id FROM {mi} mi WHERE mi.end_id = c.id OFFSET 0) mi"
            ).format(**fmt),
            (list(conversation_keys),),
        )
        keys = self._keys_of({int(xid) for _, _, xid, _, _ in rows})
        key_of: dict[int, str] = {}
        for kind, sk, xid, pred, sid in rows:
            n = int(xid)
            label, xk = self._label_name(n >> 48), keys[n]
            if kind == "s":
                stale.statements.add(sk)
                stale.groups.add((label, xk, pred))
                stale.group_of[sk] = (label, xk, pred)
                key_of[int(sid)] = sk
            else:
                stale.entities.add((label, xk))
                key_of[n] = xk
        # The deleted evidence and mentions come back, so that a vertex whose edges the new
        # version writes again alike can be left as it is.
        for kind, vid, props in self.db.execute(
            sql.SQL(
                scope + ", "
                "d1 AS (DELETE FROM {eb} e WHERE e.end_id = ANY(ARRAY(SELECT id FROM m)) RETURNING e.start_id, e.properties), "
                "d2 AS (DELETE FROM {mi} e WHERE e.end_id = ANY(ARRAY(SELECT id FROM c)) RETURNING e.start_id, e.properties), "
                "d3 AS (DELETE FROM {po} e WHERE e.end_id = ANY(ARRAY(SELECT id FROM c)) RETURNING 1), "
                "d4 AS (DELETE FROM {msg} v WHERE v.id = ANY(ARRAY(SELECT id FROM m)) RETURNING 1), "
                # The conversation vertex too: its title is the version's, not its key's.
                "d5 AS (DELETE FROM {cv} v WHERE v.id = ANY(ARRAY(SELECT id FROM c)) RETURNING 1), "
                # Keyphrases: where they appear, and the co-occurrences these conversations
                # counted (each CO_OCCURS edge names the conversation that counted it).
                "d6 AS (DELETE FROM {ap} e WHERE e.end_id = ANY(ARRAY(SELECT id FROM m)) RETURNING e.start_id), "
                "d7 AS (DELETE FROM {co} e WHERE e.start_id = ANY(ARRAY(SELECT start_id FROM d6)) "
                "  AND ag_catalog.agtype_access_operator(e.properties, '\"conversation_k\"'::" + _AG + ") "
                "  = ANY(ARRAY(SELECT " + _as_agtype_key("u.k") + " FROM unnest(%s::text[]) AS u(k))) RETURNING 1) "
                "SELECT 'e', start_id::text, properties::text FROM d1 UNION ALL "
                "SELECT 'm', start_id::text, properties::text FROM d2 UNION ALL "
                "SELECT DISTINCT 'k', start_id::text, NULL FROM d6 UNION ALL "
                "SELECT 'n', NULL, ((SELECT count(*) FROM d3) + (SELECT count(*) FROM d4) + (SELECT count(*) FROM d5) "
                "  + (SELECT count(*) FROM d7))::text"
            ).format(**fmt),
            (list(conversation_keys), list(conversation_keys)),
        ):
            if kind == "k":
                stale.keyphrases.add(int(vid))
            elif kind != "n" and int(vid) in key_of:
                stale.removed[key_of[int(vid)]].append(_props(props))
        return stale

    def drop_if_bare(self, label: str, key: str) -> bool:
        """Delete the ``label`` vertex with this key if no edge of any label starts or ends at
        it; returns whether it was deleted. Each edge label's start_id and end_id indexes answer
        (sql/002_indexes.sql): the Cypher it replaces, ``OPTIONAL MATCH (u)-[e]-()``, joined
        every edge with every vertex (forgetting a namespace at 50k statements: 3 s)."""
        if label not in self._info:
            self._read_labels()
            if label not in self._info:
                return False
        rows = self.db.execute(
            sql.SQL(
                "WITH u AS ({lookup}), "
                "d AS (DELETE FROM {t} v USING u WHERE v.id = u.id AND NOT EXISTS "
                "  (SELECT 1 FROM {edges} e WHERE e.start_id = u.id) AND NOT EXISTS "
                "  (SELECT 1 FROM {edges} e WHERE e.end_id = u.id) RETURNING 1) "
                "SELECT count(*) FROM d"
            ).format(
                lookup=self._lookup(label),
                t=self._table(label),
                edges=sql.Identifier(self.db.graph, "_ag_label_edge"),
            ),
            ([key],),
        )
        return bool(rows[0][0])

    def settle(self, stale: Stale) -> Stale:
        """After the new versions are written: remove the stale statements that no evidence
        is left for (with their edges) and then the stale entities that no edge is left on;
        return what remains to recompute."""
        fmt = self._fmt()
        gone: set[str] = set()
        if stale.statements:
            gone = {
                k
                for (k,) in self.db.execute(
                    sql.SQL(
                        "WITH o AS (SELECT u.k, u.id FROM ({lookup}) u WHERE NOT EXISTS "
                        "  (SELECT 1 FROM {eb} e WHERE e.start_id = u.id)), "
                        "d1 AS (DELETE FROM {so} e WHERE e.end_id = ANY(ARRAY(SELECT id FROM o)) RETURNING 1), "
                        "d2 AS (DELETE FROM {ab} e WHERE e.start_id = ANY(ARRAY(SELECT id FROM o)) RETURNING 1), "
                        "d3 AS (DELETE FROM {st} v WHERE v.id = ANY(ARRAY(SELECT id FROM o)) RETURNING 1) "
                        "SELECT o.k FROM o, (SELECT (SELECT count(*) FROM d1) + (SELECT count(*) FROM d2) "
                        "  + (SELECT count(*) FROM d3)) n"
                    ).format(lookup=self._lookup("Statement"), **fmt),
                    (sorted(stale.statements),),
                )
            }
        dropped: set[tuple[str, str]] = set()
        by_label: dict[str, list[str]] = defaultdict(list)
        for label, k in sorted(stale.entities):
            by_label[label].append(k)
        for label, keys in by_label.items():
            for (k,) in self.db.execute(
                sql.SQL(
                    "WITH o AS (SELECT u.k, u.id FROM ({lookup}) u WHERE NOT EXISTS "
                    "  (SELECT 1 FROM {mi} e WHERE e.start_id = u.id) AND NOT EXISTS "
                    "  (SELECT 1 FROM {so} e WHERE e.start_id = u.id) AND NOT EXISTS "
                    "  (SELECT 1 FROM {ab} e WHERE e.end_id = u.id)), "
                    "d AS (DELETE FROM {t} v WHERE v.id = ANY(ARRAY(SELECT id FROM o)) RETURNING 1) "
                    "SELECT o.k FROM o, (SELECT count(*) FROM d) n"
                ).format(lookup=self._lookup(label), t=self._table(label), **fmt),
                (keys,),
            ):
                dropped.add((label, k))
        if stale.keyphrases:
            # A keyphrase no message says any more goes (its co-occurrences went with the
            # conversations that counted them).
            self.db.execute(
                sql.SQL(
                    "WITH o AS (SELECT v.id FROM {kp} v WHERE v.id = ANY(ARRAY(SELECT ag_catalog._graphid(u.a, u.b) "
                    "  FROM jsonb_to_recordset(%s::jsonb) AS u(a int, b bigint))) "
                    "  AND NOT EXISTS (SELECT 1 FROM {ap} e WHERE e.start_id = v.id)), "
                    "d1 AS (DELETE FROM {co} e WHERE e.start_id = ANY(ARRAY(SELECT id FROM o)) "
                    "  OR e.end_id = ANY(ARRAY(SELECT id FROM o)) RETURNING 1) "
                    "DELETE FROM {kp} v WHERE v.id = ANY(ARRAY(SELECT id FROM o))"
                ).format(**fmt),
                (dumps([{"a": n >> 48, "b": n & _ENTRY} for n in sorted(stale.keyphrases)]),),
            )
        return Stale(
            statements=stale.statements - gone,
            groups={g for g in stale.groups if (g[0], g[1]) not in dropped},
            entities=stale.entities - dropped,
            removed=stale.removed,
            group_of=stale.group_of,
        )
