"""Reading the graph: ad-hoc Cypher with typed rows, named queries, the digest.

Parameters always travel through ``cypher()``'s parameter argument, never into the query text.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .db import Database, Table
from .errors import QueryError

__all__ = ["return_columns", "run", "digest", "graph_content"]


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


_RETURN = re.compile(r"\bRETURN\b(\s+DISTINCT\b)?", re.IGNORECASE)
_TAIL = re.compile(r"\s+(ORDER\s+BY|SKIP|LIMIT)\b.*$", re.IGNORECASE | re.DOTALL)
_ALIAS = re.compile(r"^(.*?)\s+AS\s+`?([^`]+?)`?\s*$", re.IGNORECASE | re.DOTALL)


def _blank_strings(text: str) -> str:
    """The query with string literals and comments blanked out, same length, for searching."""
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
    blank = _blank_strings(query)
    matches = list(_RETURN.finditer(blank))
    if not matches:
        return []
    start = matches[-1].end()
    body = query[start:]
    tail = _TAIL.search(_blank_strings(body))
    if tail:
        body = body[: tail.start()]
    names = []
    for item in _split_top(body):
        item = " ".join(item.split())
        if not item:
            raise QueryError(f"cannot read the RETURN clause of {query!r}; pass --columns")
        m = _ALIAS.match(item)
        names.append(m.group(2) if m else item)
    seen: dict[str, int] = {}
    unique = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        unique.append(n if seen[n] == 1 else f"{n}_{seen[n]}")
    return unique


def run(
    db: Database,
    query: str,
    params: Mapping[str, Any] | None = None,
    columns: Sequence[str] | None = None,
) -> Table:
    """Run a Cypher query and return decoded rows keyed by the result column names."""
    names = list(columns) if columns else return_columns(query)
    sql_cols = [f"c{i}" for i in range(len(names))] or ["c0"]
    table = db.cypher(query, params or None, sql_cols)
    if not names:
        return Table([], [])
    return Table(names, table.rows)


def graph_content(db: Database) -> list[str]:
    """Every vertex as (label, k, properties) and every edge as (label, start k, end k,
    properties), each one canonical JSON line, sorted; AGE ids are left out."""
    lines: list[str] = []
    for label, props in db.cypher_raw(
        "MATCH (n) RETURN label(n), properties(n)", columns=("l", "p")
    ):
        p = json.loads(props)
        lines.append(_canon(["V", json.loads(label), p.get("k"), p]))
    for label, sk, ek, props in db.cypher_raw(
        "MATCH (a)-[e]->(b) RETURN label(e), a.k, b.k, properties(e)", columns=("l", "s", "t", "p")
    ):
        lines.append(_canon(["E", json.loads(label), json.loads(sk), json.loads(ek), json.loads(props)]))
    lines.sort()
    return lines


def _canon(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def digest(db: Database) -> str:
    """One hash of the graph's logical content (see :func:`graph_content`)."""
    h = hashlib.sha256()
    for line in graph_content(db):
        h.update(line.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()
