"""The derivation rules as pure functions (no engine), and the compiled Cypher that states the
same rules held equal to them on generated groups (on the engine)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings

from agefacts import cypher as cy
from agefacts.derive import Member, supersede, supersession

from ..helpers import members


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
            "corrects": True if m.corrects else None,
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
                m.k,
                json.dumps("fz:" + json.loads(m.ident)),
                m.ends_fact,
                m.valid_from,
                m.stated_until,
                m.recorded_at,
                m.corrects,
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
