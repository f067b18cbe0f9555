"""Stable keys: the ``k`` property of every vertex and edge agefacts writes.

A key is a deterministic function of the namespace and the content that identifies the
element, never of load order, wall time or AGE ids: ``<kind>:<16 hex digits><32 hex digits>``.
The first 16 are the namespace's key space (:func:`key_space`: the first 64 bits of the SHA-256
of its UTF-8 bytes), the other 32 the first 128 bits of the SHA-256 of the canonical JSON of
the identifying fields below. Keys never cross namespaces, because the namespace is always one
of the fields; and a key says whose it is, so the database refuses a tenant any key outside its
own namespace's space (sql/004_tenants.sql): it can neither take another person's key before
they load it nor learn from a refusal whether they hold it.

- conversation: namespace, conversation id
- message: namespace, conversation id, turn ordinal
- entity, by the first rule that applies:
  the user: namespace, "user" (one vertex per namespace);
  an entity with a role to the user (``attrs.rel``, e.g. spouse_of:user): namespace, type, rel;
  a named entity: namespace, type, normalised name (NFC, typographic quotes and apostrophes
  folded to ASCII, case-folded, whitespace collapsed);
  a placeholder: namespace, conversation id, handle (one vertex per conversation, filled
  in place when a later turn names it).
- statement: namespace, subject key, predicate, object key or normalised value, valid_from,
  valid_until, recurrence (and whether it ends a fact, or corrects one, rather than states one).
- keyphrase: namespace, its text (:func:`keyphrase_text`: the words, case-folded, one space
  between them), so "Sourdough starter" and "sourdough  starter" are one vertex.
- edge: label, start key, end key (and, for evidence, the span), in its start's key space.
- fact version: namespace, subject key, predicate, the version's row and the time it was first
  read (and which of identical ones it is).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import unicodedata
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .names import USER
from .typography import fold_quotes

if TYPE_CHECKING:  # a read needs keys, not the models (pydantic: a tenth of a command's start)
    from .models import Entity

__all__ = [
    "conversation_key",
    "edge_key",
    "entity_key",
    "keyphrase_key",
    "keyphrase_text",
    "key_space",
    "make_key",
    "message_key",
    "normalise_name",
    "statement_key",
    "user_key",
]


_STR: Callable[[str], str] = json.encoder.py_encode_basestring
try:  # the C version the json module itself uses
    from _json import encode_basestring as _STR
except ImportError:  # pragma: no cover
    pass


def _canon(value: Any) -> str:
    """Compact JSON of strings, numbers, None and lists: byte for byte what
    ``json.dumps(value, ensure_ascii=False, separators=(",", ":"))`` writes, several times
    faster for these small tuples (keys are made for every element of every load). Exact
    types are tested first (a bool is an int to isinstance, and JSON writes it otherwise)."""
    t = type(value)
    if t is str:
        return _STR(value)
    if t is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    if t is tuple or t is list:
        # A key's fields are mostly strings: written here rather than by a call each.
        return "[" + ",".join([_STR(v) if type(v) is str else _canon(v) for v in value]) + "]"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _STR(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join([_canon(v) for v in value]) + "]"
    return json.dumps(value)


@functools.lru_cache(maxsize=4096)
def key_space(namespace: str) -> str:
    """The 16 hex digits every key of ``namespace`` starts with after its kind: what
    ``agefacts.key_space`` computes in the database (sql/001_agefacts.sql)."""
    return hashlib.sha256(namespace.encode("utf-8")).hexdigest()[:16]


def make_key(kind: str, namespace: str, *fields: Any) -> str:
    blob = _canon((namespace, *fields))
    return f"{kind}:{key_space(namespace)}{hashlib.sha256(blob.encode('utf-8')).hexdigest()[:32]}"


def normalise_name(name: str) -> str:
    """NFC, typographic quotes and apostrophes as ASCII, case-folded, whitespace collapsed."""
    return " ".join(fold_quotes(unicodedata.normalize("NFC", name)).casefold().split())


_WORD = re.compile(r"\w+")


def keyphrase_text(mention: str) -> str:
    """A keyphrase's words as they key it: NFC, typographic quotes folded, case-folded, the
    word characters only, one space between words ("Co-op's  Bread" -> "co op s bread"). A
    question's words are cut the same way, so a phrase is found by the words that ask for it."""
    return " ".join(_WORD.findall(fold_quotes(unicodedata.normalize("NFC", mention)).casefold()))


def keyphrase_key(namespace: str, text: str) -> str:
    return make_key("kp", namespace, text)


def conversation_key(namespace: str, conversation: str) -> str:
    return make_key("conv", namespace, conversation)


def message_key(namespace: str, conversation: str, ordinal: int) -> str:
    return make_key("msg", namespace, conversation, ordinal)


def user_key(namespace: str) -> str:
    return make_key("ent", namespace, USER)


def entity_key(namespace: str, conversation: str, entity: Entity) -> str:
    if entity.handle == USER:
        return user_key(namespace)
    # A name is who someone is: two sisters named in one message are two people, and "Ravi"
    # met again is the "my brother Ravi" of before. A role ("my boss") says who only while
    # no name is known (docs/graph.md, "Who is who").
    if entity.name and entity.resolved:
        return make_key("ent", namespace, entity.type, "name", normalise_name(entity.name))
    rel = entity.attrs.get("rel")
    if rel:
        return make_key("ent", namespace, entity.type, "rel", rel)
    return make_key("ent", namespace, "placeholder", conversation, entity.handle)


def statement_key(
    namespace: str,
    subject_key: str,
    predicate: str,
    object_key: str | None,
    value: Any,
    valid_from: str | None,
    valid_until: str | None,
    recurrence: str | None,
    ends_validity: bool = False,
    corrects: bool = False,
) -> str:
    val = None if value is None else [type(value).__name__, value]
    fields = [subject_key, predicate, object_key, val, valid_from, valid_until, recurrence]
    if corrects:
        fields.append("corrects")
    elif ends_validity:
        fields.append("ends")
    return make_key("stmt", namespace, *fields)


def edge_key(label: str, start: str, end: str, *extra: Any) -> str:
    # Most edges have no extra fields: their three strings are written here, as _canon would.
    blob = _canon((label, start, end, *extra)) if extra else f"[{_STR(label)},{_STR(start)},{_STR(end)}]"
    space = start[start.index(":") + 1 :][:16]  # an edge is its start's namespace's
    return f"edge:{space}{hashlib.sha256(blob.encode('utf-8')).hexdigest()[:32]}"
