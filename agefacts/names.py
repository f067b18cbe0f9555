"""The naming rules: which strings may be a graph name, a label (entity type) or a plain
identifier (property, attribute or column name). Each is put into Cypher or SQL text as it is,
so each is a whole-string match of a closed pattern (``fullmatch``: a regex's ``$`` also
matches before a final newline and would let ``rel\\n`` through). Every check in agefacts asks
these; each caller says in its own words what it was given and what to do instead."""

from __future__ import annotations

import re

__all__ = [
    "CORE_EDGE_LABELS",
    "CORE_VERTEX_LABELS",
    "MAX_TYPE_LENGTH",
    "ROLE_WORDS",
    "USER",
    "is_entity_label",
    "is_graph_name",
    "is_identifier",
    "is_label",
    "is_predicate",
    "role_named",
]

USER = "user"
"""The handle that always means the namespace's owner; it needs no entity entry."""

ROLE_WORDS = {
    "spouse_of": ["husband", "wife", "spouse"],
    "partner_of": ["partner", "boyfriend", "girlfriend"],
    "sibling_of": ["sister", "brother", "sibling"],
    "parent_of": ["son", "daughter", "child", "kid"],
    "child_of": ["mother", "father", "mum", "mom", "dad", "parent"],
    "friend_of": ["friend"],
    "colleague_of": ["colleague", "coworker"],
    "boss_of": ["boss", "manager"],
}
"""Words that name an entity by its role to the user (``attrs.rel``), said with "my"."""


def role_named(text: str) -> str | None:
    """The role ``attrs.rel`` that "my partner" (or "my wife", ...) names, or None."""
    words = text.casefold().split()
    if len(words) != 2 or words[0] != "my":
        return None
    return next((f"{rel}:user" for rel, said in ROLE_WORDS.items() if words[1] in said), None)


# agefacts' own labels: no entity type may take one of these names.
CORE_VERTEX_LABELS = frozenset({"Conversation", "Message", "Statement", "Keyphrase", "Fact"})
CORE_EDGE_LABELS = frozenset(
    {
        "PART_OF",
        "MENTIONED_IN",
        "SUBJECT_OF",
        "ABOUT",
        "EVIDENCED_BY",
        "APPEARS_IN",
        "CO_OCCURS",
        "HOLDS",
        "OBJECT",
    }
)
# An entity type becomes a label, whose table AGE pairs with a sequence named <label>_id_seq;
# a longer name would be cut at PostgreSQL's 63 characters and could meet another's.
MAX_TYPE_LENGTH = 40

_PREDICATE = re.compile(r"[a-z][a-z0-9_]{0,62}")
_LABEL = re.compile(r"[A-Z][A-Za-z0-9_]{0,62}")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
# AGE needs at least 3 characters for a graph name.
_GRAPH = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,62}")


def is_identifier(name: object) -> bool:
    """A plain identifier (property, column or attribute name): ``[A-Za-z_][A-Za-z0-9_]*``."""
    return isinstance(name, str) and _IDENTIFIER.fullmatch(name) is not None


def is_label(name: object) -> bool:
    """A label or entity type: ``[A-Z][A-Za-z0-9_]*``."""
    return isinstance(name, str) and _LABEL.fullmatch(name) is not None


def is_entity_label(name: str, kind: str = "v") -> bool:
    """Whether a graph label (``kind`` 'v' or 'e', as AGE's catalog says) is an entity type's:
    a vertex label that is not one of agefacts' own."""
    return kind == "v" and name not in CORE_VERTEX_LABELS


def is_predicate(name: object) -> bool:
    """A predicate of the ontology: ``[a-z][a-z0-9_]*``."""
    return isinstance(name, str) and _PREDICATE.fullmatch(name) is not None


def is_graph_name(name: object) -> bool:
    """A graph name: an identifier of 3 to 63 characters."""
    return isinstance(name, str) and _GRAPH.fullmatch(name) is not None
