"""AGE's label tables as the bulk path reads and writes them: each label's id and sequence, its
table, a key's lookup through the key index (sql/002_indexes.sql), and rows as JSON."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from psycopg import sql
from pydantic_core import to_json as _to_json

from .db import Database

__all__ = ["LabelTables", "dumps"]

# Lateral subqueries end in OFFSET 0 so the planner cannot flatten them into hash joins over
# whole label tables (it has no statistics to know the key lists are short).
_KEY = "ag_catalog.agtype_access_operator({t}.properties, '\"k\"'::ag_catalog.agtype)"
# The unique index's own expression, which ON CONFLICT must name exactly.
_KEY_INDEXED = "ag_catalog.agtype_access_operator(properties, '\"k\"'::ag_catalog.agtype)"
_AG = "ag_catalog.agtype"
_ENTRY = (1 << 48) - 1  # a graphid is the label id in the top 16 bits, the entry in the rest


def _key(alias: str) -> sql.SQL:
    return sql.SQL(_KEY.format(t=alias))


def _field(alias: str, name: str) -> str:
    """A vertex's or edge's property ``name`` (an identifier) as agtype, in SQL over the label
    table aliased ``alias``: the expression the property indexes are built on."""
    return f"ag_catalog.agtype_access_operator({alias}.properties, '\"{name}\"'::{_AG})"


def _namespace_is(alias: str, param: str = "%(ns)s") -> str:
    """The condition that the row aliased ``alias`` is of the namespace in the text
    parameter ``param``."""
    return f"{_field(alias, 'namespace')} = {_as_agtype_key(param + '::text')}"


def _value_in(alias: str, values: str) -> str:
    """The condition that the ``value`` property of the row aliased ``alias`` is one of the
    JSON texts in the ``text[]`` expression ``values``, compared as the engine's Cypher compares
    values (30 is 30.0), as :func:`agefacts.derive.value_ident` does."""
    return f"{_field(alias, 'value')} = ANY(ARRAY(SELECT x::{_AG} FROM unnest({values}) AS x))"


def _as_agtype_key(expr: str) -> str:
    # A text key as the agtype string the key index holds.
    return f"(to_jsonb({expr})::text)::{_AG}"


def dumps(rows: Any) -> str:
    """Compact JSON for rows that travel into agtype (as the text sent, through ``json``, or
    through ``jsonb``). jsonb keeps a number's digits but not an exponent form, so a whole float
    that AGE writes ``1e+16`` would come back an integer: the gate stores such floats as the
    integers they equal
    (:func:`agefacts.gate.normalise_value`), so every number here survives the trip, including
    the merges of existing properties.

    Written by pydantic-core's serializer, four times as fast as the json module's (a tenth of
    preparing went to encoding rows): the same text but for a float's exponent, which it
    writes ``1e-5`` where json writes ``1e-05``, the same number to agtype and to jsonb."""
    return _to_json(rows).decode()


def _props(text: str | None) -> dict[str, Any]:
    """An agtype map read back as text (AGE writes maps as JSON)."""
    return json.loads(text) if text else {}


class LabelTables:
    """The label tables of ``db``'s graph."""

    def __init__(self, db: Database):
        self.db = db
        self._info: dict[str, tuple[int, str]] = {}

    def _label(self, name: str) -> tuple[int, str]:
        # The loader creates labels before it opens a batch's transaction, so a label id read
        # here is never one that a rollback takes away again.
        if name not in self._info:
            self._read_labels()
        return self._info[name]

    def _read_labels(self) -> None:
        rows = self.db.execute(
            "SELECT l.name, l.id, l.seq_name FROM ag_catalog.ag_label l "
            "JOIN ag_catalog.ag_graph g ON g.graphid = l.graph WHERE g.name = %s",
            (self.db.graph,),
        )
        for n, lid, seq in rows:
            self._info[n] = (lid, seq)

    def _labels(self) -> set[str]:
        """The graph's labels as they are now."""
        self._read_labels()
        return set(self._info)

    def _label_name(self, label_id: int) -> str:
        for name, (lid, _) in self._info.items():
            if lid == label_id:
                return name
        self._read_labels()
        return next(name for name, (lid, _) in self._info.items() if lid == label_id)

    def _table(self, label: str) -> sql.Composed:
        return sql.SQL("{}.{}").format(sql.Identifier(self.db.graph), sql.Identifier(label))

    def _seq(self, label: str) -> str:
        return sql.Identifier(self.db.graph, self._label(label)[1]).as_string(self.db.conn)

    def _lookup(self, label: str, param: str = "%s") -> sql.Composed:
        """``(id, properties)`` of the ``label`` vertices whose keys are in the text array
        ``param``, each found through the key index."""
        return sql.SQL(
            "SELECT u.k, v.id, v.properties FROM unnest(" + param + "::text[]) AS u(k) "
            "CROSS JOIN LATERAL (SELECT v.id, v.properties FROM {t} v WHERE {kv} = "
            + _as_agtype_key("u.k")
            + " OFFSET 0) v"
        ).format(t=self._table(label), kv=_key("v"))

    def _keys_of(self, ids: set[int]) -> dict[int, str]:
        """The keys of vertices given by id, looked up in each one's own label table."""
        return {i: k for i, (k,) in self._fields_of(ids, ("k",)).items()}

    def _fields_of(self, ids: set[int], fields: Sequence[str]) -> dict[int, tuple[Any, ...]]:
        """Properties (as text: an agtype string cast to text is the bare string) of vertices
        given by id, looked up in each one's own label table, where the id index serves."""
        by_label: dict[int, list[dict[str, int]]] = defaultdict(list)
        for n in sorted(ids):
            by_label[n >> 48].append({"a": n >> 48, "b": n & _ENTRY})
        if not by_label:
            return {}
        got = sql.SQL(", ").join(sql.SQL(_field("v", f) + "::text") for f in fields)
        parts, params = [], []
        for lid, pairs in sorted(by_label.items()):
            parts.append(
                sql.SQL(
                    "SELECT v.id::text, {got} FROM jsonb_to_recordset(%s::jsonb) AS u(a int, b bigint) "
                    "CROSS JOIN LATERAL (SELECT v.id, v.properties FROM {t} v WHERE v.id = ag_catalog._graphid(u.a, u.b) OFFSET 0) v"
                ).format(got=got, t=self._table(self._label_name(lid)))
            )
            params.append(dumps(pairs))
        return {int(row[0]): tuple(row[1:]) for row in self.db.execute(sql.SQL(" UNION ALL ").join(parts), params)}

    def _fmt(self) -> dict[str, Any]:
        conv = sql.SQL(
            "SELECT v.id FROM unnest(%s::text[]) AS u(k) CROSS JOIN LATERAL (SELECT v.id FROM {t} v WHERE {kv} = "
            + _as_agtype_key("u.k")
            + " OFFSET 0) v"
        ).format(t=self._table("Conversation"), kv=_key("v"))
        return {
            "conv": conv,
            "msg": self._table("Message"),
            "cv": self._table("Conversation"),
            "st": self._table("Statement"),
            "po": self._table("PART_OF"),
            "eb": self._table("EVIDENCED_BY"),
            "mi": self._table("MENTIONED_IN"),
            "so": self._table("SUBJECT_OF"),
            "ab": self._table("ABOUT"),
            "kp": self._table("Keyphrase"),
            "ap": self._table("APPEARS_IN"),
            "co": self._table("CO_OCCURS"),
        }
