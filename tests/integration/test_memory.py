"""Memory for an assistant: first-person questions, ranking, typed results, one-call add with a
real local model endpoint, forget and export, and the async facade against the sync one."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re

import pytest

from agefacts import AsyncMemory, LLMClient, Memory, MemoryFact, QueryError
from agefacts.cli import main
from agefacts.load import Loader, load_paths
from agefacts.named import run_named
from agefacts.reads import digest
from agefacts.retrieve import relevance

from ..helpers import EXAMPLES, LIKES, LIVES, ONTO, VIAS, conversation
from ..llm_server import completion


@pytest.fixture
def memory(dsn, graph_name, db):
    """A Memory on this test's graph (``db`` drops it afterwards), with the examples loaded."""
    load_paths(db, [EXAMPLES], ONTO)
    with Memory(dsn, graph_name) as m:
        yield m


# -- first person, ranking, scope ---------------------------------------------------------------------
def test_where_do_i_live_answers_the_owner_with_its_quote(memory):
    recall = memory.ask("Where do I live?", namespace="nina", valid_at=dt.date(2024, 10, 1))
    assert [(e.name, e.surface) for e in recall.entities] == [("user", "i")]
    first = recall.facts[0]
    assert (first.predicate, first.object) == ("lives_in", "Oslo")
    assert first.citation.quote == "We moved to Oslo in June"
    assert first.citation.conversation == "nina-02"
    # Typed: times are datetimes and dates, not text; the stored precision is kept beside.
    assert first.recorded_at == dt.datetime(2024, 7, 2, 9, 0, tzinfo=dt.UTC)
    assert first.valid_from == dt.date(2024, 6, 1) and first.valid_from_text == "2024-06"
    assert isinstance(first.citation.at, dt.datetime) and first.citation.at.tzinfo is not None
    # As known before the move, the same question answers Lyon.
    before = memory.ask("Where do I live?", namespace="nina", valid_at="2024-10-01", known_at="2024-07-01")
    assert before.facts[0].object == "Lyon"


def test_the_question_s_words_rank_its_predicate_first(memory):
    # Each owner has two facts, and the one the question names comes first whatever the
    # facts' own order (by predicate) would put first.
    for question, namespace, wanted in [
        ("Am I married?", "omar", "spouse_of"),
        ("Where do I live?", "omar", "lives_in"),
        ("Do I have a sister?", "mei", "sibling_of"),
        ("What am I allergic to?", "mei", "allergic_to"),
        ("Where do I work?", "dan", "works_at"),
        ("What is my job title?", "dan", "job_title"),
    ]:
        assert len({f.predicate for f in memory.facts("user", namespace=namespace)}) == 2
        recall = memory.ask(question, namespace=namespace)
        assert recall.facts[0].predicate == wanted, (question, [f.predicate for f in recall.facts])
    nina = memory.ask("where do I live", namespace="nina", k=1)
    assert [f.predicate for f in nina.facts] == ["lives_in"] and nina.facts[0].object == "Bergen"
    assert relevance("Where do I live?", "lives_in", ONTO) > 0 == relevance("Where do I live?", "works_at", ONTO)


def test_my_sister_is_the_sister_and_tell_me_is_not_a_question_about_me(memory):
    recall = memory.ask("Where does my sister live?", namespace="jose")
    assert [e.name for e in recall.entities] == ["Begoña"]
    assert ("lives_in", "Logroño") in [(f.predicate, f.object) for f in recall.facts]
    assert [e.name for e in memory.ask("Tell me about Oslo", namespace="nina").entities] == ["Oslo"]


def test_a_namespace_is_required_when_what_is_asked_lies_in_several(memory, cli_env, capsys):
    with pytest.raises(
        QueryError, match=r"'user' is in the memory of 15 namespaces \(ann, dan, hana, jose, kemal and 10 more\)"
    ):
        memory.facts("user")
    with pytest.raises(QueryError, match="what the question names is in the memory of 2 namespaces"):
        memory.ask("Where does my husband work?")
    everyone = memory.facts("user", all_namespaces=True)
    assert len({f.namespace for f in everyone}) > 5
    # Named in one memory only, it needs no namespace: the contract `facts ENTITY` keeps.
    assert {f.namespace for f in memory.facts("Begoña")} == {"jose"}
    assert [e.name for e in memory.ask("Where does Begoña live?").entities] == ["Begoña"]
    assert main(["ask", "Where does my husband work?"]) == 1
    assert "--all-namespaces" in capsys.readouterr().err
    # "I" is every namespace's owner: asked without a namespace, the question says whose is
    # needed (it said the question named nobody), and across all of them it asks every owner.
    with pytest.raises(QueryError, match="what the question names is in the memory of 15 namespaces"):
        memory.ask("Where do I live?")
    assert main(["ask", "Where do I live?"]) == 1
    assert "give the namespace" in capsys.readouterr().err
    owners = memory.ask("Where do I live?", all_namespaces=True, k=100)
    assert len({e.namespace for e in owners.entities}) == 15 and {e.name for e in owners.entities} == {"user"}
    assert ("nina", "Bergen") in {(f.namespace, f.object) for f in owners.facts}
    # What else it names says whose "my" it is.
    mine = memory.ask("Where does my friend Begoña live?")
    assert {(e.namespace, e.name) for e in mine.entities} == {("jose", "Begoña"), ("jose", "user")}
    assert main(["facts", "user", "--all-namespaces", "--format", "json"]) == 0
    assert {r["namespace"] for r in json.loads(capsys.readouterr().out)} >= {"ann", "nina"}


def test_ask_format_context_is_one_citable_line_per_fact(dsn, graph_name, cli_env, capsys):
    assert main(["load", str(EXAMPLES)]) == 0
    capsys.readouterr()
    argv = [
        "ask",
        "Where do I live?",
        "--namespace",
        "nina",
        "--valid-at",
        "2024-10-01",
        "--format",
        "context",
        "-k",
        "5",
    ]
    assert main(argv) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    # The fact first; then the messages that say the question's words, each citable, and
    # never the fact's own message again.
    assert lines[0].startswith("[1] user lives_in Oslo (from 2024-06")
    for part in ['said "We moved to Oslo in June"', "conversation nina-02", "at 2024-07-02T09:00:00Z"]:
        assert part in lines[0], lines[0]
    assert lines[1:] and all(
        re.match(r"\[\d+\] \w+ said .* in conversation \S+ message \d+ at ", line) for line in lines[1:]
    )
    assert not any("nina-02 message 0 " in line for line in lines[1:])


# -- add ------------------------------------------------------------------------------------------------


def test_add_extracts_only_new_turns_and_loads_them_in_one_call(dsn, graph_name, db, server):
    url, script = server(
        {
            "I live in Porto.": [("json", 200, completion(json.dumps(LIVES)))],
            "I love fado.": [("json", 200, completion(json.dumps(LIKES)))],
        }
    )
    with Memory(dsn, graph_name, llm=LLMClient(url, "m", backoff=0.01)) as memory:
        first = memory.add(
            [
                {"role": "user", "content": "I live in Porto.", "at": "2026-03-01T10:00:00Z"},
                {"role": "assistant", "content": "Nice city."},
            ],
            namespace="rui",
            conversation="chat-1",
        )
        assert (first.status, first.extracted, first.failed) == ("loaded", 1, 0)
        assert len(script.requests) == 1
        # New messages extend the conversation; the recorded turn is not paid for again.
        second = memory.add(
            [{"role": "user", "content": "I love fado.", "at": dt.datetime(2026, 3, 2, 10, 0, tzinfo=dt.UTC)}],
            namespace="rui",
            conversation="chat-1",
        )
        assert (second.status, second.turns, second.extracted) == ("loaded", 2, 1)
        assert len(script.requests) == 2
        # The whole history sent again is the same conversation: nothing new to ask or load.
        again = memory.add(
            [
                {"role": "user", "content": "I live in Porto."},
                {"role": "assistant", "content": "Nice city."},
                {"role": "user", "content": "I love fado."},
            ],
            namespace="rui",
            conversation="chat-1",
        )
        assert (again.status, again.extracted) == ("skipped", 0) and len(script.requests) == 2
        recall = memory.ask("What do I like, and where do I live?", namespace="rui")
        assert {(f.predicate, f.object or f.value) for f in recall.facts} == {("lives_in", "Porto"), ("likes", "fado")}
        assert [f.citation.quote for f in memory.ask("What do I like?", namespace="rui").facts][:1] == ["I love fado"]
        # What add loaded is the recorded-file format: export and load it elsewhere to replay.
        (exported,) = memory.export("rui")
        assert [t.recorded is not None for t in exported.turns if t.speaker == "user"] == [True, True]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_two_memories_adding_to_one_conversation_at_once_keep_both_messages(dsn, graph_name, db, kind):
    """Two processes of an assistant (each its own memory and connection) add a message to
    one conversation at the same time: each read the stored conversation, extended it and
    loaded it whole, so the second replaced the first and its message was lost. An add is
    now based on the version it read: when another landed first, it extends that one, and
    the model is not asked again for what it already answered."""
    import threading

    from agefacts.fake_model import FakeModel

    replies = {"I live in Porto.": LIVES, "I love fado.": LIKES}

    def answer(body):
        text = body["messages"][-1]["content"].split("Message to extract from:\n")[1].split("\n")[0]
        return 200, completion(json.dumps(replies[text])), {}

    with Memory(dsn, graph_name) as first:
        first.add([{"role": "assistant", "content": "Hello!"}], namespace="rui", conversation="chat")
    said = ["I live in Porto.", "I love fado."]
    with FakeModel(answer, latency=0.4) as model:
        if kind == "sync":
            errors: list[BaseException] = []
            start = threading.Barrier(2)

            def add(text: str) -> None:
                try:
                    with Memory(dsn, graph_name, llm=LLMClient(model.url, "m", backoff=0.01)) as memory:
                        start.wait()
                        memory.add([{"role": "user", "content": text}], namespace="rui", conversation="chat")
                except BaseException as exc:  # reported below
                    errors.append(exc)

            threads = [threading.Thread(target=add, args=(t,)) for t in said]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert errors == []
        else:

            async def add_async(text: str) -> None:
                async with AsyncMemory(dsn, graph_name, llm=LLMClient(model.url, "m", backoff=0.01)) as memory:
                    await memory.add([{"role": "user", "content": text}], namespace="rui", conversation="chat")

            async def both() -> None:
                await asyncio.gather(*(add_async(t) for t in said))

            asyncio.run(both())
        # Both were with the model at once, so both read the conversation before either
        # loaded; the one that lost the race did not ask again.
        assert model.most_in_flight == 2 and len(model.requests) == 2
    with Memory(dsn, graph_name) as memory:
        (conv,) = memory.export("rui")
        assert sorted(t.text for t in conv.turns if t.speaker == "user") == said
        assert all(t.recorded is not None for t in conv.turns if t.speaker == "user")
        assert {(f.predicate, f.object or f.value) for f in memory.facts("user", namespace="rui")} == {
            ("lives_in", "Porto"),
            ("likes", "fado"),
        }


@pytest.mark.parametrize("asynchronous", [False, True])
def test_add_without_a_model_stores_the_messages_and_a_later_add_with_one_extracts_them(
    dsn, graph_name, db, server, asynchronous
):
    """Without a model nothing was remembered (ExtractionError, nothing stored), while a dead
    model stored the messages as pending: one behaviour now. The messages are kept and found
    by their words, the add says plainly that facts need a model, and the next add with one
    extracts the turns left."""
    import asyncio

    from agefacts.memory import AsyncMemory

    said = [{"role": "user", "content": "I live in Porto.", "at": "2026-03-01T10:00:00Z"}]

    def add_without():
        if not asynchronous:
            with Memory(dsn, graph_name) as memory:
                return memory.add(said, namespace="rui", conversation="c"), memory.ask("Porto?", namespace="rui")

        async def go():
            async with AsyncMemory(dsn, graph_name) as memory:
                return await memory.add(said, namespace="rui", conversation="c"), await memory.ask(
                    "Porto?", namespace="rui"
                )

        return asyncio.run(go())

    added, recalled = add_without()
    assert (added.status, added.extracted, added.failed) == ("pending", 0, 1)
    (why,) = added.errors
    assert "no model" in why and "llm=LLMClient(url, model)" in why and "kept" in why
    assert [m.text for m in recalled.messages] == ["I live in Porto."]  # found by its words now
    assert recalled.facts == ()
    url, script = server({"I live in Porto.": [("json", 200, completion(json.dumps(LIVES)))]})
    with Memory(dsn, graph_name, llm=LLMClient(url, "m", backoff=0.01)) as memory:
        later = memory.add([{"role": "assistant", "content": "Noted."}], namespace="rui", conversation="c")
        assert (later.status, later.extracted) == ("loaded", 1) and len(script.requests) == 1
        assert [(f.predicate, f.object) for f in memory.facts("user", namespace="rui")] == [("lives_in", "Porto")]


# -- forget and export ----------------------------------------------------------------------------------
@pytest.mark.parametrize("via", VIAS)
def test_forget_then_the_graph_is_a_load_without_the_forgotten(db, other_graph, via, tmp_path):
    load_paths(db, [EXAMPLES], ONTO, via=via)
    questions = "SELECT count(*) FROM agefacts.questions WHERE graph = %s AND namespace = 'lukas' AND conversation = %s"
    assert db.execute(questions, (db.graph, "lukas-01")) != [(0,)]  # it asked something, to be forgotten
    assert Loader(db, ONTO, via=via).forget("nina", ["nina-02"]) == ["nina-02"]
    assert Loader(db, ONTO, via=via).forget("lukas", ["lukas-01"]) == ["lukas-01"]
    without = other_graph("without")
    kept = [p for p in sorted(EXAMPLES.glob("*.json")) if p.name not in ("nina-02.json", "lukas-01.json")]
    load_paths(without, kept, ONTO, via=via)
    assert digest(db) == digest(without)
    assert run_named(db, "conversations", {"namespace": "nina"}).dicts()[0]["conversation"] == "nina-01"
    assert db.execute(questions, (db.graph, "lukas-01")) == [(0,)]
    # Loading it again afterwards is a first load again: the same graph as loading everything.
    load_paths(db, [EXAMPLES / "nina-02.json", EXAMPLES / "lukas-01.json"], ONTO, via=via)
    everything = other_graph("all")
    load_paths(everything, [EXAMPLES], ONTO, via=via)
    assert digest(db) == digest(everything)
    # A whole namespace: nothing of it is left.
    Loader(db, ONTO, via=via).forget("nina")
    assert run_named(db, "entities", {"text": "user", "namespace": "nina"}).rows == []
    assert db.execute("SELECT count(*) FROM agefacts.ingest_log WHERE graph = %s AND namespace = 'nina'", (db.graph,)) == [(0,)]  # fmt: skip


@pytest.mark.parametrize("via", VIAS)
def test_forgetting_a_namespace_takes_its_owner_only_when_no_edge_is_left_on_it(db, via):
    """The owner goes with the namespace's last conversation, unless an edge someone else
    wrote still starts or ends at it."""
    from agefacts.keys import user_key

    owner = user_key("nina")

    def owner_left() -> bool:
        return bool(db.cypher("MATCH (u) WHERE u.k = $k RETURN u.k", {"k": owner}).rows)

    for pattern in ("(:Note {k: 'n'})-[:NOTE_ON {k: 'e'}]->(u)", "(u)-[:NOTE_ON {k: 'e'}]->(:Note {k: 'n'})"):
        load_paths(db, [EXAMPLES / "nina-01.json"], ONTO, via=via)
        db.ensure_labels(vertex=["Note"], edge=["NOTE_ON"])
        db.cypher(f"MATCH (u) WHERE u.k = $k CREATE {pattern}", {"k": owner})
        assert Loader(db, ONTO, via=via).forget("nina") == ["nina-01"]
        assert owner_left(), pattern
        db.cypher("MATCH ()-[e:NOTE_ON]->() DELETE e")
        db.cypher("MATCH (n:Note) DELETE n")
    load_paths(db, [EXAMPLES / "nina-01.json"], ONTO, via=via)
    assert Loader(db, ONTO, via=via).forget("nina") == ["nina-01"]
    assert not owner_left()


def test_forget_an_unknown_conversation_is_refused_by_name(db):
    load_paths(db, [EXAMPLES / "nina-01.json"], ONTO)
    with pytest.raises(QueryError, match="no conversation 'nina-09'"):
        Loader(db, ONTO).forget("nina", ["nina-01", "nina-09"])
    assert run_named(db, "conversations", {"namespace": "nina"}).dicts()[0]["conversation"] == "nina-01"


def test_export_then_load_into_an_empty_graph_gives_the_same_digest(cli_env, db, other_graph, tmp_path, capsys):
    assert main(["load", str(EXAMPLES)]) == 0
    out = tmp_path / "nina.jsonl"
    assert main(["export", "--namespace", "nina", "--out", str(out)]) == 0
    assert len(out.read_text().splitlines()) == 3
    only_nina = other_graph("only")
    load_paths(only_nina, sorted(EXAMPLES.glob("nina-*.json")), ONTO)
    fresh = other_graph("fresh")
    load_paths(fresh, [out], ONTO)
    assert digest(fresh) == digest(only_nina)
    # forget through the command line, then the graph holds no nina.
    capsys.readouterr()
    assert main(["forget", "--namespace", "nina"]) == 0
    assert "forgot 3 conversation(s)" in capsys.readouterr().out
    assert main(["export", "--namespace", "nina"]) == 0
    assert capsys.readouterr().out == ""


# -- async ------------------------------------------------------------------------------------------------
def test_async_and_sync_memories_give_equal_results(memory, dsn, graph_name):
    questions = [("Where do I live?", "nina"), ("Where does my husband work?", "ann"), ("Who is Tom?", "ann")]

    async def go():
        async with AsyncMemory(dsn, graph_name) as m:
            # At once, on one connection: the calls an MCP server may get together.
            answers = await asyncio.gather(*(m.ask(q, namespace=ns, valid_at="2024-10-01") for q, ns in questions))
            facts = await m.facts("Tom", namespace="ann", valid_at=dt.date(2026, 12, 1))
            history = await m.history("user", "lives_in", namespace="nina")
            return answers, facts, history

    answers, facts, history = asyncio.run(go())
    assert list(answers) == [memory.ask(q, namespace=ns, valid_at="2024-10-01") for q, ns in questions]
    assert facts == memory.facts("Tom", namespace="ann", valid_at=dt.date(2026, 12, 1))
    assert facts and all(isinstance(f, MemoryFact) for f in facts)
    assert history == memory.history("user", "lives_in", namespace="nina")
    assert [h.object for h in history] == ["Lyon", "Oslo", "Bergen"]


# -- the same fact with and without a date ------------------------------------------------------------------
def _acme(cid: str, text: str, at: str, **when) -> object:
    from ..helpers import claim, conversation, user_turn

    org = {"handle": "e1", "type": "Organization", "mention": "Acme", "resolution": "resolved", "name": "Acme"}
    quote = text.rstrip(".")
    return conversation(
        cid, [user_turn(text, at, entities=[org], statements=[claim("user", "works_at", quote, obj="e1", **when)])]
    )


@pytest.mark.parametrize("via", VIAS)
def test_an_undated_statement_of_a_dated_fact_is_its_evidence(db, via):
    from agefacts.load import Loader
    from agefacts.reads import facts

    dated = _acme("c1", "I start at Acme on November 2.", "2026-11-01T09:00:00Z", valid_from="2026-11-02")
    again = _acme("c2", "I work at Acme.", "2026-11-20T09:00:00Z")
    early = _acme("c3", "I work at Acme.", "2026-10-01T09:00:00Z")
    loader = Loader(db, ONTO, via=via)
    for conv in (again, dated):  # either order
        assert loader.load(conv).status == "loaded"
    rows = facts(db, "user", namespace="test", valid_at="2026-12-01").dicts()
    (one,) = [r for r in rows if r["predicate"] == "works_at"]
    assert (one["valid_from"], one["evidence"], one["quote"]) == ("2026-11-02", 2, "I start at Acme on November 2")
    # Before the undated one was said, the dated fact stands alone, as before.
    (alone,) = facts(db, "user", namespace="test", valid_at="2026-11-10", known_at="2026-11-10").dicts()
    assert alone["evidence"] == 1
    # Said first before the dated fact began, "I work at Acme" held then (since a start not
    # known) and the dated fact starts a run of its own on November 2: one row at any time.
    assert loader.load(early).status == "loaded"
    rows = facts(db, "user", namespace="test", valid_at="2026-12-01").dicts()
    assert [(r["valid_from"], r["valid_until"]) for r in rows] == [("2026-11-02", None)]
    rows = facts(db, "user", namespace="test", valid_at="2026-10-15").dicts()
    assert [(r["valid_from"], r["valid_until"], r["quote"]) for r in rows] == [(None, "2026-11-02", "I work at Acme")]


def test_one_async_memory_asks_the_model_for_several_conversations_at_once(dsn, graph_name, db):
    """An assistant serving many people from one AsyncMemory: adds to different
    conversations wait for the model side by side (they waited in line, one add at a time),
    and two adds to one conversation still keep both messages."""
    from agefacts.fake_model import FakeModel

    replies = {"I live in Porto.": LIVES, "I love fado.": LIKES}

    def answer(body):
        text = body["messages"][-1]["content"].split("Message to extract from:\n")[1].split("\n")[0]
        return 200, completion(json.dumps(replies[text])), {}

    async def main_() -> None:
        async with AsyncMemory(dsn, graph_name, llm=LLMClient(model.url, "m", backoff=0.01)) as memory:
            await asyncio.gather(
                *(
                    memory.add([{"role": "user", "content": text}], namespace=ns, conversation=cid)
                    for ns, cid, text in [
                        ("rui", "a", "I live in Porto."),
                        ("ana", "b", "I love fado."),
                        ("eva", "c", "I live in Porto."),
                        ("eva", "c", "I love fado."),
                    ]
                )
            )
            for ns, want in [("rui", {"Porto"}), ("ana", {"fado"}), ("eva", {"Porto", "fado"})]:
                assert {f.object or f.value for f in await memory.facts("user", namespace=ns)} == want

    with FakeModel(answer, latency=0.4) as model:
        asyncio.run(main_())
        assert model.most_in_flight >= 3 and len(model.requests) == 4


def test_one_memory_shared_by_threads_keeps_every_add(dsn, graph_name, db):
    """A web application's threads sharing one Memory: their transactions interleaved on its
    one connection ("transaction commit at the wrong nesting level", adds lost); each
    transaction now has the connection to itself while the others wait."""
    import threading

    from ..helpers import likes

    errors: list[BaseException] = []
    with Memory(dsn, graph_name) as memory:

        def work(i: int) -> None:
            try:
                for j in range(4):
                    memory.add(likes(f"c{i}-{j}", f"thing {i}{j}", f"2024-01-0{j + 1}T10:00:00Z"))
                    memory.ask("What do I like?", namespace="test")
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert sorted(f.value for f in memory.facts("user", namespace="test")) == sorted(
            f"thing {i}{j}" for i in range(4) for j in range(4)
        )


def test_the_sync_and_async_memories_are_twins():
    """Memory and AsyncMemory repeat each other's calls around shared functions; their
    signatures and their messages drifted apart (a bad connection string was worded two ways,
    one naming command-line flags to library callers). Each public call of one is the other's,
    with the same parameters, and a bad connection string is one sentence on both."""
    import inspect

    from agefacts.errors import DatabaseError

    def calls(cls):
        return {
            n: inspect.signature(f)
            for n, f in inspect.getmembers(cls, inspect.isfunction)
            if not n.startswith("_") and n not in ("open", "close")
        }

    sync, async_ = calls(Memory), calls(AsyncMemory)
    assert sorted(sync) == sorted(async_)
    for name in sync:
        assert list(sync[name].parameters) == list(async_[name].parameters), name
        assert [p.default for p in sync[name].parameters.values()] == [
            p.default for p in async_[name].parameters.values()
        ], name
    assert list(inspect.signature(Memory).parameters) == list(inspect.signature(AsyncMemory).parameters)

    said = []
    with pytest.raises(DatabaseError) as sync_error:
        Memory("garbage dsn")
    said.append(str(sync_error.value))

    async def go():
        async with AsyncMemory("garbage dsn"):
            pass

    with pytest.raises(DatabaseError) as async_error:
        asyncio.run(go())
    said.append(str(async_error.value))
    assert said[0] == said[1] and said[0].startswith("the connection string is not valid")


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_recorded_message_keeps_the_model_that_recorded_it(dsn, graph_name, db, kind):
    """A message recorded elsewhere may say which model recorded it (a turn's ``model``): its
    evidence is that model's, not ``authored``; a message recorded without one stays a person's,
    and a conversation file's ``model`` still answers for turns that name none."""
    said = [
        {
            "speaker": "user",
            "text": "I live in Porto",
            "at": "2026-01-05T10:00:00Z",
            "recorded": LIVES,
            "model": "m-7b",
        },
        {"speaker": "user", "text": "I live in Porto", "at": "2026-02-05T10:00:00Z", "recorded": LIVES},
    ]
    if kind == "sync":
        with Memory(dsn, graph_name, ontology=ONTO) as memory:
            assert memory.add(said, namespace="ann", conversation="c1").status == "loaded"
    else:

        async def add():
            async with AsyncMemory(dsn, graph_name, ontology=ONTO) as memory:
                return await memory.add(said, namespace="ann", conversation="c1")

        assert asyncio.run(add()).status == "loaded"
    got = db.cypher(
        "MATCH (:Statement)-[e:EVIDENCED_BY]->(m:Message) RETURN m.ordinal, e.extractor, e.model",
        columns=["turn", "extractor", "model"],
    ).rows
    assert sorted(got) == [(0, "llm:m-7b", "m-7b"), (1, "authored", None)]
    Loader(db, ONTO).load(
        conversation("c2", [{**said[1], "at": "2026-03-05T10:00:00Z"}], namespace="ann", model="file-model")
    )
    got = db.cypher(
        "MATCH (:Statement)-[e:EVIDENCED_BY]->(m:Message {conversation: 'c2'}) RETURN e.extractor", columns=["x"]
    ).rows
    assert got == [("llm:file-model",)]
