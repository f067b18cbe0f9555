"""Keys: stable, documented, never crossing namespaces."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from agefacts.keys import _canon, entity_key, make_key, statement_key
from agefacts.models import Entity

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",))),
)
fields = st.lists(st.one_of(scalars, st.lists(scalars, max_size=3)), max_size=6)


@given(fields)
def test_the_canonical_encoder_writes_what_json_dumps_writes(values):
    # The documented key is the SHA-256 of compact JSON; the fast encoder must not change it.
    assert _canon(tuple(values)) == json.dumps(tuple(values), ensure_ascii=False, separators=(",", ":"))


def test_keys_are_namespace_scoped_and_follow_the_documented_rules():
    husband = Entity(handle="e1", type="Person", mention="my husband", attrs={"rel": "spouse_of:user"})
    named = Entity(
        handle="e7", type="Person", mention="Tom", name="Tom", resolution="resolved", attrs={"rel": "spouse_of:user"}
    )
    # The role to the user keys an unnamed entity, whatever the conversation or handle; a
    # name keys a named one, with its role or without.
    assert entity_key("ann", "c1", husband) == entity_key("ann", "c2", husband.model_copy(update={"handle": "e4"}))
    assert entity_key("ann", "c1", husband) != entity_key("bob", "c1", husband)
    assert entity_key("ann", "c2", named) == entity_key("ann", "c3", named.model_copy(update={"attrs": {}}))
    assert entity_key("ann", "c2", named) != entity_key("ann", "c1", husband)
    sister = named.model_copy(update={"name": "Rita", "attrs": {"rel": "sibling_of:user"}})
    assert entity_key("ann", "c2", sister) != entity_key("ann", "c2", sister.model_copy(update={"name": "Ana"}))
    tom = Entity(handle="e2", type="Person", mention="Tom", name="  TOM ", resolution="resolved")
    assert entity_key("ann", "c1", tom) == entity_key("ann", "c9", tom.model_copy(update={"name": "tom"}))
    placeholder = Entity(handle="e3", type="Person", mention="a friend")
    assert entity_key("ann", "c1", placeholder) != entity_key("ann", "c2", placeholder)
    assert make_key("ent", "ann", "user").startswith("ent:") and len(make_key("ent", "x")) == 4 + 16 + 32
    a = statement_key("ann", "ent:1", "lives_in", "ent:2", None, "2024-06", None, None)
    assert a == statement_key("ann", "ent:1", "lives_in", "ent:2", None, "2024-06", None, None)
    assert a != statement_key("ann", "ent:1", "lives_in", "ent:2", None, "2024-07", None, None)
    assert a != statement_key("ann", "ent:1", "lives_in", "ent:2", None, "2024-06", None, None, ends_validity=True)
    assert statement_key("a", "s", "p", None, 1, None, None, None) != statement_key(
        "a", "s", "p", None, "1", None, None, None
    )


@given(st.text(max_size=12), st.text(max_size=12), st.text(max_size=12))
def test_every_key_names_its_namespaces_key_space_and_an_edge_its_starts(ns, other, text):
    """The database refuses a tenant any key outside its namespace's space (sql/004): that
    holds only if each key, an edge's included, carries the space of the namespace it is of,
    as the database computes it."""
    import hashlib

    from agefacts.keys import conversation_key, edge_key, key_space, keyphrase_key, message_key, user_key

    space = hashlib.sha256(ns.encode("utf-8")).hexdigest()[:16]
    assert key_space(ns) == space
    start = message_key(ns, text, 3)
    for k in (
        conversation_key(ns, text),
        start,
        user_key(ns),
        keyphrase_key(ns, text),
        edge_key("PART_OF", start, conversation_key(other, text)),
    ):
        assert k.split(":", 1)[1][:16] == space
    if ns != other:
        assert conversation_key(ns, text) != conversation_key(other, text)


@given(st.text(min_size=1), st.text(), st.text(), st.lists(scalars, max_size=3))
def test_an_edge_key_is_the_hash_of_its_canonical_fields_with_or_without_extra_ones(label, start, end, extra):
    # An edge with no extra fields has its three strings written without _canon: the same text.
    import hashlib

    from agefacts.keys import edge_key

    start = "ent:" + start
    blob = json.dumps((label, start, end, *extra), ensure_ascii=False, separators=(",", ":"))
    digest = hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    try:
        got = edge_key(label, start, end, *extra)
    except UnicodeEncodeError:
        return  # a lone surrogate is no text to store: every input is checked before this
    assert got == f"edge:{start[4:20]}{digest}"


json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**63 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(alphabet=st.characters(blacklist_categories=("Cs",))),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)


@given(json_values)
def test_rows_travel_as_json_that_reads_back_as_the_json_module_reads_its_own(value):
    # Rows are written by pydantic-core's serializer (four times as fast): the same values,
    # though a float's exponent is written 1e-5 where the json module writes 1e-05.
    from agefacts.tables import dumps

    text = dumps(value)
    # Read back and written by the json module again: the same text, so the same values of
    # the same types (an int is not a float, -0.0 stays -0.0).
    assert json.dumps(json.loads(text)) == json.dumps(value)
