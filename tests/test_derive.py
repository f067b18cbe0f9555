"""The derivation rules as pure functions (no engine), and the compiled Cypher that states the
same rules held equal to them on generated groups (on the engine)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agefacts import cypher as cy
from agefacts.compile import supersession
from agefacts.derive import Member, entity_props, statement_props, supersede, supersession_key

TIMES = st.sampled_from(["2024", "2024-03", "2024-03-01", "2024-03-01T10:00:00Z", "2024-06", "2025-01-01", "2025"])
KNOWN = st.sampled_from(
    ["2024-01-01T10:00:00Z", "2024-04-01T10:00:00Z", "2024-07-01T10:00:00Z", "2025-02-01T10:00:00Z"]
)


@st.composite
def members(draw):
    out = []
    for i in range(draw(st.integers(1, 6))):
        ends = draw(st.integers(0, 6)) == 0
        vf = draw(st.one_of(st.none(), TIMES))
        vu = draw(st.one_of(st.none(), TIMES))
        if vf and vu and vu < vf:
            vf, vu = vu, vf
        out.append(
            Member(
                f"stmt:{i:02d}",
                json.dumps(draw(st.sampled_from(["Lyon", "Oslo", "Bergen"]))),
                ends,
                vf,
                vu,
                draw(KNOWN),
            )
        )
    return out


@given(members())
def test_supersession_does_not_depend_on_the_order_it_is_given(group):
    assert supersede(group) == supersede(list(reversed(group)))


@given(members())
def test_a_fact_is_superseded_by_a_later_one_only_and_closed_where_it_was(group):
    s = supersede(group)
    order = {m.k: i for i, m in enumerate(sorted(group, key=supersession_key))}
    by_k = {m.k: m for m in group}
    for _, new, old in s.edges:
        assert order[new] > order[old]
        assert not by_k[old].ends_fact
        p = s.props[old]
        assert p["superseded_at"] >= by_k[old].recorded_at
        if by_k[old].stated_until is not None:
            assert p["valid_until"] == by_k[old].stated_until and p["valid_until_inferred"] is None
        else:
            assert p["valid_until_inferred"] is True
    assert len({old for _, _, old in s.edges}) == len(s.edges)  # at most one successor each
    for k, p in s.props.items():
        if not any(old == k for _, _, old in s.edges):
            assert p["superseded_at"] is None and p["valid_until"] == by_k[k].stated_until


def test_an_undated_value_after_another_starts_where_it_was_learned():
    a = Member("stmt:a", '"cook"', False, None, None, "2024-01-01T10:00:00Z")
    b = Member("stmt:b", '"chef"', False, None, None, "2024-05-01T10:00:00Z")
    s = supersede([b, a])
    assert s.props["stmt:a"]["valid_start"] is None  # the first is open at the start
    assert s.props["stmt:b"]["valid_start"] == "2024-05-01T10:00:00Z"
    assert s.props["stmt:a"]["valid_until"] == "2024-05-01T10:00:00Z"
    assert s.edges == [("sup:stmt:a>stmt:b", "stmt:b", "stmt:a")]


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


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(group=members())
def test_the_compiled_supersession_cypher_states_the_same_rule(db, group):
    """A group written by hand, superseded by the compiled Cypher, reads back as derive says."""
    db.ensure_labels(vertex=["Person", "Statement", "Place"], edge=["SUBJECT_OF", "ABOUT", "SUPERSEDES"])
    for label in ("SUBJECT_OF", "ABOUT", "SUPERSEDES"):
        db.cypher_raw(f"MATCH ()-[r:{label}]->() DELETE r")
    db.cypher_raw("MATCH (n) DELETE n")
    db.cypher_raw("CREATE (:Person {k: 'fz:user'})")
    for m in group:
        props = {
            "k": m.k,
            "predicate": "lives_in",
            "recorded_at": m.recorded_at,
            "valid_from": m.valid_from,
            "valid_until": m.stated_until,
            "ends_fact": True if m.ends_fact else None,
        }
        place = "fz:" + json.loads(m.ident)
        db.cypher_raw(f"MERGE (:Place {{k: {cy.literal(place)}}})")
        db.cypher_raw(
            f"MATCH (u:Person), (p:Place) WHERE u.k = 'fz:user' AND p.k = {cy.literal(place)} "
            f"CREATE (u)-[:SUBJECT_OF]->(s:Statement {cy.props_map({k: v for k, v in props.items() if v is not None})})-[:ABOUT]->(p)"
        )
    for line in supersession("Person", "fz:user", "lives_in"):
        db.cypher_raw(line)
    want = supersede(
        [
            Member(
                m.k, json.dumps("fz:" + json.loads(m.ident)), m.ends_fact, m.valid_from, m.stated_until, m.recorded_at
            )
            for m in group
        ]
    )
    got = {}
    for k, p in db.cypher_raw("MATCH (s:Statement) RETURN s.k, properties(s)", columns=("k", "p")):
        p = json.loads(p)
        got[json.loads(k)] = {
            f: p.get(f) for f in ("valid_until", "valid_until_inferred", "superseded_at", "valid_start")
        }
    assert got == want.props
    edges = sorted(
        tuple(json.loads(c) for c in r)
        for r in db.cypher_raw(
            "MATCH (n:Statement)-[r:SUPERSEDES]->(o:Statement) RETURN r.k, n.k, o.k", columns=("e", "n", "o")
        )
    )
    assert edges == want.edges
