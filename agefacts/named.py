"""Named queries: the shipped ``.cypher`` and ``.sql`` files, read once, each with its
parameters, its columns and how it runs (a header of comments says so), run by name.

A file's header: its first line says what it returns; ``params:`` names its parameters,
``columns:`` its columns, ``keys:`` the parameters made from others by a key rule,
``runs: once per entity label`` that it runs over each entity label instead of every vertex,
and ``order: history`` that its rows come in the order ``history`` lists statements
(:data:`agefacts.derive.HISTORY_ORDER`, appended to the query).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .db import Database, Table
from .derive import HISTORY_ORDER
from .errors import QueryError
from .graphadmin import check_label
from .keys import message_key
from .names import is_entity_label
from .query import _return_items, run, run_async

if TYPE_CHECKING:
    # Only the async twins take one: a synchronous read does not pay for asyncio.
    from .asyncdb import AsyncDatabase

__all__ = [
    "NamedQuery",
    "bind_named",
    "named_queries",
    "run_named",
    "run_named_async",
]


@dataclass(frozen=True)
class NamedQuery:
    """A query shipped in ``cypher/`` (Cypher) or ``sql/queries/`` (SQL over agefacts' own
    tables). Its header comment gives one line of description, a ``params:`` line (``none``
    when it takes none) and a ``columns:`` line naming what it returns, in order."""

    name: str
    kind: str  # cypher | sql
    description: str
    params: list[str]
    params_doc: str
    text: str
    columns: list[str]
    # "runs: once per entity label" in the header: the query's first line is ``MATCH (n)``, and
    # it reads only entity types' labels (see :func:`_per_entity_label`).
    per_entity_label: bool = False
    # "keys: NAME = KIND(PARAM, ...)" in the header: $NAME is the key of that kind made from
    # the parameters (null when one is null), so the query finds its vertex by the key index.
    keys: tuple[tuple[str, str, tuple[str, ...]], ...] = ()

    @property
    def required(self) -> list[str]:
        """The parameters its header does not say may be null."""
        docs = dict(_PARAM_NAME.findall(self.params_doc))
        return [p for p in self.params if "null" not in docs.get(p, "")]


_PARAM_NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(\([^)]*\))?")


def _parse_named(name: str, kind: str, raw: str) -> NamedQuery:
    marker = "//" if kind == "cypher" else "--"
    header: list[str] = []
    body: list[str] = []
    for line in raw.splitlines():
        if not body and line.startswith(marker):
            header.append(line[len(marker) :].strip())
        elif line.strip() or body:
            body.append(line)
    description = header[0] if header else ""
    params_doc = next((h[len("params:") :].strip() for h in header if h.startswith("params:")), "")
    params = [m.group(1) for m in _PARAM_NAME.finditer(re.sub(r"\([^)]*\)", "", params_doc))]
    if params == ["none"]:
        params = []
    columns_doc = next((h[len("columns:") :] for h in header if h.startswith("columns:")), "")
    columns = [c.strip() for c in columns_doc.split(",") if c.strip()]
    per_label = any(h.startswith("runs:") and "once per entity label" in h for h in header)
    keys = tuple(
        (m.group(1), m.group(2), tuple(a.strip() for a in m.group(3).split(",")))
        for h in header
        if h.startswith("keys:")
        for m in _KEY_PARAM.finditer(h[len("keys:") :])
    )
    for _, kind_, args in keys:
        if kind_ not in _KEY_KINDS or not set(args) <= set(params):
            raise QueryError(f"query {name!r}: its keys line names {kind_}({', '.join(args)}), which it cannot make")
    body_text = "\n".join(body).strip()
    order = next((h[len("order:") :].split()[0] for h in header if h.startswith("order:")), None)
    if order is not None:
        # An order that is a rule of the graph's own is written once, where the rule is.
        if order not in _RULE_ORDERS:
            raise QueryError(f"query {name!r}: no order {order!r}; one of {', '.join(sorted(_RULE_ORDERS))}")
        body_text += "\nORDER BY " + _RULE_ORDERS[order]
    return NamedQuery(name, kind, description, params, params_doc, body_text, columns, per_label, keys)


_RULE_ORDERS = {"history": HISTORY_ORDER}
_KEY_PARAM = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*=\s*([a-z]+)\(([^)]*)\)")
# The key kinds a named query can be given, by the one function that makes each (agefacts.keys).
_KEY_KINDS: dict[str, Callable[..., str]] = {"message": message_key}


# The opening MATCH (n) of a query run per entity label, and its closing ORDER BY.
_ALL_VERTICES = re.compile(r"\AMATCH \(n\)(?=\s)")
_ORDER_TAIL = re.compile(r"\n\s*ORDER BY ([^\n]*)\Z", re.IGNORECASE)


def _per_entity_label(q: NamedQuery, labels: tuple[str, ...]) -> tuple[str, tuple[int, ...]]:
    return _per_label_text(q.name, q.text, tuple(q.columns), labels)


@functools.lru_cache(maxsize=64)
def _per_label_text(
    name: str, text: str, columns: tuple[str, ...], labels: tuple[str, ...]
) -> tuple[str, tuple[int, ...]]:
    """A query written over every vertex (``MATCH (n)``) as the UNION ALL of the same query
    over each entity type's label, and the positions of the columns its ORDER BY names, to
    sort the rows by in Python (a UNION ALL cannot be ordered; text by code point, not by the
    engine's collation). ``MATCH (n)`` reads every vertex label, statements and messages
    included: finding an entity by name at 100k statements took 127 ms that way, 4 ms reading
    the entity labels by namespace."""
    if not _ALL_VERTICES.match(text):
        raise QueryError(f"query {name!r} runs once per entity label, so it must start with MATCH (n)")
    body = text
    order: tuple[int, ...] = ()
    tail = _ORDER_TAIL.search(body)
    if tail:
        body = body[: tail.start()]
        returned = {expr: columns.index(name) for expr, name in _return_items(text) if name in columns}
        try:
            order = tuple(returned[item.strip()] for item in tail.group(1).split(","))
        except KeyError as exc:
            raise QueryError(f"query {name!r} orders by {exc.args[0]}, which it does not return") from None
    parts = [_ALL_VERTICES.sub(f"MATCH (n:{check_label(label)})", body, count=1) for label in labels]
    return "\nUNION ALL\n".join(parts), order


def _entity_labels(labels: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(sorted(n for n, kind in labels.items() if is_entity_label(n, kind)))


def _sorted_rows(rows: list[tuple[Any, ...]], order: Sequence[int]) -> list[tuple[Any, ...]]:
    if not order:
        return rows
    return sorted(rows, key=lambda r: tuple(_order_key(r[i]) for i in order))


def _order_key(value: Any) -> tuple[bool, str, Any]:
    # Nulls last, as Cypher orders them; values of different types are never compared.
    if value is None:
        return (True, "", 0)
    return (False, type(value).__name__, value if isinstance(value, (str, int, float)) else repr(value))


def named_queries() -> dict[str, NamedQuery]:
    """The shipped queries by name (read from the package once: they do not change)."""
    return dict(_shipped_queries())


@functools.cache
def _shipped_queries() -> dict[str, NamedQuery]:
    from importlib import resources

    out: dict[str, NamedQuery] = {}
    for pkg, kind, ext in (("agefacts._cypher", "cypher", ".cypher"), ("agefacts._sql.queries", "sql", ".sql")):
        for entry in resources.files(pkg).iterdir():
            if entry.name.endswith(ext):
                name = entry.name[: -len(ext)]
                out[name] = _parse_named(name, kind, entry.read_text(encoding="utf-8"))
    return dict(sorted(out.items()))


def bind_named(name: str, params: Mapping[str, Any] | None = None) -> tuple[NamedQuery, dict[str, Any]]:
    """A named query and the values it runs with: those it declares and the caller leaves
    out are null; an unknown name, an unknown parameter or a missing required one is an error
    that names it."""
    queries = named_queries()
    if name not in queries:
        raise QueryError(f"no named query {name!r}; `agefacts query --list` shows them")
    q = queries[name]
    given = dict(params or {})
    unknown = sorted(set(given) - set(q.params))
    if unknown:
        raise QueryError(
            f"query {name!r} takes no parameter {', '.join(unknown)}; it takes: {', '.join(q.params) or 'none'}"
        )
    if missing := [p for p in q.required if p not in given]:
        raise QueryError(
            f"query {name!r} needs {', '.join(missing)}: "
            + " ".join(f"--param {m}=..." for m in missing)
            + f" ({q.params_doc})"
        )
    values = {p: given.get(p) for p in q.params}
    for param, kind, args in q.keys:
        parts = [values[a] for a in args]
        values[param] = None if any(v is None for v in parts) else _KEY_KINDS[kind](*parts)
    return q, values


def run_named(db: Database, name: str, params: Mapping[str, Any] | None = None) -> Table:
    """Run a named query; parameters it declares and the caller leaves out are null."""
    q, values = bind_named(name, params)
    if q.kind == "sql":
        return db.table(q.text, {**values, "graph": db.graph})
    if q.per_entity_label:
        labels = _entity_labels(db.labels())
        if not labels:
            return Table(q.columns, [])
        text, order = _per_entity_label(q, labels)
        return Table(q.columns, _sorted_rows(run(db, text, values, q.columns, prepared=True).rows, order))
    return run(db, q.text, values, q.columns, prepared=True)


async def run_named_async(db: AsyncDatabase, name: str, params: Mapping[str, Any] | None = None) -> Table:
    """:func:`run_named` on an asynchronous connection."""
    q, values = bind_named(name, params)
    if q.kind == "sql":
        return await db.table(q.text, {**values, "graph": db.graph})
    if q.per_entity_label:
        labels = _entity_labels(await db.labels())
        if not labels:
            return Table(q.columns, [])
        text, order = _per_entity_label(q, labels)
        return Table(q.columns, _sorted_rows((await run_async(db, text, values, q.columns, prepared=True)).rows, order))
    return await run_async(db, q.text, values, q.columns, prepared=True)
