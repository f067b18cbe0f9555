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
from agefacts.plans import STALE_GRAPH, Named, Nearest, Plan, drive
from agefacts.reads import facts_plan, find_entities_plan, history_plan

ENTITY_COLUMNS = named_queries()["entities"].columns
FACT_ROW_COLUMNS = named_queries()["facts_about"].columns


class FakeStore:
    """Answers a plan's needs from rows given by query name, and keeps what was asked."""

    def __init__(self, rows: dict[str, list[dict[str, Any]]], stale: str | None = None, nearest: list[str] = ()):
        self.rows = rows
        self.stale = stale
        self.nearest = list(nearest)
        self.asked: list[Any] = []

    def answer(self, need: Any) -> Any:
        self.asked.append(need)
        if need is STALE_GRAPH:
            return self.stale
        if isinstance(need, Nearest):
            return self.nearest
        assert isinstance(need, Named), need
        columns = named_queries()[need.name].columns
        return Table(columns, [tuple(r.get(c) for c in columns) for r in self.rows.get(need.name, [])])

    def run(self, plan: Plan[Any]) -> Any:
        return drive(plan, self.answer)

    def names(self) -> list[str]:
        return [
            n.name if isinstance(n, Named) else "nearest" if isinstance(n, Nearest) else "stale?" for n in self.asked
        ]


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
    table = store.run(facts_plan("ent:tom", None, False, None, None))
    assert store.names() == ["facts_about"]
    assert [(r["subject_key"], r["predicate"], r["evidence"]) for r in table.dicts()] == [("ent:tom", "works_at", 1)]


def test_a_key_without_facts_is_looked_up_to_say_whether_it_exists():
    store = FakeStore({"entity_by_key": []})
    with pytest.raises(NotFound, match="no entity 'ent:nobody'"):
        store.run(facts_plan("ent:nobody", None, False, None, None))
    assert store.names() == ["facts_about", "entity_by_key", "entities", "stale?"]


def test_nothing_found_in_a_graph_an_earlier_agefacts_wrote_says_to_migrate():
    store = FakeStore({}, stale="facts")
    with pytest.raises(UsageError, match="agefacts migrate --graph facts"):
        store.run(facts_plan("Tom", None, False, None, None))
    assert store.names() == ["entities", "stale?"]


def test_a_name_in_two_namespaces_needs_one_named_and_reads_nothing_more():
    store = FakeStore({"entities": [entity("ent:t1", "ann", "Tom"), entity("ent:t2", "bo", "Tom")]})
    with pytest.raises(QueryError, match="2 namespaces"):
        store.run(facts_plan("Tom", None, False, None, None))
    assert store.names() == ["entities"]


def test_a_role_finds_the_entity_mentioned_with_it():
    partner = entity("ent:alex", "ann", "Alex") | {"attrs": {"rel": "partner_of:user"}}
    store = FakeStore({"entities": [], "entity_names": [partner]})
    assert [e["key"] for e in store.run(find_entities_plan("my partner", "ann"))] == ["ent:alex"]


def test_history_of_several_entities_is_one_query_that_keeps_each_ones_rows_together_in_order():
    # "Tom" of two namespaces (--all-namespaces): one round trip, not one per entity; the rows
    # come back in the history order across both, and are given back entity by entity, as
    # one query per entity gave them.
    rows = {
        "entities": [entity("ent:t1", "ann", "Tom"), entity("ent:t2", "bob", "Tom")],
        "history_each": [
            {"value": "Acme", "entity": "ent:t2"},
            {"value": "Initech", "entity": "ent:t1"},
            {"value": "Globex", "entity": "ent:t2"},
        ],
    }
    store = FakeStore(rows)
    table = store.run(history_plan("Tom", "works_at", None, True, None))
    assert store.names() == ["entities", "history_each"]
    assert store.asked[1].params == {"entities": ["ent:t1", "ent:t2"], "predicate": "works_at"}
    assert table.columns == named_queries()["history"].columns
    assert [r["value"] for r in table.dicts()] == ["Initech", "Acme", "Globex"]


def test_history_of_one_entity_is_its_own_query():
    store = FakeStore({"entities": [entity("ent:t1", "ann", "Tom")], "history": [{"value": "Acme"}]})
    table = store.run(history_plan("Tom", "works_at", "ann", False, None))
    assert store.names() == ["entities", "history"]
    assert store.asked[1].params == {"entity": "ent:t1", "predicate": "works_at"}
    assert [r["value"] for r in table.dicts()] == ["Acme"]


@given(
    st.lists(st.sampled_from(["2023-01-01T00:00:00Z", "2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z"]), max_size=4),
    st.sampled_from(["2022-06-01T00:00:00Z", "2024-01-01T00:00:00Z", "2030-01-01T00:00:00Z"]),
)
def test_a_facts_evidence_counts_what_was_said_by_the_known_time(said_at, known_at):
    store = FakeStore({"facts_about": [fact("ent:tom", "ann", "f1", said_at)]})
    (row,) = store.run(facts_plan("ent:tom", None, False, None, known_at)).dicts()
    assert row["evidence"] == sum(1 for t in said_at if t <= known_at)
    assert store.asked[0].params["known_at"] == known_at


# -- ask -------------------------------------------------------------------------------------------
def said(message: int, text: str, *, evidence: bool) -> dict[str, Any]:
    return {
        "namespace": "ann",
        "conversation": "c1",
        "message": message,
        "speaker": "user",
        "at": "2024-05-01T10:00:00Z",
        "message_text": text,
        "score": 1.0,
        "words": ["fado"],
        "evidence": evidence,
    }


def asking(question: str, **kw: Any) -> Plan[Any]:
    from agefacts.ontology import default_ontology
    from agefacts.retrieve import ask_plan

    args = {"namespace": "ann", "all_namespaces": False, "k": 10, "valid_at": None, "known_at": None}
    args |= {"by_meaning": False} | kw
    return ask_plan(question, default_ontology(), **args)


def test_an_ask_whose_messages_are_no_statements_evidence_asks_nothing_taken_back():
    store = FakeStore({"search_messages": [said(0, "I love fado.", evidence=False)]})
    answer = store.run(asking("Who loves fado?"))
    assert store.names() == ["entity_names", "search_messages"]
    assert [m["message"] for m in answer.messages] == [0]


def test_an_ask_whose_messages_may_be_evidence_asks_what_of_them_was_taken_back():
    store = FakeStore({"search_messages": [said(0, "I love fado.", evidence=True)]})
    store.run(asking("Who loves fado?"))
    assert store.names() == ["entity_names", "search_messages", "message_withdrawals"]
    assert store.asked[-1].params["keys"], "the withdrawals of the message found are asked for"


def test_an_ask_that_finds_nothing_asks_why_and_says_it():
    store = FakeStore({"question_words": [{"searched": ["fado"], "names": [], "messages": 3}]})
    answer = store.run(asking("Who loves fado?"))
    assert store.names() == ["entity_names", "search_messages", "question_words"]
    assert answer.messages == [] and answer.reason


def test_an_ask_by_meaning_asks_for_the_nearest_messages_and_then_their_text():
    message = {k: v for k, v in said(4, "", evidence=True).items() if k in named_queries()["messages"].columns}
    rows = {
        "messages": [message | {"text": "Fado nights at the Alfama."}],
        "question_words": [{"searched": ["fado"], "names": [], "messages": 3}],
    }
    store = FakeStore(rows, nearest=["msg:4"])
    store.run(asking("Who loves fado?", by_meaning=True))
    assert store.names()[:4] == ["entity_names", "search_messages", "nearest", "messages"]
    nearest, then = store.asked[2], store.asked[3]
    assert (nearest.namespace, nearest.question, nearest.n) == ("ann", "Who loves fado?", 20)
    assert then.params == {"keys": ["msg:4"]}


def test_a_plan_that_searches_by_meaning_needs_an_embedder():
    from agefacts.plans import run_plan

    class NoDatabase:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"the database was asked {name}")

    def plan() -> Plan[Any]:
        return (yield Nearest("ann", "fado", 5))

    with pytest.raises(UsageError, match="give it an embedder"):
        run_plan(NoDatabase(), plan())  # type: ignore[arg-type]


# -- a read of every namespace over a placement's servers -----------------------------------------
def everywhere_by_hand(read: Any, servers: list[tuple[FakeStore, dict[str, tuple[str, str]]]]) -> Any:
    """What :func:`agefacts.placed.run_everywhere` does, each server a fake store: a server
    that holds nothing of what is asked is passed over, as the router passes it."""
    from agefacts.ontology import default_ontology

    def on_every_server(step: Any) -> list[tuple[Any, dict[str, tuple[str, str]]]]:
        got = []
        for store, notes in servers:
            try:
                got.append((store.run(step.plan(default_ontology(), False)), notes))
            except NotFound:
                continue
        return got

    return drive(read, on_every_server)


@given(
    st.dictionaries(
        st.sampled_from(["ann", "bo", "cy", "di"]),
        st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from([None, "a", "b", "c"])),
        min_size=1,
    )
)
def test_facts_of_every_namespace_take_each_from_its_server_once_in_one_server_s_order(placed):
    """Each namespace lives on one server; some left a copy on another, which notes it moved.
    The merged rows are each namespace's from where it lives, once, ordered as one server
    orders them."""
    from agefacts.placed import facts_everywhere
    from agefacts.timeline import fact_order

    servers = []
    for name in ("a", "b", "c"):
        held = {ns: "home" for ns, (home, _) in placed.items() if home == name}
        held |= {ns: "left" for ns, (home, left) in placed.items() if left == name and home != name}
        said = [
            fact(f"ent:tom-{ns}", ns, f"f-{ns}", ["2024-01-01T00:00:00Z"]) | {"quote": f"{ns} {how}"}
            for ns, how in sorted(held.items())
        ]
        rows = {
            "entities": [entity(f"ent:tom-{ns}", ns, "Tom") for ns in sorted(held)],
            "facts_about": said,  # one entity found
            "facts_about_each": [r | {"entity": r["subject_key"]} for r in said],  # several
        }
        notes = {ns: (placed[ns][0], "moved") for ns, how in held.items() if how == "left"}
        servers.append((FakeStore(rows), notes))
    table = everywhere_by_hand(facts_everywhere("Tom", None, None), servers)
    rows = table.dicts()
    assert sorted(r["quote"] for r in rows) == sorted(f"{ns} home" for ns in placed)
    assert rows == sorted(rows, key=fact_order)
    assert all(len(store.asked) == 2 for store, _ in servers if store.rows["entities"]), "one look-up, one read"


@pytest.mark.parametrize(("question", "k"), [(None, 5), ("fado " * 100_000, 5), ("Who loves fado?", 0)])
def test_an_ask_of_every_namespace_refuses_a_bad_question_before_any_server_is_asked(question, k):
    from agefacts.ontology import default_ontology
    from agefacts.placed import ask_everywhere

    with pytest.raises(UsageError):
        next(ask_everywhere(question, default_ontology(), k, None, None))


def test_an_ask_of_every_namespace_searches_each_server_with_every_server_s_counts_added():
    """Each server ranks its matches by how rare a word is among all servers' messages, as
    one server holding them all would."""
    import json

    from agefacts.ontology import default_ontology
    from agefacts.placed import ask_everywhere

    counts = [{"total": 3, "named": {"ann": 1}, "df": {"fado": 1}}, {"total": 5, "named": {}, "df": {"fado": 2}}]
    why = {"question_words": [{"searched": ["fado"], "names": [], "messages": 8}]}
    servers = [
        (
            FakeStore(
                {"search_scope": [{"scope": c}], "search_messages": [said(n, "I love fado.", evidence=False)]} | why
            ),
            {},
        )
        for n, c in enumerate(counts)
    ]
    answer = everywhere_by_hand(ask_everywhere("Who loves fado?", default_ontology(), 5, None, None), servers)
    for store, _ in servers:
        assert store.names()[0] == "search_scope"
        (search,) = [n for n in store.asked if isinstance(n, Named) and n.name == "search_messages"]
        assert json.loads(search.params["scope"]) == {"total": 8.0, "named": {"ann": 1.0}, "df": {"fado": 3.0}}
    assert sorted(m["message"] for m in answer.messages) == [0, 1]
