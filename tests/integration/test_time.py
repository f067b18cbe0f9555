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

from ..helpers import EXAMPLES, ONTO, VIAS


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


def test_the_graph_holds_the_reading_and_no_statement_contradicts_it(db):
    """The moving-house story loaded out of order: the fact versions known now are Lyon until
    June, Oslo until March, Bergen since (with when each was learned and when what ended it
    was); the statements keep only the times they gave themselves, and nothing records a
    write-time succession."""
    load(db, convs("nina-03", "nina-01", "nina-02"))
    rows = db.cypher(
        "MATCH (u:Person)-[:HOLDS]->(f:Fact)-[:OBJECT]->(p) WHERE u.namespace = 'nina' AND f.known_until IS NULL "
        "RETURN p.name, f.valid_from, f.valid_until, f.superseded_at ORDER BY f.recorded_at",
        columns=("place", "from", "until", "superseded"),
    ).rows
    assert rows == [
        ("Lyon", None, "2024-06", "2024-07-02T09:00:00Z"),
        ("Oslo", "2024-06", "2025-03-01", "2025-03-10T18:00:00Z"),
        ("Bergen", "2025-03-01", None, None),
    ]
    said = history(db, "user", "lives_in", namespace="nina").dicts()
    assert [(r["object"], r["valid_from"], r["valid_until"]) for r in said] == [
        ("Lyon", None, None),
        ("Oslo", "2024-06", None),
        ("Bergen", "2025-03-01", None),
    ]
    props = db.cypher("MATCH (s:Statement) RETURN keys(s)", columns=("keys",)).rows
    assert not {"valid_until_inferred", "superseded_at", "valid_start"} & {k for (ks,) in props for k in ks}
    labels = {
        name
        for (name,) in db.execute(
            "SELECT l.name FROM ag_catalog.ag_label l JOIN ag_catalog.ag_graph g ON g.graphid = l.graph WHERE g.name = %s",
            (db.graph,),
        )
    }
    assert "SUPERSEDES" not in labels


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
