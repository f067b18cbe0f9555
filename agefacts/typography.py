"""Typographic characters that people and models type interchangeably with ASCII ones: the
one table of them, used by grounding (to find a retyped quote), by the named-entity key and by
entity lookup (so "Bloomingdale’s" and "Bloomingdale's" are one entity, found by either;
:func:`agefacts.cypher.fold_quotes` spells the fold in Cypher)."""

from __future__ import annotations

__all__ = [
    "DASHES",
    "ELLIPSIS",
    "QUOTES",
    "fold",
    "fold_quotes",
]

QUOTES = {
    "\u2018": "'",
    "\u2019": "'",
    "\u201a": "'",
    "\u201b": "'",
    "\u2032": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\u201e": '"',
    "\u201f": '"',
    "\u2033": '"',
    "\u00ab": '"',
    "\u00bb": '"',
}
"""Apostrophes, single and double quotes, primes and guillemets, to their ASCII forms."""

DASHES = {"\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-", "\u2015": "-", "\u2212": "-"}

ELLIPSIS = "\u2026"
"""The one-character ellipsis; grounding takes "..." for it (and it for "...")."""

_QUOTES = str.maketrans(QUOTES)
_ALL = str.maketrans({**QUOTES, **DASHES})


def fold_quotes(text: str) -> str:
    """Typographic quotes and apostrophes to ASCII, character for character."""
    return text.translate(_QUOTES)


def fold(text: str) -> str:
    """Quotes, apostrophes and dashes to ASCII, character for character."""
    return text.translate(_ALL)
