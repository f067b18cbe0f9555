"""Fact versions (agefacts.timeline.versions): the reading of time stored. On generated life
stories, the versions that hold at a known time K and a valid time T are exactly the facts the
rule reads from what was said by K, row for row, and what the interval oracle says."""

from __future__ import annotations

import os

from hypothesis import given, settings

from agefacts.timeline import VERSION_FIELDS, fact_rows, known_at, versions

from ..stories import ASK_KNOWN, ASK_VALID, Said, oracle, statement_rows, stories


def held(vs, valid_at: str, known: str) -> list[dict]:
    """What a person's Cypher does with the versions: two interval tests."""
    return [
        dict(v.row, evidence=v.evidence(known))
        for v in vs
        if v.known_from <= known
        and (v.known_until is None or known < v.known_until)
        and (v.row["valid_from"] is None or v.row["valid_from"] <= valid_at)
        and (v.row["valid_until"] is None or valid_at < v.row["valid_until"])
    ]


def _comparable(rows) -> list[tuple]:
    fields = [f for f in VERSION_FIELDS if f != "statements"] + ["evidence"]
    return sorted(tuple(repr(r.get(f)) for f in fields) for r in rows)


@settings(max_examples=int(os.environ.get("AGEFACTS_FUZZ_EXAMPLES", "300")), deadline=None)
@given(stories())
def test_the_versions_that_hold_are_the_facts_the_rule_reads(story):
    rows = statement_rows(story)
    vs = versions(rows)
    for known in ASK_KNOWN:
        now = known_at(rows, known)
        for valid_at in ASK_VALID:
            got = held(vs, valid_at, known)
            assert _comparable(got) == _comparable(fact_rows(now, valid_at)), (valid_at, known)
            shown = {(r["predicate"], r["object_key"][4:] if r["object_key"] else r["value"]) for r in got}
            assert shown == oracle(story, valid_at, known), (valid_at, known)
    # Known intervals of one version never run backwards, and end where another reading begins.
    for v in vs:
        assert v.known_until is None or v.known_from < v.known_until


def test_the_st_lukes_story_in_versions():
    """Northwind said undated; 'I left St. Luke's in October' with no start: where another job
    is known from the open past, the end yields to it; once the June start is said, St. Luke's
    runs June to October and Northwind ends where it began."""
    story = [
        Said(0, "works_at", "Northwind", "states", None, None, ("2024-05-10T09:00:00Z",)),
        Said(1, "works_at", "St. Luke's", "states", None, "2025-10", ("2025-11-03T09:00:00Z",)),
        Said(2, "works_at", "St. Luke's", "states", "2025-06", None, ("2025-12-01T09:00:00Z",)),
    ]
    spans = [
        (v.row["object_key"], v.row["valid_from"], v.row["valid_until"], v.known_from, v.known_until)
        for v in versions(statement_rows(story))
    ]
    assert spans == [
        ("ent:Northwind", None, None, "2024-05-10T09:00:00Z", "2025-12-01T09:00:00Z"),
        ("ent:St. Luke's", "2025-06", "2025-10", "2025-12-01T09:00:00Z", None),
        ("ent:Northwind", None, "2025-06", "2025-12-01T09:00:00Z", None),
    ]


def test_a_fact_said_again_is_one_version_with_one_more_piece_of_evidence():
    story = [Said(0, "likes", "jazz", "states", None, None, ("2024-01-01T10:00:00Z", "2024-03-01T10:00:00Z"))]
    (v,) = versions(statement_rows(story))
    assert (v.known_from, v.known_until) == ("2024-01-01T10:00:00Z", None)
    assert [v.evidence(k) for k in ("2024-02-01T00:00:00Z", "2024-04-01T00:00:00Z")] == [1, 2]
