"""Two kinds of time: valid time, known time, supersession and as-of queries."""

from __future__ import annotations

import itertools
import json

import pytest

from agefacts.cli import main
from agefacts.db import Database
from agefacts.errors import QueryError
from agefacts.inputs import read_conversations
from agefacts.load import Loader
from agefacts.reads import digest, facts, history

from ..helpers import EXAMPLES, ONTO, VIAS, likes


def convs(*ids):
    by_id = {c.id: c for _, c in read_conversations([EXAMPLES])}
    return [by_id[i] for i in ids]


def load(db, items):
    loader = Loader(db, ONTO)
    for c in items:
        assert loader.load(c).status == "loaded"


def cities(table):
    return [r["object"] for r in table.dicts()]


@pytest.mark.parametrize(
    "valid_at, city",
    [
        ("2024-03-01", "Lyon"),
        ("2024-10-01", "Oslo"),
        ("2025-06-01", "Bergen"),
        ("2024-06-15", "Oslo"),
        ("2025-02-28", "Oslo"),
    ],
)
def test_the_right_city_at_each_valid_time(db, valid_at, city):
    load(db, convs("nina-01", "nina-02", "nina-03"))
    assert cities(facts(db, "user", namespace="nina", valid_at=valid_at)) == [city]


def test_as_known_before_the_second_conversation_the_old_city_is_still_valid(db):
    load(db, convs("nina-01", "nina-02", "nina-03"))
    assert cities(facts(db, "user", namespace="nina", valid_at="2024-10-01", known_at="2024-07-01")) == ["Lyon"]
    assert cities(facts(db, "user", namespace="nina", valid_at="2024-10-01", known_at="2024-07-03")) == ["Oslo"]
    # Before anything was said there is nothing to know.
    assert cities(facts(db, "user", namespace="nina", known_at="2023-12-31")) == []


def test_all_six_loading_orders_give_one_digest(dsn, graph_name):
    digests = set()
    for i, order in enumerate(itertools.permutations(("nina-01", "nina-02", "nina-03"))):
        db = Database(dsn, f"{graph_name}_{i}").connect()
        try:
            load(db, convs(*order))
            digests.add(digest(db))
        finally:
            db.drop_graph()
    assert len(digests) == 1


def test_supersession_closes_the_old_fact_and_links_successor_to_predecessor(db):
    load(db, convs("nina-03", "nina-01", "nina-02"))
    rows = history(db, "user", "lives_in", namespace="nina").dicts()
    assert [(r["object"], r["valid_from"], r["valid_until"], r["until_inferred"]) for r in rows] == [
        ("Lyon", None, "2024-06", True),
        ("Oslo", "2024-06", "2025-03-01", True),
        ("Bergen", "2025-03-01", None, False),
    ]
    assert [r["superseded_at"] for r in rows] == ["2024-07-02T09:00:00Z", "2025-03-10T18:00:00Z", None]
    links = db.cypher(
        "MATCH (n:Statement)-[:SUPERSEDES]->(o:Statement)-[:ABOUT]->(p), (n)-[:ABOUT]->(q) RETURN q.name, p.name ORDER BY p.name",
        columns=("new", "old"),
    ).rows
    assert links == [("Oslo", "Lyon"), ("Bergen", "Oslo")]


def test_a_job_left_after_the_fact_ends_where_it_was_said_to(db):
    load(db, convs("dan-02", "dan-01"))
    works = [
        r for r in facts(db, "user", namespace="dan", valid_at="2026-02-15").dicts() if r["predicate"] == "works_at"
    ]
    # "I work at Acme" and "I left Acme in March" are one fact, until March, cited by the
    # first words said, with both pieces of evidence.
    assert [(r["object"], r["quote"], r["valid_until"], r["evidence"]) for r in works] == [
        ("Acme", "I work at Acme", "2026-03", 2)
    ]
    works = [
        r for r in facts(db, "user", namespace="dan", valid_at="2026-04-15").dicts() if r["predicate"] == "works_at"
    ]
    assert [r["object"] for r in works] == ["Globex"]
    rows = history(db, "user", "works_at", namespace="dan").dicts()
    acme_first = rows[0]
    assert (acme_first["object"], acme_first["valid_until"]) == ("Acme", "2026-03")


def test_a_negation_ends_the_fact_it_denies(db):
    load(db, convs("omar-01", "omar-02", "omar-03"))
    now = [r["object"] for r in facts(db, "user", namespace="omar").dicts() if r["predicate"] == "lives_in"]
    assert now == ["Berlin"]
    mid = [
        r["object"]
        for r in facts(db, "user", namespace="omar", valid_at="2026-11-01").dicts()
        if r["predicate"] == "lives_in"
    ]
    assert mid == ["Hamburg"]
    kinds = [(r["object"], r["kind"]) for r in history(db, "user", "lives_in", namespace="omar").dicts()]
    assert ("Hamburg", "ends") in kinds


def test_a_weekly_class_keeps_its_recurrence(db):
    load(db, convs("sofia-01", "sofia-02"))
    rows = {r["object"]: r["recurrence"] for r in facts(db, "user", namespace="sofia", valid_at="2026-04-01").dicts()}
    assert rows == {"pottery": "FREQ=WEEKLY;BYDAY=TU", "Spanish class": "FREQ=WEEKLY;BYDAY=MO,WE;BYHOUR=19"}
    # The class starts on 9 March: not valid before.
    early = {r["object"] for r in facts(db, "user", namespace="sofia", valid_at="2026-03-06").dicts()}
    assert early == {"pottery"}


def test_known_time_never_comes_from_the_clock(db):
    load(db, convs("nina-01"))
    first = digest(db)
    Loader(db, ONTO, force=True).load(convs("nina-01")[0])
    assert digest(db) == first
    props = db.cypher("MATCH (s:Statement) RETURN s.recorded_at").rows
    assert props == [("2024-01-15T10:00:00Z",)]


@pytest.mark.parametrize("via", VIAS)
def test_a_time_with_a_fraction_of_a_second_is_stored_to_the_second(db, via):
    """Data spells times with fractions (JavaScript always with milliseconds): the statement
    said at 10:00:00 and again at 10:00:00.5 was recorded at 10:00:00, and each message keeps
    its second, so text order stays time order in every comparison."""
    first = likes("js-1", "tea", "2024-05-01T10:00:00.000Z")
    again = likes("js-2", "tea", "2024-05-01T10:00:00.500Z")
    loader = Loader(db, ONTO, via=via)
    for c in (again, first):
        assert loader.load(c).status == "loaded"
    assert db.cypher("MATCH (s:Statement) RETURN s.recorded_at").rows == [("2024-05-01T10:00:00Z",)]
    ats = db.cypher("MATCH (m:Message) RETURN m.at ORDER BY m.at").rows
    assert ats == [("2024-05-01T10:00:00Z",), ("2024-05-01T10:00:00Z",)]
    for known in ("2024-05-01T10:00:00Z", "2024-05-01T10:00:00.250Z"):
        assert [r["value"] for r in facts(db, "user", namespace="test", known_at=known).dicts()] == ["tea"]
    assert facts(db, "user", namespace="test", known_at="2024-05-01T09:59:59.999Z").rows == []


def test_facts_command_json_has_the_contract_fields(cli_env, capsys):
    assert main(["load", str(EXAMPLES)]) == 0
    capsys.readouterr()
    assert main(["facts", "user", "--namespace", "nina", "--valid-at", "2024-10-01", "--format", "json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    for field in (
        "subject",
        "predicate",
        "value",
        "object",
        "valid_from",
        "valid_until",
        "recorded_at",
        "superseded_at",
        "quote",
        "conversation",
    ):
        assert field in row
    assert (row["object"], row["quote"], row["conversation"]) == ("Oslo", "We moved to Oslo in June", "nina-02")
    assert main(["facts", "nobody-at-all", "--all-namespaces"]) == 1
    assert "no entity 'nobody-at-all'" in capsys.readouterr().err


def test_bad_times_in_queries_are_explained(db):
    load(db, convs("nina-01"))
    with pytest.raises(QueryError, match="ISO-8601"):
        facts(db, "user", namespace="nina", valid_at="last tuesday")


@pytest.mark.parametrize("via", VIAS)
def test_moving_back_said_with_its_date_is_where_one_lives_now(db, via):
    """Lyon, then Oslo, then back to Lyon: the return is a statement of its own when it says
    when (the prompt asks the model for the message's date at least), so Lyon is current again
    and Oslo's time is closed on both sides."""
    from ..helpers import claim, conversation, place, user_turn

    def said(cid, text, at, quote, **kw):
        ents = [place("e1", "Oslo" if "Oslo" in text else "Lyon")]
        return conversation(
            cid, [user_turn(text, at, entities=ents, statements=[claim("user", "lives_in", quote, obj="e1", **kw)])]
        )

    convs_ = [
        said("a", "I live in Lyon.", "2024-01-15T10:00:00Z", "I live in Lyon"),
        said(
            "b", "We moved to Oslo in June.", "2024-07-02T09:00:00Z", "We moved to Oslo in June", valid_from="2024-06"
        ),
        said("c", "I moved back to Lyon.", "2025-05-10T09:00:00Z", "I moved back to Lyon", valid_from="2025-05-10"),
    ]
    loader = Loader(db, ONTO, via=via)
    for c in reversed(convs_):
        assert loader.load(c).status == "loaded"
    assert cities(facts(db, "user", namespace="test")) == ["Lyon"]
    assert cities(facts(db, "user", namespace="test", valid_at="2024-12-01")) == ["Oslo"]
    assert cities(facts(db, "user", namespace="test", valid_at="2024-03-01")) == ["Lyon"]
