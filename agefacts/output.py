"""Printing rows as a table, JSON, JSON lines or CSV (the command-line contract: ``--format
json`` is one array of objects keyed by column name; ``jsonl`` one object per line)."""

from __future__ import annotations

import csv
import datetime
import io
import json
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from .agtype import Edge, Path, Vertex

__all__ = [
    "FORMATS",
    "plain",
    "render",
    "render_some",
]

FORMATS = ("table", "json", "jsonl", "csv")


def plain(value: Any) -> Any:
    """A JSON-ready form of a decoded value (a time as ISO-8601 text: SQL queries over
    agefacts' own tables return ``datetime`` values)."""
    if isinstance(value, (Vertex, Edge, Path)):
        return value.to_json()
    if isinstance(value, datetime.date | datetime.time):  # a datetime is a date
        return value.isoformat()
    if isinstance(value, Decimal):
        # JSON has one number type; a numeric that fits a float is printed as one.
        return float(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def _cell(value: Any) -> str:
    if value is None:
        return ""
    value = plain(value)
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def render(columns: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str = "table") -> str:
    """Rows as text in one of :data:`FORMATS`; an empty result is an empty list, not an error."""
    objs = [dict(zip(columns, (plain(v) for v in row), strict=True)) for row in rows]
    if fmt == "json":
        return json.dumps(objs, ensure_ascii=False, indent=2)
    if fmt == "jsonl":
        return "\n".join(json.dumps(o, ensure_ascii=False) for o in objs)
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(columns)
        for row in rows:
            w.writerow([_cell(v) for v in row])
        return buf.getvalue().rstrip("\n")
    if fmt != "table":
        raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    cells = [[_cell(v).replace("\n", "\\n") for v in row] for row in rows]
    widths = [len(c) for c in columns]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = min(max(widths[i], len(c)), 80)

    def line(values: Sequence[str]) -> str:
        out = []
        for i, v in enumerate(values):
            v = v if len(v) <= widths[i] else v[: widths[i] - 1] + "…"
            out.append(v.ljust(widths[i]))
        return " | ".join(out).rstrip()

    parts = [line(columns), "-+-".join("-" * w for w in widths)]
    parts += [line(r) for r in cells]
    parts.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(parts)


def render_some(columns: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str, table_columns: Sequence[str]) -> str:
    """A table shows only ``table_columns`` (a terminal is narrow); every other format
    carries every column, for the tools that read it."""
    if fmt != "table":
        return render(columns, rows, fmt)
    idx = [list(columns).index(c) for c in table_columns]
    return render(table_columns, [[r[i] for i in idx] for r in rows], "table")
