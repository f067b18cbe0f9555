"""The only code that writes Cypher literals, labels and property names.

Strings are single-quoted with every character that could end the quote, the line or an
enclosing dollar-quoted SQL string escaped: backslash, quote, control characters, the Unicode
line and paragraph separators, and ``$`` (as ``\\u0024``), so compiled text never contains
``$`` at all and can be wrapped in ``$$ ... $$`` safely. Everything else is kept verbatim. NUL
cannot be stored in PostgreSQL text and a lone surrogate cannot be encoded in UTF-8: both are
refused with an error rather than mangled.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from .errors import CompileError
from .names import is_identifier, is_label
from .typography import QUOTES

__all__ = [
    "comment",
    "fold_quotes",
    "label",
    "literal",
    "prop",
    "props_map",
    "string",
]

_SIMPLE = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def _escape_char(ch: str) -> str:
    if ch in _SIMPLE:
        return _SIMPLE[ch]
    o = ord(ch)
    if o == 0:
        raise CompileError("text contains a NUL character, which PostgreSQL cannot store")
    if 0xD800 <= o <= 0xDFFF:
        raise CompileError(f"text contains a lone surrogate U+{o:04X}, which UTF-8 cannot encode")
    return f"\\u{o:04x}"


_NEEDS = re.compile("[\\\\'\x00-\x1f\x7f$\u2028\u2029\ud800-\udfff]")


def string(value: str) -> str:
    return "'" + _NEEDS.sub(lambda m: _escape_char(m.group()), value) + "'"


def literal(value: Any) -> str:
    """A Cypher literal for a JSON-like value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CompileError(f"the number {value} cannot be stored; use a finite number")
        return repr(value)
    if isinstance(value, str):
        return string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return props_map(value)
    raise CompileError(f"cannot write a {type(value).__name__} as a Cypher literal")


def label(name: str) -> str:
    if not is_label(name):
        raise CompileError(f"label {name!r} is not a safe identifier (^[A-Z][A-Za-z0-9_]*$)")
    return name


def prop(name: str) -> str:
    """A property name; only plain identifiers are written (the gate keeps model-made
    attribute names to that form)."""
    if not is_identifier(name):
        raise CompileError(f"property name {name!r} is not a plain identifier ([A-Za-z_][A-Za-z0-9_]*)")
    return name


def props_map(values: Mapping[str, Any]) -> str:
    """A map literal; keys in sorted order so the text is deterministic."""
    return "{" + ", ".join(f"{prop(k)}: {literal(v)}" for k, v in sorted(values.items())) + "}"


def comment(text: str) -> str:
    """A one-line ``//`` comment that can hold any text: it is written as escaped JSON-ish
    text, so it has no line break and no ``$``."""
    body = _COMMENT_NEEDS.sub(lambda m: _escape_char(m.group()), text)
    return "// " + body


_COMMENT_NEEDS = re.compile("[\x00-\x1f\x7f$\u2028\u2029\ud800-\udfff]")


def fold_quotes(expr: str) -> str:
    """A Cypher expression that applies :func:`agefacts.typography.fold_quotes` to the string
    ``expr`` (AGE has no translate())."""
    for typographic, ascii_ in sorted(QUOTES.items()):
        expr = f"replace({expr}, {string(typographic)}, {string(ascii_)})"
    return expr
