"""The command line is the library: `agefacts facts` and `history` print the rows of what
``Memory.facts`` and ``Memory.history`` return (``MemoryFact.row``, ``HistoryEntry.row``),
and those are the rows the reads give, text for text; a typed result made from a row gives
the row back."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agefacts.cli import main
from agefacts.corpus import generate
from agefacts.db import Database
from agefacts.load import Loader
from agefacts.memory import Memory
from agefacts.models import Conversation
from agefacts.named import named_queries
from agefacts.reads import facts, history
from agefacts.results import HistoryEntry, MemoryFact
from agefacts.timeline import FACT_COLUMNS

from ..helpers import ONTO, VIAS, fresh, fuzz


def _printed(capsys, *argv: str) -> list[dict]:
    assert main([*argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("via", VIAS)
@fuzz(3)
@given(seed=st.integers(0, 10_000), people=st.integers(2, 3), data=st.data())
def test_the_command_line_prints_what_the_memory_returns_on_generated_people(
    dsn, graph_name, cli_env, capsys, via, seed, people, data
):
    db = fresh(Database(dsn, graph_name).connect())
    try:
        convs = [Conversation.model_validate(c) for c in generate(people * 20 * 3, 3, seed=seed)]
        assert {o.status for o in Loader(db, ONTO, via=via).load_many((c.id, c) for c in convs)} == {"loaded"}
        said = sorted({r[0] for r in db.cypher("MATCH (s:Statement) RETURN s.recorded_at", None, ["t"]).rows})
        valid = sorted({r[0] for r in db.cypher("MATCH (s:Statement) RETURN s.valid_from", None, ["t"]).rows if r[0]})
        predicates = sorted({r[0] for r in db.cypher("MATCH (s:Statement) RETURN s.predicate", None, ["p"]).rows})
        namespace = data.draw(st.sampled_from(sorted({c.namespace for c in convs})), label="namespace")
        known_at = data.draw(st.sampled_from([*said, None]), label="known_at")
        valid_at = data.draw(st.sampled_from([*valid, None]), label="valid_at")
        when = [*(["--known-at", known_at] if known_at else []), *(["--valid-at", valid_at] if valid_at else [])]

        with Memory(database=Database(dsn, graph_name, create=False)) as memory:
            assert memory.facts("user", all_namespaces=True)  # something to compare
            for ns, across in ((namespace, False), (None, True)):
                rows = facts(db, "user", namespace=ns, all_namespaces=across, valid_at=valid_at, known_at=known_at)
                assert rows.columns == list(FACT_COLUMNS)
                got = memory.facts("user", namespace=ns, all_namespaces=across, valid_at=valid_at, known_at=known_at)
                assert [f.row() for f in got] == rows.dicts()
                assert [MemoryFact.from_row(r) for r in rows.dicts()] == got
                where = ["--namespace", ns] if ns else ["--all-namespaces"]
                assert _printed(capsys, "facts", "user", *where, *when) == json.loads(json.dumps(rows.dicts()))
            for predicate in predicates:
                rows = history(db, "user", predicate, all_namespaces=True, ontology=ONTO)
                assert rows.columns == named_queries()["history"].columns
                got_history = memory.history("user", predicate, all_namespaces=True)
                assert [e.row() for e in got_history] == rows.dicts()
                assert [HistoryEntry.from_row(r) for r in rows.dicts()] == got_history
                # Whose each statement is: a history of every namespace has several.
                assert {e.namespace for e in got_history} == {r["namespace"] for r in rows.dicts()}
                printed = _printed(capsys, "history", "user", predicate, "--all-namespaces")
                assert printed == json.loads(json.dumps(rows.dicts()))
    finally:
        db.drop_graph()


def test_a_memory_that_only_reads_makes_no_graph(dsn, graph_name):
    """``create=False``: a graph that does not exist is an error naming it, as a command that
    reads says, and none is made (a memory that writes, create=True by default, makes the graph
    it is given, a mistyped name too)."""
    import asyncio

    from agefacts.errors import AgeFactsError
    from agefacts.memory import AsyncMemory

    missing = graph_name + "_never"
    with pytest.raises(AgeFactsError, match=f"graph '{missing}' does not exist"):
        Memory(dsn, missing, create=False)

    async def opened() -> None:
        async with AsyncMemory(dsn, missing, create=False):
            pass

    with pytest.raises(AgeFactsError, match=f"graph '{missing}' does not exist"):
        asyncio.run(opened())
    with Database(dsn, graph_name) as db:
        assert not db.execute("SELECT 1 FROM ag_catalog.ag_graph WHERE name = %s", (missing,))
