"""The reading of time (agefacts.timeline) against an interval oracle written in the test, on
generated life stories: jobs, homes, likes and allergies, started, ended, said again,
negated and corrected, dated and undated, asked at every valid and known time."""

from __future__ import annotations

import os

from hypothesis import given, settings

from agefacts.timeline import fact_rows, runs

from ..stories import ASK_KNOWN, ASK_VALID, PREDICATES, Said, oracle, statement_rows, stories


@settings(max_examples=int(os.environ.get("AGEFACTS_FUZZ_EXAMPLES", "300")), deadline=None)
@given(stories())
def test_every_answer_matches_the_interval_oracle(story):
    for known_at in ASK_KNOWN:
        rows = statement_rows(story, known_at)
        for valid_at in ASK_VALID:
            got = fact_rows(rows, valid_at)
            facts = {(r["predicate"], r["object"] if r["object"] is not None else r["value"]) for r in got}
            assert len(facts) == len(got), ("a fact shown twice", got)
            assert facts == oracle(story, valid_at, known_at), (valid_at, known_at)
            for p, (single, _, _) in PREDICATES.items():
                if single:
                    assert len([f for f in facts if f[0] == p]) <= 1, ("two current values", p, valid_at, known_at)


def test_the_five_stories_of_the_issue_read_as_a_person_would():
    nurse = [
        Said(0, "works_at", "Northwind", "states", None, None, ("2024-05-10T09:00:00Z",)),
        Said(1, "works_at", "St. Luke's", "states", "2025-06", None, ("2025-06-20T09:00:00Z",)),
        Said(2, "works_at", "St. Luke's", "states", None, "2025-10", ("2025-11-03T09:00:00Z",)),
    ]
    k = "2026-01-01T00:00:00Z"

    def shown(t: str, kk: str = k) -> list[tuple]:
        return [(r["object"], r["valid_from"], r["valid_until"]) for r in fact_rows(statement_rows(nurse, kk), t)]

    assert shown("2025-03-01") == [("Northwind", None, "2025-06")]
    assert shown("2025-08-01") == [("St. Luke's", "2025-06", "2025-10")]
    assert shown("2025-12-01") == []
    assert shown("2025-12-01", "2025-07-01T00:00:00Z") == [("St. Luke's", "2025-06", None)]
    # "I left St. Luke's in October" alone, with Northwind known to hold: Northwind stays,
    # and the end-only fact holds nowhere (it begins where the value before it ends).
    alone = [nurse[0], nurse[2]]
    assert [(r["object"]) for r in fact_rows(statement_rows(alone, k), "2025-08-01")] == ["Northwind"]
    assert [(r.fact[2], r.start, r.end) for r in runs(statement_rows(alone, k))] == [("id:ent:Northwind", None, None)]
    # Moving back, undated: said again after Oslo, Lyon is where one lives again.
    homes = [
        Said(0, "lives_in", "Lyon", "states", None, None, ("2024-01-15T10:00:00Z", "2025-03-01T10:00:00Z")),
        Said(1, "lives_in", "Oslo", "states", "2024-06", None, ("2024-06-20T10:00:00Z",)),
    ]
    assert [r["object"] for r in fact_rows(statement_rows(homes, k), "2025-06-01")] == ["Lyon"]
    assert [r["object"] for r in fact_rows(statement_rows(homes, k), "2024-09-01")] == ["Oslo"]
