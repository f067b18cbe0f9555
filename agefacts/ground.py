"""Grounding: the only code that creates spans.

A model's quote is a search term. It is looked for in the message, and what is stored is the
text found there, so a span can only ever index the text it claims to. The search goes:

1. exact;
2. with every run of whitespace collapsed to one space (a model copying a sentence turns line
   breaks into spaces; the words are the same words);
3. with typographic quotes and dashes folded to ASCII as well (’ “ ” – — become ' " " - -),
   "..." taken for the ellipsis "…" (and the other way round), since models routinely retype
   them, and both sides composed (Unicode NFC: text typed on some systems comes decomposed, "u"
   then a combining diaeresis, where a model writes "ü"), with invisible format characters
   left out (the direction marks, soft hyphens and zero-width characters chat exports carry).
   The stored quote is still the text found in the message, so its length may differ from
   what the model typed.

Case is never folded: a model that changed case retyped rather than copied, and a tolerance
wide enough for that is wide enough for a sentence the model composed. Of several occurrences
the first wins: the same words resolve to the same citation. Offsets a model offers are never
used.
"""

from __future__ import annotations

import functools
import unicodedata
from dataclasses import dataclass
from typing import Any

from .models import MatchTier
from .typography import ELLIPSIS, fold

__all__ = [
    "Span",
    "locate",
]


@dataclass(frozen=True)
class Span:
    char_start: int
    char_end: int
    byte_start: int
    byte_end: int
    match: MatchTier
    quote: str
    """The text of the message at the span: what is stored, whatever the model typed."""

    def offsets(self) -> dict[str, Any]:
        """Where the span is and how it was found, as the fields evidence and keyphrases
        store (``char_start``, ``char_end``, ``byte_start``, ``byte_end``, ``match``)."""
        return {
            "char_start": self.char_start,
            "char_end": self.char_end,
            "byte_start": self.byte_start,
            "byte_end": self.byte_end,
            "match": self.match,
        }


@dataclass(frozen=True)
class _Normalised:
    text: str
    starts: list[int]  # for each character, where it starts in the original
    ends: list[int]  # for each character, where it ends in the original


def _raw(s: str) -> _Normalised:
    return _Normalised(s, list(range(len(s))), list(range(1, len(s) + 1)))


def _collapse(n: _Normalised) -> _Normalised:
    """Every whitespace run becomes one space; leading and trailing whitespace goes."""
    s = n.text
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    i, size = 0, len(s)
    while i < size:
        if s[i].isspace():
            j = i
            while j < size and s[j].isspace():
                j += 1
            if out:  # no leading space
                out.append(" ")
                starts.append(n.starts[i])
                ends.append(n.ends[j - 1])
            i = j
        else:
            out.append(s[i])
            starts.append(n.starts[i])
            ends.append(n.ends[i])
            i += 1
    if out and out[-1] == " ":
        out.pop()
        starts.pop()
        ends.pop()
    return _Normalised("".join(out), starts, ends)


def _composed(n: _Normalised) -> _Normalised:
    """``n`` in Unicode NFC, with the positions carried through: each run of characters that
    compose with each other (a letter and its combining marks, Hangul jamo) maps to where the
    run is in the original."""
    text = n.text
    if unicodedata.is_normalized("NFC", text):
        return n
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    i = 0
    while i < len(text):
        j = i + 1
        run = text[i]
        while j < len(text):
            c = text[j]
            if c < "\x80":  # no ASCII character composes with what precedes it
                break
            alone = unicodedata.normalize("NFC", run) + unicodedata.normalize("NFC", c)
            if unicodedata.combining(c) == 0 and unicodedata.normalize("NFC", run + c) == alone:
                break
            run += c
            j += 1
        for ch in unicodedata.normalize("NFC", run):
            out.append(ch)
            starts.append(n.starts[i])
            ends.append(n.ends[j - 1])
        i = j
    return _Normalised("".join(out), starts, ends)


def _visible(n: _Normalised) -> _Normalised:
    """``n`` without invisible format characters (Unicode category Cf: direction marks, soft
    hyphens, zero-width spaces and joiners, the byte order mark), which chat exports carry and
    a model's quote leaves out."""
    keep = [i for i, c in enumerate(n.text) if unicodedata.category(c) != "Cf"]
    if len(keep) == len(n.text):
        return n
    return _Normalised("".join(n.text[i] for i in keep), [n.starts[i] for i in keep], [n.ends[i] for i in keep])


def _typography(s: str) -> _Normalised:
    """Invisible format characters left out (before whitespace runs collapse, so that the
    spaces a mark stood between are one run), the text composed (NFC), quotes and dashes
    folded (one character for one) and "..." as one ellipsis, with the positions carried
    through."""
    n = _composed(_collapse(_visible(_raw(s))))
    text, out, starts, ends = fold(n.text), [], [], []
    i = 0
    while i < len(text):
        if text.startswith("...", i):
            out.append(ELLIPSIS)
            starts.append(n.starts[i])
            ends.append(n.ends[i + 2])
            i += 3
        else:
            out.append(text[i])
            starts.append(n.starts[i])
            ends.append(n.ends[i])
            i += 1
    return _Normalised("".join(out), starts, ends)


def _span(text: str, start: int, end: int, tier: MatchTier) -> Span:
    return Span(
        char_start=start,
        char_end=end,
        byte_start=len(text[:start].encode("utf-8")),
        byte_end=len(text[:end].encode("utf-8")),
        match=tier,
        quote=text[start:end],
    )


# A message's statements are located in it one after another: it is normalised once per tier,
# and only for a tier some quote needs.
@functools.lru_cache(maxsize=16)
def _collapsed(text: str) -> _Normalised:
    return _collapse(_raw(text))


_typographic = functools.lru_cache(maxsize=16)(_typography)


def _find(haystack: _Normalised, needle: str) -> tuple[int, int] | None:
    """Where ``needle`` is in the original of ``haystack``, as (start, end)."""
    j = haystack.text.find(needle)
    if j < 0 or not needle:
        return None
    return haystack.starts[j], haystack.ends[j + len(needle) - 1]


def locate(text: str, quote: str) -> Span | None:
    """Find ``quote`` in ``text`` (see the module's rules); None when it is not there."""
    if not quote or not quote.strip():
        return None
    i = text.find(quote)
    if i >= 0:
        return _span(text, i, i + len(quote), "exact")
    norm_quote = _collapse(_raw(quote))
    if not norm_quote.text:
        return None
    found = _find(_collapsed(text), norm_quote.text)
    if found:
        return _span(text, *found, "whitespace")
    # Only when collapsing whitespace was not enough is the message read the longer way.
    found = _find(_typographic(text), _typography(quote).text)
    if found:
        return _span(text, *found, "typography")
    return None
