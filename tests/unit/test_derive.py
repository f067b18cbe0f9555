"""The derivation rules as pure functions (no engine)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from agefacts.derive import entity_props, sorted_json, statement_props, value_ident


def test_entity_and_statement_rules():
    ms = [
        {"k": "edge:1", "at": "2024-01-01", "name": "Tom", "mentions": ["Tom", "my husband"]},
        {"k": "edge:2", "at": "2024-02-01", "mentions": ["him"], "attrs": {"rel": "spouse_of:user"}},
        {"k": "edge:3", "at": "2024-02-01", "name": "Thomas", "mentions": []},
    ]
    assert entity_props(ms) == {
        "name": "Thomas",
        "attrs": {"rel": "spouse_of:user"},
        "resolution": "resolved",
        "mentions": ["Tom", "him", "my husband"],
    }
    assert entity_props([]) is None
    assert "mentions" not in entity_props([{"k": "edge:1", "mentions": []}])
    ev = [
        {"k": "edge:b", "at": "2024-01-01T00:00:00Z", "confidence": 0.5, "extractor": "x2"},
        {"k": "edge:a", "at": "2024-01-01T00:00:00Z", "confidence": 0.9, "model": "m1"},
        {"k": "edge:c", "at": "2023-01-01T00:00:00Z"},
    ]
    assert statement_props(ev) == {
        "recorded_at": "2023-01-01T00:00:00Z",
        "confidence": 0.9,
        "model": "m1",
        "extractor": "x2",
        "schema_ref": None,
    }


def test_a_whole_float_is_the_same_value_as_its_integer_and_nothing_else_is():
    from agefacts.derive import value_ident

    assert value_ident(0) == value_ident(0.0) == value_ident(-0.0)
    assert value_ident(7) == value_ident(7.0)
    assert len({value_ident(v) for v in (1, 1.5, True, "1", None, [1], {"a": 1})}) == 7


@given(st.permutations(range(4)))
def test_evidence_on_one_place_is_one_piece_whatever_the_order(order):
    from agefacts.derive import one_per_place
    from agefacts.models import Evidence

    def ev(turn, start, conf, tier):
        return Evidence(
            turn=turn, quote="x", char_start=start, char_end=start + 1, byte_start=start, byte_end=start + 1,
            match=tier, at="2024-01-01T00:00:00Z", confidence=conf,
        )  # fmt: skip

    items = [ev(0, 0, 0.6, "whitespace"), ev(0, 0, 0.73, "typography"), ev(0, 0, None, "exact"), ev(1, 0, 0.5, "exact")]
    merged = one_per_place([items[i] for i in order])
    assert [(e.turn, e.confidence, e.match) for e in merged] == [(0, 0.73, "exact"), (1, 0.5, "exact")]


_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text()),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=10,
)


@given(_json)
def test_comparable_text_is_what_json_dumps_writes(value):
    # Fact version keys hash this text, and values are told apart by it: an encoder made once
    # must write what json.dumps wrote when the graphs were written.
    assert sorted_json(value) == json.dumps(value, sort_keys=True, ensure_ascii=False)
    whole = isinstance(value, float) and value.is_integer()
    assert value_ident(value) == (str(int(value)) if whole else json.dumps(value, sort_keys=True))
