"""Reading the graph by ad-hoc Cypher: typed rows, and the columns a query returns.

Parameters always travel through ``cypher()``'s parameter argument, never into the query text.
Named queries are :mod:`agefacts.named`; the reads built on them (facts, history, the digest)
are :mod:`agefacts.reads`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .db import Database, Table
from .errors import QueryError

if TYPE_CHECKING:
    from .asyncdb import AsyncDatabase

__all__ = [
    "return_columns",
    "run",
    "run_async",
]


def _split_top(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside brackets and string literals."""
    parts, depth, buf, quote, i = [], 0, [], None, 0
    while i < len(text):
        c = text[i]
        if quote:
            buf.append(c)
            if c == "\\" and i + 1 < len(text):
                buf.append(text[i + 1])
                i += 1
            elif c == quote:
                quote = None
        elif c in "'\"`":
            quote = c
            buf.append(c)
        elif c in "([{":
            depth += 1
            buf.append(c)
        elif c in ")]}":
            depth -= 1
            buf.append(c)
        elif c == sep and depth == 0:
            parts.append("".join(buf))
            buf = []
        else:
            buf.append(c)
        i += 1
    parts.append("".join(buf))
    return parts


_PARAM_USE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
_RETURN = re.compile(r"\bRETURN\b(\s+DISTINCT\b)?", re.IGNORECASE)
_TAIL = re.compile(r"\s+(ORDER\s+BY|SKIP|LIMIT)\b.*$", re.IGNORECASE | re.DOTALL)
_ALIAS = re.compile(r"^(.*?)\s+AS\s+`?([^`]+?)`?\s*$", re.IGNORECASE | re.DOTALL)


@functools.lru_cache(maxsize=512)
def _blank_strings(text: str) -> str:
    """The query with string literals and comments blanked out, same length, for searching.
    Kept per text: a shipped query is read character by character once, not on every run
    (it was half of ``facts``' time on the embedded engine)."""
    out, quote, i = [], None, 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\" and i + 1 < len(text):
                out.append("  ")
                i += 2
                continue
            out.append(" " if c != quote else c)
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
            out.append(c)
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = len(text) if j < 0 else j
            out.append(" " * (j - i))
            i = j
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def return_columns(query: str) -> list[str]:
    """The names of a query's result columns, read from its last RETURN clause: the alias
    where there is one, otherwise the expression as written. A query without RETURN has no
    columns."""
    return list(_return_columns(query))


@functools.lru_cache(maxsize=512)
def _return_columns(query: str) -> tuple[str, ...]:
    names = [name for _, name in _return_items(query)]
    seen: dict[str, int] = {}
    unique = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        unique.append(n if seen[n] == 1 else f"{n}_{seen[n]}")
    return tuple(unique)


@functools.lru_cache(maxsize=512)
def _return_items(query: str) -> tuple[tuple[str, str], ...]:
    """The last RETURN clause's items as (expression, column name), whitespace collapsed."""
    blank = _blank_strings(query)
    matches = list(_RETURN.finditer(blank))
    if not matches:
        return ()
    start = matches[-1].end()
    body = query[start:]
    tail = _TAIL.search(_blank_strings(body))
    if tail:
        body = body[: tail.start()]
    items = []
    for item in _split_top(body):
        item = " ".join(item.split())
        if not item:
            raise QueryError(f"cannot read the RETURN clause of {query!r}; pass --columns")
        m = _ALIAS.match(item)
        items.append((m.group(1), m.group(2)) if m else (item, item))
    return tuple(items)


def run(
    db: Database,
    query: str,
    params: Mapping[str, Any] | None = None,
    columns: Sequence[str] | None = None,
    *,
    prepared: bool = False,
) -> Table:
    """Run a Cypher query and return decoded rows keyed by the result column names. A
    ``$name`` the query uses and ``params`` leaves out is an error that names it.
    ``prepared``: as a prepared statement (the named queries, run again and again)."""
    names, sql_cols = _columns(query, params, columns)
    table = db.cypher(query, params or None, sql_cols, prepared=prepared)
    if not names:
        return Table([], [])
    return Table(names, table.rows)


async def run_async(
    db: AsyncDatabase,
    query: str,
    params: Mapping[str, Any] | None = None,
    columns: Sequence[str] | None = None,
    *,
    prepared: bool = False,
) -> Table:
    """:func:`run` on an asynchronous connection."""
    names, sql_cols = _columns(query, params, columns)
    table = await db.cypher(query, params or None, sql_cols, prepared=prepared)
    if not names:
        return Table([], [])
    return Table(names, table.rows)


def _columns(
    query: str, params: Mapping[str, Any] | None, columns: Sequence[str] | None
) -> tuple[list[str], list[str]]:
    """The names of a query's columns and those it is run with, once every ``$name`` it uses
    has a value."""
    used = set(_PARAM_USE.findall(_blank_strings(query)))
    if missing := sorted(used - set(params or {})):
        raise QueryError(
            f"the query uses {', '.join('$' + m for m in missing)} but no value was given: "
            + " ".join(f"--param {m}=..." for m in missing)
        )
    names = list(columns) if columns else return_columns(query)
    return names, [f"c{i}" for i in range(len(names))] or ["c0"]
