"""The Cypher recipes of docs/querying.md, run as written against stories loaded on both load
paths and compared with the commands that answer the same questions: what held at T as known
at K, the current facts, a predicate's history, the words a fact came from, what changed
between two known times, and facts across relations. The St. Luke's story, a correction and
two statements of one fact are asked through hand-written Cypher only."""

from __future__ import annotations

import datetime as dt

import pytest

from agefacts.load import Loader
from agefacts.named import run_named
from agefacts.reads import facts
from agefacts.timeline import known_at, run_rows

from ..helpers import ONTO, VIAS, claim, conversation, user_turn
from .recipes import ask

NS = "ruth"
NOW = "9999-12-31T23:59:59Z"


def org(handle: str, name: str) -> dict:
    return {"handle": handle, "type": "Organization", "mention": name, "resolution": "resolved", "name": name}


def said(cid: str, at: str, text: str, statements: list[dict], entities=()) -> object:
    return conversation(cid, [user_turn(text, at, list(entities), statements)], namespace=NS)


def ruth() -> list:
    """A nurse's work (an end said before its start), an allergy corrected and said again,
    and one liking said twice."""
    return [
        said(
            "c1",
            "2024-05-10T09:00:00Z",
            "I work at Northwind.",
            [claim("user", "works_at", "I work at Northwind", obj="o")],
            [org("o", "Northwind")],
        ),
        said(
            "c2",
            "2025-11-03T09:00:00Z",
            "I left St. Luke's in October.",
            [claim("user", "works_at", "I left St. Luke's in October", obj="o", valid_until="2025-10")],
            [org("o", "St. Luke's")],
        ),
        said(
            "c3",
            "2025-12-01T09:00:00Z",
            "I started at St. Luke's in June.",
            [claim("user", "works_at", "I started at St. Luke's in June", obj="o", valid_from="2025-06")],
            [org("o", "St. Luke's")],
        ),
        said(
            "c4",
            "2024-03-01T09:00:00Z",
            "I'm allergic to latex.",
            [claim("user", "allergic_to", "allergic to latex", value="latex")],
        ),
        said(
            "c5",
            "2024-06-01T09:00:00Z",
            "Correction: not latex, it's nickel.",
            [
                claim("user", "allergic_to", "not latex", value="latex", polarity="negated", correction=True),
                claim("user", "allergic_to", "it's nickel", value="nickel"),
            ],
        ),
        said(
            "c6",
            "2025-02-01T09:00:00Z",
            "Turns out I am allergic to latex after all.",
            [claim("user", "allergic_to", "allergic to latex after all", value="latex")],
        ),
        said("c7", "2024-01-10T09:00:00Z", "I love jazz.", [claim("user", "likes", "I love jazz", value="jazz")]),
        said("c8", "2024-08-10T09:00:00Z", "Jazz, I like jazz.", [claim("user", "likes", "I like jazz", value="jazz")]),
    ]


@pytest.fixture(params=VIAS)
def loaded(request, db):
    loader = Loader(db, ONTO, via=request.param)
    for c in ruth():
        assert loader.load(c).status == "loaded"
    return db


VALID = ["2023", "2024-04", "2024-07", "2025-03", "2025-08", "2025-11", "2026-06"]
KNOWN = ["2024-04-01T00:00:00Z", "2024-07-01T00:00:00Z", "2025-03-01T00:00:00Z", "2025-11-10T00:00:00Z", NOW]


def _facts(db, valid: str, known: str) -> set[tuple]:
    rows = facts(db, "user", namespace=NS, valid_at=valid, known_at=known).dicts()
    return {
        (r["predicate"], r["object"] or r["value"], r["valid_from"], r["valid_until"], r["recorded_at"], r["quote"])
        for r in rows
    }


def _cypher(db, valid: str, known: str) -> set[tuple]:
    rows = ask(db, "valid at T, as known at K", namespace=NS, valid=valid, known=known)
    out = {(r["predicate"], r["value"], r["valid_from"], r["valid_until"], r["recorded_at"], r["quote"]) for r in rows}
    assert len(out) == len(rows), ("a fact shown twice", rows)
    return out


def test_valid_at_as_known_at_is_what_facts_gives(loaded):
    for known in KNOWN:
        for valid in VALID:
            assert _cypher(loaded, valid, known) == _facts(loaded, valid, known), (valid, known)


def _shown(db, valid: str, known: str = NOW) -> set[tuple[str, str]]:
    return {(p, v) for p, v, *_ in _cypher(db, valid, known)}


def test_the_st_lukes_story_through_cypher_only(loaded):
    # "I left St. Luke's in October" (no start), when Northwind was said before: not St.
    # Luke's years before the job began.
    assert ("works_at", "Northwind") in _shown(loaded, "2025-03")
    assert ("works_at", "St. Luke's") not in _shown(loaded, "2025-03")
    assert ("works_at", "St. Luke's") in _shown(loaded, "2025-08")
    assert {p for p in _shown(loaded, "2025-11") if p[0] == "works_at"} == set()
    # As known before the start was said, the end yields to Northwind, known from the open past.
    assert ("works_at", "Northwind") in _shown(loaded, "2025-08", "2025-11-10T00:00:00Z")


def test_a_correction_and_as_known_before_it_through_cypher_only(loaded):
    before = _shown(loaded, "2024-05", "2024-05-01T00:00:00Z")
    after = _shown(loaded, "2024-05", "2024-07-01T00:00:00Z")
    assert ("allergic_to", "latex") in before and ("allergic_to", "nickel") not in before
    assert ("allergic_to", "latex") not in after and ("allergic_to", "nickel") in after
    # Said again after the correction: known since it was said again, quoting those words.
    (latex,) = [r for r in _cypher(loaded, "2025-06", NOW) if r[:2] == ("allergic_to", "latex")]
    assert latex[4:] == ("2025-02-01T09:00:00Z", "allergic to latex after all")


def test_two_statements_of_one_fact_are_one_row_through_cypher_only(loaded):
    rows = [
        r
        for r in ask(loaded, "valid at T, as known at K", namespace=NS, valid="2025", known=NOW)
        if r["predicate"] == "likes"
    ]
    assert [(r["value"], r["quote"]) for r in rows] == [("jazz", "I love jazz")]
    (fact,) = loaded.cypher(
        "MATCH (f:Fact) WHERE f.predicate = 'likes' AND f.known_until IS NULL RETURN size(f.said_at)"
    ).rows
    assert fact == (2,)


def test_current_facts_are_what_facts_gives(loaded):
    today = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    got = {(r["predicate"], r["value"], r["quote"]) for r in ask(loaded, "current facts", namespace=NS, today=today)}
    want = {
        (r["predicate"], r["object"] or r["value"], r["quote"]) for r in facts(loaded, "user", namespace=NS).dicts()
    }
    assert got == want and got


def _user(db) -> str:
    return run_named(db, "entities", {"text": "user", "namespace": NS}).dicts()[0]["key"]


def _runs(db, known: str) -> list[dict]:
    """Every run the Python rule reads as known at ``known``: the oracle the graph is held to."""
    rows = run_named(db, "fact_statements", {"entity": _user(db), "known_at": NOW}).dicts()
    return run_rows(known_at(rows, known))


def test_a_predicates_history_is_every_run_as_read_now(loaded):
    for predicate in ("works_at", "allergic_to", "likes"):
        got = sorted(
            (r["value"], r["valid_from"] or "", r["valid_until"] or "", r["quote"])
            for r in ask(loaded, "a predicate's history", namespace=NS, predicate=predicate)
        )
        want = sorted(
            (r["object"] or r["value"], r["valid_from"] or "", r["valid_until"] or "", r["quote"])
            for r in _runs(loaded, NOW)
            if r["predicate"] == predicate
        )
        assert got == want and got, predicate


def test_the_words_a_fact_came_from_are_its_evidence(loaded):
    for predicate in ("allergic_to", "likes", "works_at"):
        words: dict[str, list[dict]] = {}
        for r in ask(loaded, "the words a fact came from", namespace=NS, predicate=predicate):
            words.setdefault(r["fact"], []).append(r)
        # One list of words per run read now, its first the quote facts cites, as many as its evidence.
        runs = [r for r in _runs(loaded, NOW) if r["predicate"] == predicate]
        assert sorted((w[0]["quote"], len(w)) for w in words.values()) == sorted(
            (r["quote"], r["evidence"]) for r in runs
        )
    latex = [w for w in words_of(loaded, "allergic_to") if w[0]["quote"].startswith("allergic to latex")]
    # Said again after the correction: only the words said since count.
    assert [[x["quote"] for x in w] for w in latex] == [["allergic to latex after all"]]


def words_of(db, predicate: str) -> list[list[dict]]:
    words: dict[str, list[dict]] = {}
    for r in ask(db, "the words a fact came from", namespace=NS, predicate=predicate):
        words.setdefault(r["fact"], []).append(r)
    return list(words.values())


def test_what_changed_between_two_known_times(loaded):
    def read(known: str) -> set[tuple]:
        return {
            (
                r["predicate"],
                r["object"] or r["value"],
                r["valid_from"],
                r["valid_until"],
                r["recorded_at"],
            )
            for r in _runs(loaded, known)
        }

    for before, after in [(KNOWN[0], KNOWN[1]), (KNOWN[1], KNOWN[3]), (KNOWN[0], NOW)]:
        rows = ask(loaded, "what changed between two known times", namespace=NS, before=before, after=after)
        got = {
            (
                r["change"],
                r["predicate"],
                r["value"],
                r["valid_from"],
                r["valid_until"],
                r["recorded_at"],
            )
            for r in rows
        }
        want = {("no longer read", *f) for f in read(before) - read(after)} | {
            ("read since", *f) for f in read(after) - read(before)
        }
        assert got == want and got, (before, after)
    rows = ask(loaded, "what changed between two known times", namespace=NS, before=KNOWN[0], after=KNOWN[1])
    assert {(r["change"], r["value"]) for r in rows if r["predicate"] == "allergic_to"} == {
        ("no longer read", "latex"),
        ("read since", "nickel"),
    }


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("who_holds", ["husband", "sister"])
def test_facts_across_a_relation(db, via, who_holds):
    """'My sister Maya', 'her husband Raj works at Globex' (the marriage said from either side):
    the recipe answers as facts asked one step at a time does."""
    people = [
        {"handle": "s", "type": "Person", "mention": "my sister Maya", "resolution": "resolved", "name": "Maya"},
        {"handle": "h", "type": "Person", "mention": "Raj", "resolution": "resolved", "name": "Raj"},
        org("g", "Globex"),
    ]
    married = (
        claim("h", "spouse_of", "her husband Raj", obj="s")
        if who_holds == "husband"
        else claim("s", "spouse_of", "her husband Raj", obj="h")
    )
    text = "My sister Maya: her husband Raj works at Globex."
    conv = said(
        "rel",
        "2026-01-05T10:00:00Z",
        text,
        [
            claim("user", "sibling_of", "My sister Maya", obj="s"),
            married,
            claim("h", "works_at", "Raj works at Globex", obj="g"),
        ],
        people,
    )
    assert Loader(db, ONTO, via=via).load(conv).status == "loaded"
    today = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    got = [
        (r["sister"], r["husband"], r["works_at"])
        for r in ask(db, "facts across a relation", namespace=NS, today=today)
    ]
    # One step at a time.
    (sister,) = [r["object"] for r in facts(db, "user", namespace=NS).dicts() if r["predicate"] == "sibling_of"]
    (spouse,) = [
        r["subject"] if r["object"] == sister else r["object"]
        for r in facts(db, sister, namespace=NS).dicts()
        if r["predicate"] == "spouse_of"
    ]
    work = [r["object"] for r in facts(db, spouse, namespace=NS).dicts() if r["predicate"] == "works_at"]
    assert got == [(sister, spouse, w) for w in work] == [("Maya", "Raj", "Globex")]
