"""A read's plan, answered by hand: which queries a read asks, in which order, and what it
makes of the rows, with no database. The same plans run on both kinds of connection in the
integration tests; here each rule between two round trips is pinned on its own."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agefacts.db import Table
from agefacts.errors import NotFound, QueryError, UsageError
from agefacts.named import named_queries
from agefacts.plans import STALE_GRAPH, Named, Plan
from agefacts.reads import _facts, _find_entities, _history

ENTITY_COLUMNS = named_queries()["entities"].columns
FACT_ROW_COLUMNS = named_queries()["facts_about"].columns


class FakeStore:
    """Answers a plan's needs from rows given by query name, and keeps what was asked."""

    def __init__(self, rows: dict[str, list[dict[str, Any]]], stale: str | None = None):
        self.rows = rows
        self.stale = stale
        self.asked: list[Any] = []

    def answer(self, need: Any) -> Any:
        self.asked.append(need)
        if need is STALE_GRAPH:
            return self.stale
        assert isinstance(need, Named), need
        columns = named_queries()[need.name].columns
        return Table(columns, [tuple(r.get(c) for c in columns) for r in self.rows.get(need.name, [])])

    def run(self, plan: Plan[Any]) -> Any:
        answer: Any = None
        while True:
            try:
                need = plan.send(answer)
            except StopIteration as done:
                return done.value
            answer = self.answer(need)

    def names(self) -> list[str]:
        return [n.name if isinstance(n, Named) else "stale?" for n in self.asked]


def entity(key: str, namespace: str, name: str) -> dict[str, Any]:
    return {"key": key, "namespace": namespace, "type": "Person", "name": name, "mentions": [name]}


def fact(subject_key: str, namespace: str, fact_key: str, said_at: list[str]) -> dict[str, Any]:
    return {
        "subject": "Tom",
        "predicate": "works_at",
        "object": "Acme",
        "namespace": namespace,
        "subject_key": subject_key,
        "object_key": "ent:acme",
        "fact": fact_key,
        "said_at": said_at,
        "recorded_at": "2024-01-01T00:00:00Z",
        "quote": "Tom works at Acme",
    }


def test_a_key_with_facts_is_answered_by_one_query():
    store = FakeStore({"facts_about": [fact("ent:tom", "ann", "f1", ["2024-01-01T00:00:00Z"])]})
    table = store.run(_facts("ent:tom", None, False, None, None))
    assert store.names() == ["facts_about"]
    assert [(r["subject_key"], r["predicate"], r["evidence"]) for r in table.dicts()] == [("ent:tom", "works_at", 1)]


def test_a_key_without_facts_is_looked_up_to_say_whether_it_exists():
    store = FakeStore({"entity_by_key": []})
    with pytest.raises(NotFound, match="no entity 'ent:nobody'"):
        store.run(_facts("ent:nobody", None, False, None, None))
    assert store.names() == ["facts_about", "entity_by_key", "entities", "stale?"]


def test_nothing_found_in_a_graph_an_earlier_agefacts_wrote_says_to_migrate():
    store = FakeStore({}, stale="facts")
    with pytest.raises(UsageError, match="agefacts migrate --graph facts"):
        store.run(_facts("Tom", None, False, None, None))
    assert store.names() == ["entities", "stale?"]


def test_a_name_in_two_namespaces_needs_one_named_and_reads_nothing_more():
    store = FakeStore({"entities": [entity("ent:t1", "ann", "Tom"), entity("ent:t2", "bo", "Tom")]})
    with pytest.raises(QueryError, match="2 namespaces"):
        store.run(_facts("Tom", None, False, None, None))
    assert store.names() == ["entities"]


def test_a_role_finds_the_entity_mentioned_with_it():
    partner = entity("ent:alex", "ann", "Alex") | {"attrs": {"rel": "partner_of:user"}}
    store = FakeStore({"entities": [], "entity_names": [partner]})
    assert [e["key"] for e in store.run(_find_entities("my partner", "ann"))] == ["ent:alex"]


def test_history_asks_each_entity_found_and_keeps_their_rows_in_order():
    rows = {
        "entities": [entity("ent:t1", "ann", "Tom"), entity("ent:t2", "ann", "Tom")],
        "history": [{"value": "Acme"}],
    }
    store = FakeStore(rows)
    table = store.run(_history("Tom", "works_at", "ann", False, None))
    assert store.names() == ["entities", "history", "history"]
    assert [n.params["entity"] for n in store.asked[1:]] == ["ent:t1", "ent:t2"]
    assert len(table.rows) == 2


@given(
    st.lists(st.sampled_from(["2023-01-01T00:00:00Z", "2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z"]), max_size=4),
    st.sampled_from(["2022-06-01T00:00:00Z", "2024-01-01T00:00:00Z", "2030-01-01T00:00:00Z"]),
)
def test_a_facts_evidence_counts_what_was_said_by_the_known_time(said_at, known_at):
    store = FakeStore({"facts_about": [fact("ent:tom", "ann", "f1", said_at)]})
    (row,) = store.run(_facts("ent:tom", None, False, None, known_at)).dicts()
    assert row["evidence"] == sum(1 for t in said_at if t <= known_at)
    assert store.asked[0].params["known_at"] == known_at
