"""Rules applied when facts are read: a question's words rank the facts; first-person words
link the owner. (The reading of time is tests/unit/test_timeline.py.)"""

from __future__ import annotations

from agefacts.retrieve import link_rows, rank

from ..helpers import ONTO


def test_first_person_words_link_the_owner_only_when_not_part_of_a_role():
    names = [
        {"key": "u", "namespace": "n", "name": None, "mentions": [], "attrs": None, "role": "user"},
        {"key": "s", "namespace": "n", "name": "Ana", "mentions": ["my sister"], "attrs": {"rel": "sibling_of:user"}, "role": None},
        {"key": "o", "namespace": "n", "name": "Oslo", "mentions": [], "attrs": None, "role": None},
    ]  # fmt: skip
    keys = lambda q: [e.key for e in link_rows(q, names, "n")]  # noqa: E731
    assert keys("Where do I live?") == ["u"]
    assert keys("Where does my sister live?") == ["s"]
    assert keys("Does my sister know me?") == ["s", "u"]
    assert keys("Tell me about Oslo") == ["o"]
    assert keys("What's the weather?") == []
    # Without a namespace: the owner of what else it names, or else every owner.
    names.append({"key": "u2", "namespace": "m", "name": None, "mentions": [], "attrs": None, "role": "user"})
    assert [e.key for e in link_rows("Where do I live?", names, None)] == ["u", "u2"]
    assert [e.key for e in link_rows("Does my sister know me?", names, None)] == ["s", "u"]


def test_ranking_puts_the_named_predicate_first_then_the_latest():
    facts = [
        {"predicate": "job_title", "valid_from": None, "recorded_at": "2024-01-01T00:00:00Z"},
        {"predicate": "lives_in", "valid_from": "2020", "recorded_at": "2024-01-01T00:00:00Z"},
        {"predicate": "lives_in", "valid_from": "2023-05", "recorded_at": "2024-01-01T00:00:00Z"},
    ]
    assert [(f["predicate"], f["valid_from"]) for f in rank("Where have I been living?", facts, ONTO)] == [
        ("lives_in", "2023-05"),
        ("lives_in", "2020"),
        ("job_title", None),
    ]
    assert rank("What is my job title?", facts, ONTO)[0]["predicate"] == "job_title"


def test_the_same_words_naming_several_entities_link_them_all():
    names = [
        {"key": "t", "namespace": "ann", "name": "Tom", "mentions": [], "attrs": {"rel": "spouse_of:user"}, "role": None},
        {"key": "r", "namespace": "omar", "name": "Rania", "mentions": [], "attrs": {"rel": "spouse_of:user"}, "role": None},
        {"key": "j1", "namespace": "a", "name": "John", "mentions": [], "attrs": None, "role": None},
        {"key": "j2", "namespace": "b", "name": "John", "mentions": [], "attrs": None, "role": None},
    ]  # fmt: skip
    assert sorted(e.key for e in link_rows("Where does my husband work?", names, None)) == ["r", "t"]
    assert sorted(e.key for e in link_rows("Where does John live?", names, None)) == ["j1", "j2"]
    # (With a namespace, the inventory holds only its entities: the entity_names query's filter.)
    only_ann = [n for n in names if n["namespace"] == "ann"]
    assert [e.key for e in link_rows("Where does my husband work?", only_ann, "ann")] == ["t"]


def test_how_many_facts_to_return_is_a_whole_number_of_at_least_one():
    """k=0 returned nothing and k=-1 every fact but the last (a slice): both are refused
    before the database is asked anything (there is none here)."""
    import asyncio

    import pytest

    from agefacts.errors import UsageError
    from agefacts.retrieve import ask, ask_async

    from ..helpers import ONTO

    for k in (0, -1, 2.5, True):
        with pytest.raises(UsageError, match="k is how many facts to return"):
            ask(None, "Where do I live?", ONTO, namespace="n", k=k)  # type: ignore[arg-type]
        with pytest.raises(UsageError, match="k is how many facts to return"):
            asyncio.run(ask_async(None, "Where do I live?", ONTO, namespace="n", k=k))  # type: ignore[arg-type]


def test_the_times_a_question_names():
    import datetime as dt

    from agefacts.retrieve import named_times

    now = dt.datetime(2026, 12, 1, 15, 0)
    assert named_times("What did Mel paint in July 2023?", now) == [("2023-07-01T00:00:00Z", "2023-08-01T00:00:00Z")]
    assert named_times("on 8 May, 2023 or May 9th 2023", now) == [
        ("2023-05-08T00:00:00Z", "2023-05-09T00:00:00Z"),
        ("2023-05-09T00:00:00Z", "2023-05-10T00:00:00Z"),
    ]
    assert named_times("in December 2023", now) == [("2023-12-01T00:00:00Z", "2024-01-01T00:00:00Z")]
    assert named_times("how often in 2022?", now) == [("2022-01-01T00:00:00Z", "2023-01-01T00:00:00Z")]
    assert named_times("what did I say last week?", now) == [("2026-11-23T00:00:00Z", "2026-11-30T00:00:00Z")]
    assert named_times("yesterday", now) == [("2026-11-30T00:00:00Z", "2026-12-01T00:00:00Z")]
    assert named_times("last month", now) == [("2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z")]
    assert named_times("last month", dt.datetime(2027, 1, 5)) == [("2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z")]
    assert named_times("I may have 2023 apples", now) == []  # "may" without a month's place, a bare number
    # Seasons and times counted back, as a person says them (they were not read at all).
    assert named_times("Where did I live last summer?", now) == [("2026-06-01T00:00:00Z", "2026-09-01T00:00:00Z")]
    july = dt.datetime(2026, 7, 2)
    assert named_times("last summer", july) == [("2025-06-01T00:00:00Z", "2025-09-01T00:00:00Z")]  # not over yet
    assert named_times("this winter", dt.datetime(2027, 1, 10)) == [("2026-12-01T00:00:00Z", "2027-03-01T00:00:00Z")]
    assert named_times("two years ago", now) == [("2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z")]
    assert named_times("3 months ago", now) == [("2026-09-01T00:00:00Z", "2026-10-01T00:00:00Z")]
    assert named_times("a month ago", dt.datetime(2027, 1, 5)) == [("2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z")]
