"""Decoding agtype text into Python values.

agtype's text form is JSON plus type annotations: ``{...}::vertex``, ``{...}::edge``,
``[...]::path`` and ``1.5::numeric``. apache-age-python (0.0.7) ships an ANTLR parser for it,
but that parser returns strings with their JSON escapes still in them (``"a\\"b"`` comes back
with the backslash), which would break the promise that text is read back verbatim; so
agefacts does not depend on it. agtype is decoded here instead:
plain JSON values by the standard library's decoder, strings inside graph values with
:func:`json.decoder.scanstring`, and the annotations by a small recursive descent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from .errors import AgtypeError

# The JSON string scanner the json module uses (its type stubs leave it out).
_scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]

__all__ = [
    "Edge",
    "Path",
    "Vertex",
    "decode",
]


@dataclass(frozen=True)
class Vertex:
    id: int
    label: str
    properties: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "label": self.label, "properties": self.properties}


@dataclass(frozen=True)
class Edge:
    id: int
    label: str
    start_id: int
    end_id: int
    properties: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "label": self.label,
            "start_id": self.start_id,
            "end_id": self.end_id,
            "properties": self.properties,
        }


@dataclass(frozen=True)
class Path:
    elements: list[Vertex | Edge]

    def to_json(self) -> list[dict[str, Any]]:
        return [e.to_json() for e in self.elements]


_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_WORDS = {
    "true": True,
    "false": False,
    "null": None,
    "NaN": float("nan"),
    "Infinity": float("inf"),
    "-Infinity": float("-inf"),
}
_WS = " \t\n\r"


def decode(text: str | None) -> Any:
    """Decode one agtype value from its text form; SQL NULL (``None``) stays ``None``."""
    if text is None:
        return None
    try:
        # Most values are plain JSON; the standard decoder is the fastest reader of those.
        return json.loads(text)
    except ValueError:
        pass
    value, pos = _value(text, _skip(text, 0))
    if _skip(text, pos) != len(text):
        raise AgtypeError(f"unexpected text after agtype value at {pos}: {text[pos : pos + 20]!r}")
    return value


def _skip(s: str, i: int) -> int:
    while i < len(s) and s[i] in _WS:
        i += 1
    return i


def _value(s: str, i: int) -> tuple[Any, int]:
    if i >= len(s):
        raise AgtypeError("agtype text ended early")
    c = s[i]
    value: Any
    if c == "{":
        value, i = _object(s, i + 1)
    elif c == "[":
        value, i = _array(s, i + 1)
    elif c == '"':
        value, i = _scanstring(s, i + 1)
    else:
        for word, word_value in _WORDS.items():
            if s.startswith(word, i):
                value, i = word_value, i + len(word)
                break
        else:
            m = _NUMBER.match(s, i)
            if not m:
                raise AgtypeError(f"cannot read agtype at {i}: {s[i : i + 20]!r}")
            raw = m.group()
            value = float(raw) if any(ch in raw for ch in ".eE") else int(raw)
            i = m.end()
    if s.startswith("::", i):
        m = re.compile(r"::([a-z]+)").match(s, i)
        if not m:
            raise AgtypeError(f"bad agtype annotation at {i}")
        value = _annotate(value, m.group(1), s)
        i = m.end()
    return value, i


def _object(s: str, i: int) -> tuple[dict[str, Any], int]:
    out: dict[str, Any] = {}
    i = _skip(s, i)
    if i < len(s) and s[i] == "}":
        return out, i + 1
    while True:
        i = _skip(s, i)
        if i >= len(s) or s[i] != '"':
            raise AgtypeError(f"expected a key at {i}")
        key, i = _scanstring(s, i + 1)
        i = _skip(s, i)
        if i >= len(s) or s[i] != ":":
            raise AgtypeError(f"expected ':' at {i}")
        out[key], i = _value(s, _skip(s, i + 1))
        i = _skip(s, i)
        if i < len(s) and s[i] == ",":
            i += 1
        elif i < len(s) and s[i] == "}":
            return out, i + 1
        else:
            raise AgtypeError(f"expected ',' or '}}' at {i}")


def _array(s: str, i: int) -> tuple[list[Any], int]:
    out: list[Any] = []
    i = _skip(s, i)
    if i < len(s) and s[i] == "]":
        return out, i + 1
    while True:
        item, i = _value(s, _skip(s, i))
        out.append(item)
        i = _skip(s, i)
        if i < len(s) and s[i] == ",":
            i += 1
        elif i < len(s) and s[i] == "]":
            return out, i + 1
        else:
            raise AgtypeError(f"expected ',' or ']' at {i}")


def _annotate(value: Any, kind: str, s: str) -> Any:
    if kind == "vertex":
        return Vertex(value["id"], value["label"], value.get("properties") or {})
    if kind == "edge":
        return Edge(value["id"], value["label"], value["start_id"], value["end_id"], value.get("properties") or {})
    if kind == "path":
        return Path(list(value))
    if kind == "numeric":
        return Decimal(str(value))
    if kind == "float":
        return float(value)
    raise AgtypeError(f"unknown agtype annotation ::{kind}")
