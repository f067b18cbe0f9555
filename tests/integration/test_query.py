"""Querying: typed rows, named queries, retrieval with citations, and the picture."""

from __future__ import annotations

import json
import shutil
import subprocess
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from psycopg import sql

from agefacts.agtype import Edge, Vertex, decode
from agefacts.agtype import Path as AgPath
from agefacts.cli import main
from agefacts.db import Database, cypher_statement
from agefacts.keys import keyphrase_key, message_key
from agefacts.load import Loader, load_paths
from agefacts.named import named_queries, run_named
from agefacts.query import return_columns, run
from agefacts.reads import facts as query_facts
from agefacts.retrieve import ask, link

from ..helpers import EXAMPLES, ONTO, conversation, fresh, fuzz


@pytest.fixture
def loaded(db, examples, ontology):
    summary = load_paths(db, [examples], ontology)
    assert not summary.failed
    return db


def test_scalars_maps_and_lists_decode_to_python(db):
    row = run(
        db, "RETURN 1 AS i, 2.5 AS f, 'x' AS s, true AS b, null AS n, {a: [1, {b: 'c'}]} AS m, [1, 'two', null] AS l"
    ).dicts()[0]
    assert row == {"i": 1, "f": 2.5, "s": "x", "b": True, "n": None, "m": {"a": [1, {"b": "c"}]}, "l": [1, "two", None]}
    assert type(row["i"]) is int and type(row["f"]) is float


def test_graph_values_decode_to_vertices_edges_and_paths(db):
    db.cypher("CREATE (:Person {k: 'a', name: 'Ada'})-[:KNOWS {since: 2020}]->(:Person {k: 'b'})")
    row = run(db, "MATCH p = (a:Person)-[e:KNOWS]->(b) RETURN a, e, p, [a, b] AS both").dicts()[0]
    assert isinstance(row["a"], Vertex) and row["a"].label == "Person" and row["a"].properties["name"] == "Ada"
    assert isinstance(row["e"], Edge) and row["e"].start_id == row["a"].id
    assert isinstance(row["p"], AgPath) and len(row["p"].elements) == 3
    assert [v.properties["k"] for v in row["both"]] == ["a", "b"]


def test_agtype_text_decodes_escapes_and_numerics():
    assert decode(r'"a\"b\\c\nd\u00e9"') == 'a"b\\c\ndé'
    assert decode("1.5::numeric") == Decimal("1.5")
    v = decode(r'{"id": 1, "label": "P", "properties": {"t": "x\"$$"}}::vertex')
    assert v.properties == {"t": 'x"$$'}


def test_parameters_with_quotes_and_dollars_are_passed_not_interpolated(db):
    nasty = "it's \"$$\" $x$ \\ '); MATCH (n) DETACH DELETE n //"
    db.cypher("CREATE (:Person {k: 'p', name: $n})", {"n": nasty})
    assert run(db, "MATCH (p:Person) WHERE p.name = $n RETURN p.name AS name", {"n": nasty}).rows == [(nasty,)]


@pytest.mark.parametrize(
    "query, columns",
    [
        ("RETURN 1", ["1"]),
        ("MATCH (n) RETURN n.name AS name, count(n)", ["name", "count(n)"]),
        ("MATCH (n) RETURN DISTINCT n.k ORDER BY n.k LIMIT 3", ["n.k"]),
        ("MATCH (n) WITH n RETURN {a: 1, b: [n.k, 'x,y']} AS m, 'RETURN, x' AS s", ["m", "s"]),
        ("MATCH (n) RETURN n.k, n.k", ["n.k", "n.k_2"]),
        ("CREATE (:X)", []),
    ],
)
def test_result_columns_are_read_from_the_return_clause(query, columns):
    assert return_columns(query) == columns


def test_query_formats(cli_env, capsys):
    assert main(["query", "RETURN 'a,b' AS x, 2 AS y", "--format", "csv"]) == 0
    assert capsys.readouterr().out == 'x,y\n"a,b",2\n'
    assert main(["query", "UNWIND [1, 2] AS n RETURN n", "--format", "jsonl"]) == 0
    assert capsys.readouterr().out == '{"n": 1}\n{"n": 2}\n'
    assert main(["query", "RETURN 1 AS a", "--columns", "one"]) == 0
    assert capsys.readouterr().out.splitlines()[0].strip() == "one"


def test_every_named_query_runs_on_the_examples_and_returns_what_it_says(loaded, capsys):
    db = loaded
    user_ann = run_named(db, "entities", {"text": "user", "namespace": "ann"}).dicts()
    assert len(user_ann) == 1 and user_ann[0]["name"] == "user"
    tom = run_named(db, "entities", {"text": "my husband", "namespace": "ann"}).dicts()
    assert [e["name"] for e in tom] == ["Tom"]
    nina = run_named(db, "entities", {"text": "user", "namespace": "nina"}).dicts()[0]["key"]
    said = run_named(db, "fact_statements", {"entity": nina, "known_at": "2030-01-01T00:00:00Z"}).dicts()
    assert sorted(f["object"] for f in said) == ["Bergen", "Lyon", "Oslo"]
    assert all(f["single_valued"] and len(f["said_at"]) == f["evidence"] for f in said)
    hist = run_named(db, "history", {"entity": nina, "predicate": "lives_in"}).dicts()
    assert [h["object"] for h in hist] == ["Lyon", "Oslo", "Bergen"]
    spans = run_named(db, "message_statements", {"conversation": "ann-01", "ordinal": 0, "namespace": "ann"}).dicts()
    assert [(s["quote"], s["char_start"]) for s in spans] == [("My husband", 0), ("starts at Acme on Monday", 11)]
    holes = run_named(db, "placeholders", {"namespace": "tess"}).dicts()
    assert sorted(h["mentions"][0] for h in holes) == ["a friend from work", "her wedding"]
    questions = run_named(db, "questions", {}).dicts()
    assert {(q["namespace"], q["gap"]) for q in questions} == {
        ("tess", "e1.name"),
        ("tess", "e2.valid_from"),
        ("lukas", "e4.name"),
    }
    assert questions[0]["priority"] == "immediate"
    rejections = {r["reason"]: r["claims"] for r in run_named(db, "rejections", {}).dicts()}
    # "I'm not allergic to peanuts" (mei-01) is a negation now, stored; it ends nothing.
    assert rejections["polarity"] == 4 and rejections["not_in_message"] == 1
    assert [f["object"] for f in query_facts(db, nina, valid_at="2024-10-01").dicts()] == ["Oslo"]


def test_query_list_and_name_from_the_command_line(cli_env, capsys):
    assert main(["load", str(EXAMPLES)]) == 0
    capsys.readouterr()
    assert main(["query", "--list"]) == 0
    listing = capsys.readouterr().out
    for name in named_queries():
        assert name in listing
    assert main(["query", "--name", "placeholders", "--param", "namespace=lukas", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["mentions"] == ["my boss"]
    assert main(["query", "--name", "nope"]) == 1
    assert main(["query", "--name", "fact_statements", "--param", "bogus=1"]) == 1
    assert "takes no parameter bogus" in capsys.readouterr().err


# -- retrieval ------------------------------------------------------------------------------------
def _plant_places(db, *names):
    db.ensure_labels(vertex=["Place"])
    for i, name in enumerate(names):
        db.cypher(
            "CREATE (:Place {k: $k, namespace: 'geo', type: 'Place', name: $n, mentions: [$n]})",
            {"k": f"p{i}", "n": name},
        )


def test_longest_name_links_first_and_claims_its_words(db):
    _plant_places(db, "York", "New York City", "New York")
    linked = link(db, "Is New York City bigger than York?")
    assert [e.name for e in linked] == ["New York City", "York"]
    assert [e.name for e in link(db, "I love new york city")] == ["New York City"]


def test_a_question_naming_nobody_returns_nothing(loaded):
    answer = ask(loaded, "What should we cook tonight?", ONTO, all_namespaces=True)
    assert answer.entities == [] and answer.facts == [] and answer.rejected == []
    assert answer.reason == "no message says 'cook' or 'tonight' and it names no known entity"
    assert answer.context() == "(no facts: no message says 'cook' or 'tonight' and it names no known entity)"
    # "I" across every namespace is every namespace's owner, as `facts user` is.
    owners = ask(loaded, "Where do I live?", ONTO, all_namespaces=True).entities
    assert {e.name for e in owners} == {"user"} and len({e.namespace for e in owners}) == len(owners) > 1


def test_facts_come_with_quotes_and_sources(loaded):
    answer = ask(loaded, "When is my husband's birthday?", ONTO, namespace="ann")
    assert [e.name for e in answer.entities] == ["Tom"]
    birthday = [f for f in answer.facts if f["predicate"] == "birthday"]
    assert birthday[0]["value"] == "--03-14" and birthday[0]["quote"] == "Tom's birthday is 14 March"
    assert birthday[0]["conversation"] == "ann-04" and birthday[0]["message"] == 0


def test_a_type_violating_fact_planted_in_the_graph_is_not_served(loaded):
    db = loaded
    # Written behind the gate's back: Kyoto (a Place) as someone's employer.
    db.cypher(
        "MATCH (u:Person {role: 'user', namespace: 'hana'}), (p:Place {name: 'Kyoto'}), (m:Message {conversation: 'hana-01'}) "
        "CREATE (u)-[:SUBJECT_OF {k: 'x1'}]->(:Statement {k: 'planted', namespace: 'hana', predicate: 'works_at', recorded_at: '2026-10-20T09:00:00Z'})"
        "-[:ABOUT {k: 'x2'}]->(p), (u)-[:SUBJECT_OF {k: 'x3'}]->(:Statement {k: 'planted2', namespace: 'hana', predicate: 'owns_castle', value: 'yes', recorded_at: '2026-10-20T09:00:00Z'})"
    )
    db.cypher(
        "MATCH (s:Statement), (m:Message {conversation: 'hana-01'}) WHERE s.k IN ['planted', 'planted2'] "
        "CREATE (s)-[:EVIDENCED_BY {k: s.k + 'e', quote: 'Kyoto', at: '2026-10-20T09:00:00Z'}]->(m)"
    )
    # Reads serve fact versions: what was written by hand is read once they are derived.
    assert [f["predicate"] for f in ask(db, "Tell me about Kyoto", ONTO, namespace="hana").facts] == ["lives_in"]
    Loader(db, ONTO).derive("hana")
    answer = ask(db, "Tell me about Kyoto", ONTO, namespace="hana")
    assert [f["predicate"] for f in answer.facts] == ["lives_in"]
    (bad,) = answer.rejected
    assert bad["statement"] == "planted" and "Organization" in bad["reason"]
    # Facts about the user are filtered the same way.
    assert main_ask_json(db, "Does Kyoto matter?")["rejected"][0]["statement"] == "planted"


def main_ask_json(db, question):
    from agefacts.retrieve import ask as ask_

    return ask_(db, question, ONTO, namespace="hana").to_json()


def test_ask_command(cli_env, capsys):
    assert main(["load", str(EXAMPLES)]) == 0
    capsys.readouterr()
    assert main(["ask", "Where does my sister live?", "--namespace", "jose", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [e["name"] for e in out["entities"]] == ["Begoña"]
    assert ("lives_in", "Logroño", "Begoña lives in Logroño") in [
        (f["predicate"], f["object"], f["quote"]) for f in out["facts"]
    ]
    assert main(["ask", "Nothing here", "--all-namespaces"]) == 0
    assert "names no known entity" in capsys.readouterr().out


# -- the picture ----------------------------------------------------------------------------------
def test_show_writes_a_page_that_chromium_renders(cli_env, tmp_path, capsys):
    chromium = shutil.which("chromium")
    assert chromium, "the picture test needs Debian's chromium (make test installs it)"
    assert main(["load", str(EXAMPLES)]) == 0
    page, svg, shot = tmp_path / "begona.html", tmp_path / "begona.svg", tmp_path / "shot.png"
    assert main(["show", "Begoña", "--namespace", "jose", "--out", str(page)]) == 0
    assert main(["show", "Begoña", "--namespace", "jose", "--out", str(svg)]) == 0
    assert svg.read_text().startswith("<svg") and "Logroño" in svg.read_text()
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    dom = subprocess.run([chromium, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert "<h1>Begoña</h1>" in dom.stdout
    assert "Begoña lives in Logroño" in dom.stdout  # the quote, in the tooltip and the list
    subprocess.run(
        [chromium, *flags, "--window-size=1100,700", f"--screenshot={shot}", page.as_uri()],
        capture_output=True,
        timeout=120,
    )
    assert shot.stat().st_size > 5_000


def test_show_refuses_other_file_types(cli_env, tmp_path, capsys):
    assert main(["load", str(EXAMPLES / "jose-01.json")]) == 0
    assert main(["show", "Begoña", "--out", str(tmp_path / "x.pdf")]) == 2


def test_history_over_every_namespace_is_each_entitys_history_in_turn(loaded):
    """One query for several entities gives what one query per entity gave, in order."""
    from agefacts.reads import history

    db = loaded
    keys = [e["key"] for e in run_named(db, "entities", {"text": "user", "namespace": None}).dicts()]
    assert len(keys) > 3
    for predicate in ("lives_in", "works_at", "likes"):
        each = [run_named(db, "history", {"entity": k, "predicate": predicate}).rows for k in keys]
        assert sum(1 for rows in each if rows) >= 2, predicate  # rows of several entities to keep apart
        table = history(db, "user", predicate, all_namespaces=True)
        assert table.columns == named_queries()["history"].columns
        assert table.rows == [r for rows in each for r in rows]


@fuzz(4)
@given(seed=st.integers(0, 10_000), people=st.integers(2, 5))
def test_history_over_every_namespace_is_each_entitys_history_in_turn_on_generated_people(
    dsn, graph_name, seed, people
):
    """The same, on generated people (each a namespace, twenty conversations each, their
    one-value facts said again and changed over time), for every predicate they have."""
    from agefacts.corpus import generate
    from agefacts.models import Conversation
    from agefacts.reads import history

    db = fresh(Database(dsn, graph_name).connect())
    try:
        convs = [Conversation.model_validate(c) for c in generate(people * 20 * 3, 3, seed=seed)]
        assert {o.status for o in Loader(db, ONTO).load_many((c.id, c) for c in convs)} == {"loaded"}
        keys = [e["key"] for e in run_named(db, "entities", {"text": "user", "namespace": None}).dicts()]
        assert len(keys) == people
        predicates = sorted(
            {r[0] for r in db.cypher("MATCH (s:Statement) RETURN DISTINCT s.predicate", None, ["p"]).rows}
        )
        assert predicates
        for predicate in predicates:
            each = [run_named(db, "history", {"entity": k, "predicate": predicate}).rows for k in keys]
            assert history(db, "user", predicate, all_namespaces=True).rows == [r for rows in each for r in rows]
    finally:
        db.drop_graph()


def test_every_shipped_query_states_its_parameters_and_columns_and_returns_them(loaded):
    db = loaded
    nina = run_named(db, "entities", {"text": "user", "namespace": "nina"}).dicts()[0]["key"]
    when = {"valid_at": "2024-10-01", "known_at": "2030-01-01T00:00:00Z"}
    said = [{"speaker": "user", "text": "I bake sourdough", "keyphrases": [{"mention": "sourdough", "score": 0.9}]}]
    Loader(db, ONTO).load(conversation("bread", said, namespace="baker"))
    # One call per shipped query: a query file added without a line here fails this test.
    samples = {
        "conversations": {"namespace": "nina"},
        "entities": {"text": "Tom", "namespace": "ann"},
        "entity_by_key": {"text": nina, "namespace": "nina"},
        "entities_of": {"namespace": "ann"},
        "entity_keys": {},
        "entity_names": {"namespace": "ann"},
        "fact_statements": {"entity": nina, "known_at": when["known_at"]},
        "facts_about": {"entity": nina, **when},
        "facts_about_each": {"entities": [nina], **when},
        "facts_in": {"namespace": "nina", **when},
        "graph_edges": {"namespace": "ann"},
        "graph_vertices": {"namespace": None},
        "history": {"entity": nina, "predicate": "lives_in"},
        "history_each": {"entities": [nina], "predicate": "lives_in"},
        "message_statements": {"conversation": "ann-01", "ordinal": 0, "namespace": "ann"},
        "messages": {"keys": [message_key("baker", "bread", 0)]},
        # Omar lived in Hamburg (omar-02), then said he does not any more (omar-03).
        "message_withdrawals": {"keys": [message_key("omar", "omar-02", 0)], "known_at": when["known_at"]},
        "placeholders": {"namespace": "tess"},
        "questions": {"namespace": None, "include_resolved": True},
        "question_words": {"namespace": "baker", "question": "Who bakes rye?"},
        "rejections": {"namespace": None},
        "search_messages": {
            "namespace": "baker",
            "question": "Who bakes sourdough?",
            "k": 5,
            "scope": None,
            "topics": ["sourdough"],
            "wording": ["bread", "loaf"],
        },
        "search_scope": {"namespace": "baker", "question": "Who bakes sourdough?", "wording": ["bread", "loaf"]},
        "time_messages": {
            "namespace": "ann",
            "question": "What did I say on 10 November 2026?",
            "starts": ["2026-11-10T00:00:00Z"],
            "ends": ["2026-11-11T00:00:00Z"],
            "k": 5,
        },
        "topic_messages": {"keys": [keyphrase_key("baker", "sourdough")]},
        "topic_messages_by_text": {"texts": ["sourdough"]},
    }
    queries = named_queries()
    assert sorted(samples) == sorted(queries)
    # What the reading of time reads, the statement query returns; what facts gives, the
    # fact version queries do.
    from agefacts.timeline import FACT_COLUMNS, STATEMENT_FIELDS

    assert set(STATEMENT_FIELDS) <= set(queries["fact_statements"].columns)
    for name in ("facts_about", "facts_about_each", "facts_in"):
        # evidence is counted from said_at, as known at the time asked
        assert set(FACT_COLUMNS) - {"evidence"} | {"said_at"} <= set(queries[name].columns), name
    for name, q in queries.items():
        assert q.description and q.columns, f"{name} has no description or columns line"
        assert sorted(samples[name]) == sorted(q.params), name
        table = run_named(db, name, samples[name])
        assert table.columns == q.columns, name
        if q.kind == "cypher":  # the header names what RETURN gives (run_named trusts it)
            assert return_columns(q.text) == q.columns, name
        assert table.rows, f"{name} found nothing on the examples"


def test_facts_by_key_answer_as_facts_by_name_do(loaded):
    """A key is read without looking the entity up first when it has facts; the look-up still
    decides an entity with no facts at that time (empty), a key of no entity, and a key of
    another namespace (both refused)."""
    from agefacts.errors import QueryError
    from agefacts.reads import facts

    db = loaded
    nina = run_named(db, "entities", {"text": "user", "namespace": "nina"}).dicts()[0]["key"]
    by_name = facts(db, "user", namespace="nina", valid_at="2024-10-01").dicts()
    assert by_name and facts(db, nina, valid_at="2024-10-01").dicts() == by_name
    assert facts(db, nina, namespace="nina", valid_at="2024-10-01").dicts() == by_name
    assert facts(db, nina, known_at="2000-01-01T00:00:00Z").dicts() == []  # nothing known yet
    for key, ns in ((nina, "ann"), ("ent:00000000000000000000000000000000", None)):
        with pytest.raises(QueryError, match="no entity"):
            facts(db, key, namespace=ns, valid_at="2024-10-01")


def test_queries_over_entities_read_only_entity_labels_and_answer_as_over_every_vertex(loaded):
    """A query whose header says it runs once per entity label answers what it answers
    written over every vertex (MATCH (n)), in its ORDER BY's order, without reading the
    statements and messages: finding an entity by name at 100k statements took 127 ms
    reading every vertex label and 4 ms reading the entity labels by namespace."""
    db = loaded
    db.ensure_labels(vertex=["Place", "Organization"])
    for i, (ns, name) in enumerate([("geo", "Zürich"), ("geo", "ankara"), ("ann", "Ångström Labs"), ("geo", "Évora")]):
        label = "Organization" if "Labs" in name else "Place"
        db.cypher(
            f"CREATE (:{label} {{k: $k, namespace: $ns, type: $t, name: $n, mentions: [$n]}})",
            {"k": f"ent:planted{i}", "ns": ns, "t": label, "n": name},
        )
    per_label = [q for q in named_queries().values() if q.per_entity_label]
    assert {q.name for q in per_label} >= {"entities", "entity_names", "placeholders", "entity_keys"}
    for text, ns in (("user", "nina"), ("user", None), ("Zürich", "geo"), ("Tom", None), ("oslo", None)):
        for q in per_label:
            params = {p: v for p, v in (("text", text), ("namespace", ns)) if p in q.params}
            got = run_named(db, q.name, params)
            whole = run(db, q.text, params, q.columns)
            assert got.columns == whole.columns
            if "ORDER BY" in q.text:
                assert got.rows == whole.rows, (q.name, text, ns)
            else:
                assert sorted(map(repr, got.rows)) == sorted(map(repr, whole.rows)), (q.name, text, ns)
    assert run_named(db, "entities", {"text": "Évora", "namespace": "geo"}).dicts()[0]["key"] == "ent:planted3"


def test_a_graph_without_entities_finds_none(db):
    db.ensure_graph()
    assert run_named(db, "entities", {"text": "user", "namespace": None}).rows == []
    db.ensure_labels(vertex=["Message", "Statement"])
    assert run_named(db, "entity_names", {"namespace": None}).rows == []


def test_entity_labels_are_indexed_by_namespace(db):
    db.ensure_labels(vertex=["Person", "Statement", "Message"])
    indexed = {
        table
        for (table,) in db.execute(
            "SELECT tablename FROM pg_indexes WHERE schemaname = %s AND indexdef LIKE %s",
            (db.graph, '%"namespace"%'),
        )
    }
    assert indexed == {"Person"}


def test_a_message_s_statements_are_found_through_its_key_index(loaded):
    """``message_statements`` finds its message by key (computed from the namespace, the
    conversation and the ordinal), not by a property map, which no index serves: it read every
    message. With sequential scans priced out, the message is looked up by an index condition,
    not read through a whole index with a filter."""
    from agefacts.named import bind_named

    db = loaded
    q, values = bind_named("message_statements", {"conversation": "ann-01", "ordinal": 0, "namespace": "ann"})
    stmt = cypher_statement(db.graph, q.text, [f"c{i}" for i in range(len(q.columns))], with_params=True)
    with db.transaction():
        db.execute("SET LOCAL enable_seqscan = off")
        plan = "\n".join(r[0] for r in db.execute(sql.SQL("EXPLAIN ") + stmt, (json.dumps(values),)))
    lines = plan.splitlines()
    (at,) = [i for i, line in enumerate(lines) if 'on "Message" m' in line]
    assert "Index Cond" in lines[at + 1] and "@>" not in plan, plan
    # A message that is not there has no statements, and a missing part of its key finds none.
    assert run_named(db, "message_statements", {"conversation": "ann-01", "ordinal": 99, "namespace": "ann"}).rows == []
    assert run_named(db, "message_statements", {"conversation": "ann-01", "ordinal": 0, "namespace": "nina"}).rows == []


def test_facts_of_many_entities_read_in_one_query_are_each_ones_own_facts(loaded):
    """Over every namespace, the facts of "user" were read one query per namespace (14 s for a
    name in 1,251 namespaces where one query takes 0.8 s); read in one, they are the union
    of each namespace's own."""
    from agefacts.reads import facts, facts_of_each

    db = loaded
    owners = run_named(db, "entities", {"text": "user", "namespace": None}).dicts()
    assert len(owners) > 5
    when = {"valid_at": "2024-10-01", "known_at": "2030-01-01T00:00:00Z"}
    each = facts_of_each(db, [o["key"] for o in owners], **when)
    for owner, rows in zip(owners, each, strict=True):
        assert rows == facts(db, owner["key"], **when).dicts()
    together = facts(db, "user", all_namespaces=True, **when).dicts()
    assert sorted(map(repr, together)) == sorted(repr(r) for rows in each for r in rows)
