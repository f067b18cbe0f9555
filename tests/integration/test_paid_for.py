"""Nothing paid for is lost or faked: a memory's calls say what happened to each message, and
one id is one conversation."""

from __future__ import annotations

import json
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agefacts import AsyncMemory, LLMClient, Memory
from agefacts.fake_model import FakeModel

from ..helpers import LIKES, at_once, fuzz, likes
from ..llm_server import completion


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_one_conversation_id_given_as_a_string_is_one_id(dsn, graph_name, db, kind):
    """forget("ns", "ab") forgot conversations "a" and "b" (the string was iterated)."""
    import asyncio

    with Memory(dsn, graph_name) as memory:
        for cid in ("a", "b", "ab"):
            memory.add(likes(cid, f"thing {cid}", "2024-01-01T10:00:00Z"))
        if kind == "sync":
            assert [c.id for c in memory.export("test", "ab")] == ["ab"]
            assert memory.forget("test", "ab") == ["ab"]
        else:

            async def go():
                async with AsyncMemory(dsn, graph_name) as m:
                    return [c.id for c in await m.export("test", "ab")], await m.forget("test", "ab")

            assert asyncio.run(go()) == (["ab"], ["ab"])
        assert sorted(c.id for c in memory.export("test")) == ["a", "b"]


def test_one_memory_with_a_model_shared_by_threads_extracts_every_add(dsn, graph_name, db):
    """Threads sharing one Memory(llm=...): each add runs its own event loop, and the client's
    one HTTP client was closed by the first add to finish while the others still used it
    ("use LLMClient as an async context manager")."""

    def answer(body):
        text = body["messages"][-1]["content"].split("Message to extract from:\n")[1].split("\n")[0]
        reply = json.loads(json.dumps(LIKES))
        reply["statements"][0] |= {"value": text.rstrip("."), "quote": text.rstrip(".")}
        return 200, completion(json.dumps(reply)), {}

    with FakeModel(answer, latency=0.2) as model, Memory(dsn, graph_name, llm=LLMClient(model.url, "m")) as memory:

        def work(i: int) -> None:
            for j in range(2):
                said = [{"role": "user", "content": f"I love song {i}{j}.", "at": "2024-01-01T10:00:00Z"}]
                added = memory.add(said, namespace="t", conversation=f"c{i}{j}")
                assert (added.status, added.extracted, added.failed) == ("loaded", 1, 0), added

        assert at_once(work, 4) == []
        # The threads were with the model at once.
        assert model.most_in_flight >= 2 and len(model.requests) == 8
        assert sorted(f.value for f in memory.facts("user", namespace="t")) == sorted(
            f"I love song {i}{j}" for i in range(4) for j in range(2)
        )


def test_two_claims_of_one_statement_on_one_place_load_alike_in_every_process(dsn, graph_name, tmp_path):
    """One turn, one statement claimed twice on one place ("huge fan" at 0.73 exact, "huge
    fan" with two spaces at 0.6 by the whitespace tier): loaded into four new graphs in fresh
    processes it gave two digests (which copy survived followed set order), and the
    statement's confidence was 0.6 where it is the highest. Now one digest, 0.73, exact."""
    import os
    import subprocess
    import sys

    from agefacts.db import Database

    from ..helpers import claim, conversation, user_turn

    conv = conversation(
        "fan",
        [
            user_turn(
                "I'm a huge fan of jazz.",
                "2024-01-01T10:00:00Z",
                statements=[
                    claim("user", "likes", "huge fan", value="jazz", confidence=0.73),
                    claim("user", "likes", "huge  fan", value="jazz", confidence=0.6),
                ],
            )
        ],
    )
    path = tmp_path / "fan.json"
    path.write_text(conv.model_dump_json(exclude_none=True))
    digests = set()
    for i, (seed, via) in enumerate((("0", "bulk"), ("1", "cypher"), ("2", "bulk"), ("12345", "cypher"))):
        graph = f"{graph_name}_h{i}"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = [sys.executable, "-m", "agefacts"]
        common = ["--dsn", dsn, "--graph", graph]
        subprocess.run([*run, "load", str(path), "--via", via, *common], env=env, check=True, capture_output=True)
        out = subprocess.run([*run, "digest", *common], env=env, check=True, capture_output=True, text=True)
        digests.add(out.stdout.strip())
        with Database(dsn, graph) as db:
            if i == 0:
                rows = db.cypher(
                    "MATCH (s:Statement)-[e:EVIDENCED_BY]->() RETURN s.confidence, e.confidence, e.tier",
                    columns=("s", "e", "tier"),
                ).rows
                assert rows == [(0.73, 0.73, "exact")]
            db.drop_graph()
    assert len(digests) == 1


def test_the_load_summary_counts_what_the_graph_holds(db):
    """It said 6,599 statements and 7,104 evidence where the graph held 6,262 and 7,002: the
    same statement (and the same owner) from several conversations was counted once per
    conversation, and two claims on one place twice."""
    from agefacts.inputs import read_conversations
    from agefacts.load import load_paths

    from ..helpers import EXAMPLES, ONTO, claim, conversation, user_turn

    again = conversation(
        "again",
        [
            user_turn(
                "I'm a huge fan of jazz. I like jazz.",
                "2024-01-01T10:00:00Z",
                statements=[
                    claim("user", "likes", "huge fan", value="jazz", confidence=0.7),
                    claim("user", "likes", "huge  fan", value="jazz", confidence=0.6),
                    claim("user", "likes", "I like jazz", value="jazz"),
                ],
            )
        ],
        namespace="ann",
    )
    summary = load_paths(db, [EXAMPLES], ONTO)
    from agefacts.load import Loader

    summary.outcomes.append(Loader(db, ONTO).load(again))
    totals = summary.totals()

    def count(pattern: str) -> int:
        return db.cypher(f"MATCH {pattern} RETURN count(*)", columns=("n",)).rows[0][0]

    assert totals["statements"] == count("(s:Statement)")
    assert totals["evidence"] == count("()-[e:EVIDENCED_BY]->()")
    assert totals["entities"] == count("(n) WHERE n.type IS NOT NULL")
    # Three claims of one statement in "again", two of them on one place.
    assert summary.outcomes[-1].counts["claims"] == 3 and summary.outcomes[-1].counts["statements"] == 1
    assert summary.outcomes[-1].counts["evidence"] == 2
    assert totals["repeated"] == totals["claims"] - totals["statements"] >= 2
    assert f"({totals['repeated']} claims said a statement again)" in summary.text()
    assert len(list(read_conversations([EXAMPLES]))) == 25


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_the_same_new_message_sent_by_several_processes_at_once_is_stored_once(dsn, graph_name, db, kind):
    """Three processes of an assistant send the same message to one conversation at once (a
    retried request): each add was built again on the one that landed first and appended the
    message again, so it was stored three times (one statement, three evidence edges)."""
    import asyncio

    def answer(body):
        return 200, completion(json.dumps(LIKES)), {}

    with Memory(dsn, graph_name) as first:
        first.add([{"role": "assistant", "content": "Hello!"}], namespace="rui", conversation="chat")
    said = [{"role": "user", "content": "I love fado."}]
    with FakeModel(answer, latency=0.4) as model:
        if kind == "sync":

            def add(i: int) -> None:
                with Memory(dsn, graph_name, llm=LLMClient(model.url, "m", backoff=0.01)) as memory:
                    memory.add(said, namespace="rui", conversation="chat")

            assert at_once(add, 3) == []
        else:

            async def add_async() -> None:
                async with AsyncMemory(dsn, graph_name, llm=LLMClient(model.url, "m", backoff=0.01)) as memory:
                    await memory.add(said, namespace="rui", conversation="chat")

            async def all_three() -> None:
                await asyncio.gather(*(add_async() for _ in range(3)))

            asyncio.run(all_three())
        assert model.most_in_flight >= 2  # they raced
    with Memory(dsn, graph_name) as memory:
        (conv,) = memory.export("rui")
        assert [t.text for t in conv.turns] == ["Hello!", "I love fado."]
        (fado,) = memory.facts("user", namespace="rui")
        assert fado.evidence == 1


def test_an_add_whose_model_is_down_says_its_message_is_not_understood_yet(dsn, graph_name, db):
    """Against an endpoint that is down, add returned status 'loaded' (with failed=1): a
    caller reading the status believed the message was understood."""
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    llm = LLMClient(f"http://127.0.0.1:{port}/v1", "m", retries=1, backoff=0.01)
    with Memory(dsn, graph_name, llm=llm) as memory:
        added = memory.add([{"role": "user", "content": "I love fado."}], namespace="rui", conversation="c")
        assert (added.status, added.failed) == ("pending", 1) and added.errors
        # The message is kept, and the next add asks for it again.
        (conv,) = memory.export("rui")
        assert [t.text for t in conv.turns] == ["I love fado."] and conv.turns[0].error


@pytest.mark.parametrize("opted_in", [False, True])
def test_a_load_leaves_the_hosts_interpreter_alone_unless_asked(db, opted_in):
    """During any load, Memory.add included, another thread saw sys.getswitchinterval() go
    from 0.005 to 5e-05 and the GC threshold from 700 to 100,000: process-wide settings a
    library must leave alone unless its caller opts in (the command line does)."""
    import gc
    import sys

    from agefacts.corpus import generate
    from agefacts.load import Loader
    from agefacts.models import Conversation

    from ..helpers import ONTO

    before = (sys.getswitchinterval(), gc.get_threshold())
    convs = [Conversation.model_validate(c) for c in generate(1500, 10)]
    seen: set[tuple[float, tuple[int, int, int]]] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.add((sys.getswitchinterval(), gc.get_threshold()))
            done.wait(0.001)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        outcomes = list(Loader(db, ONTO, tune_interpreter=opted_in).load_many((c.id, c) for c in convs))
    finally:
        done.set()
        watcher.join()
    assert all(o.status == "loaded" for o in outcomes)
    assert len(seen) >= 1
    if opted_in:
        assert any(interval < before[0] and threshold[0] >= 100_000 for interval, threshold in seen)
    else:
        assert seen == {before}
    assert (sys.getswitchinterval(), gc.get_threshold()) == before


def _adds(memory, chat, ns="live"):
    for i, (who, text) in enumerate(chat):
        yield memory.add(
            [{"role": who, "content": text, "at": f"2026-03-01T10:{i:02d}:00Z"}], namespace=ns, conversation="c"
        )


def test_a_conversation_the_assistant_opens_appends_with_the_models_name(dsn, graph_name, server, caplog):
    """The first add stored it with no model; each user add's append then named the model,
    was refused for it, loaded the whole conversation again, and the model was never set:
    every add a whole load, the model's facts stored as authored."""
    import logging

    from agefacts.memory import Memory
    from agefacts.model_client import LLMClient

    from ..helpers import LIVES
    from ..llm_server import completion

    url, script = server({"I live in Porto.": [("json", 200, completion(json.dumps(LIVES), model="live-model"))]})
    chat = [
        ("assistant", "Hello! How can I help?"),
        ("user", "I live in Porto."),
        ("assistant", "Noted."),
        ("assistant", "Anything else?"),
    ]
    caplog.set_level(logging.DEBUG, logger="agefacts.memory")
    with Memory(dsn, graph_name, llm=LLMClient(url, "m", backoff=0.01)) as memory:
        added = list(_adds(memory, chat))
        assert [a.status for a in added] == ["loaded"] * 4
        assert len(script.requests) == 1  # the one user turn, once
        (conv,) = memory.export("live")
        assert conv.model == "live-model"
        (fact,) = memory.facts("user", namespace="live")
        assert (fact.object, fact.citation.quote) == ("Porto", "I live in Porto")
    # After the first user add, the adds append.
    appended = [r for r in caplog.records if "appended to conversation" in r.getMessage()]
    assert len(appended) == 2, [r.getMessage() for r in caplog.records]
    from agefacts.db import Database

    with Database(dsn, graph_name) as db:
        rows = db.cypher(
            "MATCH (:Statement)-[e:EVIDENCED_BY]->(:Message) RETURN e.extractor, e.model", columns=("x", "m")
        ).rows
    assert rows == [("llm:live-model", "live-model")]


def test_a_failing_turn_is_asked_once_an_add_not_twice(dsn, graph_name, server):
    """With the model failing a message, every add asked it twice: the append asked, was
    refused (a turn waits for its extraction), and the whole load asked again."""
    from agefacts.memory import Memory
    from agefacts.model_client import LLMClient

    url, script = server({"I live in Porto.": [("json", 500, {"error": "down"})]})
    chat = [("user", "I live in Porto."), ("assistant", "Noted."), ("assistant", "Still there?"), ("user", "Hello?")]
    with Memory(dsn, graph_name, llm=LLMClient(url, "m", retries=0, backoff=0.01, give_up_after=0)) as memory:
        seen = []
        for added in _adds(memory, chat):
            assert added.status == "pending"
            seen.append(len([r for r in script.requests if ":\nI live in Porto.\n" in r["messages"][-1]["content"]]))
    # The failing turn: asked once by each add (its retry), never twice in one add.
    assert seen == [1, 2, 3, 4], seen


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_extraction_paid_for_and_not_written_is_not_paid_for_again(
    dsn, graph_name, server, monkeypatch, asynchronous
):
    """The engine stopped between the model's reply and the write: the add tried again asked
    the model again (extract keeps a journal for this; a memory kept nothing)."""
    import asyncio

    import agefacts.adding as adding_module
    from agefacts.errors import DatabaseError
    from agefacts.memory import AsyncMemory, Memory
    from agefacts.model_client import LLMClient

    from ..helpers import LIVES
    from ..llm_server import completion

    url, script = server({"I live in Porto.": [("json", 200, completion(json.dumps(LIVES)))]})
    real_load = adding_module.load_whole
    failed = []

    def load_failing_once(*a, **kw):
        if not failed:
            failed.append(True)
            raise DatabaseError(
                "writing: the database connection failed: server closed the connection", connection_lost=True
            )
        return real_load(*a, **kw)

    monkeypatch.setattr(adding_module, "load_whole", load_failing_once)
    said = [{"role": "user", "content": "I live in Porto.", "at": "2026-03-01T10:00:00Z"}]
    llm = LLMClient(url, "m", backoff=0.01)

    async def on_async():
        async with AsyncMemory(dsn, graph_name, llm=llm) as memory:
            with pytest.raises(DatabaseError):
                await memory.add(said, namespace="rui", conversation="c")
            added = await memory.add(said, namespace="rui", conversation="c")
            return added, await memory.facts("user", namespace="rui")

    if asynchronous:
        added, got = asyncio.run(on_async())
    else:
        with Memory(dsn, graph_name, llm=llm) as memory:
            with pytest.raises(DatabaseError):
                memory.add(said, namespace="rui", conversation="c")
            added = memory.add(said, namespace="rui", conversation="c")
            got = memory.facts("user", namespace="rui")
    assert failed and added.status == "loaded"
    assert len(script.requests) == 1  # paid once
    assert [f.object for f in got] == ["Porto"]


@pytest.mark.parametrize("via", ["bulk", "cypher"])
def test_a_turn_asked_again_may_name_a_handle_a_later_turn_declared(db, server, via):
    """A turn asked again is shown every handle the recording holds, later turns' included; a
    statement of its reply that named one (the model meaning that very entity) was refused
    unknown_handle. The reply's turn now declares it too, so it reads the same whether the
    turn that declared it first is loaded yet or not."""
    import asyncio

    from agefacts.extract import extract_conversation
    from agefacts.load import Loader
    from agefacts.model_client import LLMClient
    from agefacts.reads import facts

    from ..helpers import ONTO, conversation, place, user_turn
    from ..llm_server import completion

    grew_up = {"subject": "user", "predicate": "from_place", "object": "e1", "quote": "Lisbon is where I grew up"}
    reply = {"entities": [], "statements": [grew_up | {"polarity": "asserted", "tense": "current"}], "followups": []}
    url, script = server({"Lisbon is where I grew up.": [("json", 200, completion(json.dumps(reply)))]})
    failed = user_turn("Lisbon is where I grew up.", "2024-01-01T10:00:00Z") | {"recorded": None, "error": "HTTP 500"}
    later = user_turn("I visited Lisbon again.", "2024-02-01T10:00:00Z", [place("e1", "Lisbon")], [])
    conv = conversation("c", [failed, later], namespace="h")

    async def again():
        async with LLMClient(url, "m", backoff=0.01) as client:
            return await extract_conversation(client, conv, ONTO)

    out = asyncio.run(again())
    assert len(script.requests) == 1 and out.errors == []
    assert [e.handle for e in out.conversation.turns[0].recorded.entities] == ["e1"]
    loaded = Loader(db, ONTO, via=via).load(out.conversation)
    assert loaded.status == "loaded" and not [r for r in loaded.rejections if r[2] == "unknown_handle"]
    assert [(f["predicate"], f["object"]) for f in facts(db, "user", namespace="h").dicts()] == [
        ("from_place", "Lisbon")
    ]


@pytest.mark.parametrize("opening", ["user", "assistant"])
def test_bench_add_through_the_model_path_asks_once_per_message_and_keeps_one_digest(dsn, opening):
    """bench-add measured only adds fed recorded extractions: the model path is measured too
    (its own stand-in endpoint), and asks the model once per message the person adds."""
    from agefacts.bench import run_add_bench

    from ..helpers import ONTO

    result = run_add_bench(dsn, ONTO, sizes=(4, 8), adds=3, model=True, opening=opening)
    assert result.digest_equal
    assert result.requests == result.user_turns == (2 + 3 + 1) + (4 + 3 + 1)  # opening chats' and added
    assert [r["turns"] for r in result.rows] == [4, 8]


def _replies(said) -> dict:
    """What the model does with each of the person's messages of a drawn chat ((who, text,
    does)): answers what they like, fails, refuses in prose, is cut off, or stalls."""
    from ..llm_server import completion

    steps = {}
    for who, text, does in said:
        if who != "user":
            continue
        thing = text.split()[-1].rstrip(".")
        good = completion(json.dumps({"entities": [], "statements": [
            {"subject": "user", "predicate": "likes", "value": thing, "quote": f"I like {thing}",
             "polarity": "asserted", "tense": "current"}], "followups": []}))  # fmt: skip
        cut = dict(good, choices=[dict(good["choices"][0], finish_reason="length")])
        steps[text] = {
            "ok": [("json", 200, good)],
            "fails": [("json", 500, {"error": "down"})],
            "prose": [("json", 200, completion("Sorry, I cannot do that."))],
            "cut": [("json", 200, cut)],
            "stalls": [("sleep", 1.5)],
        }[does]
    return steps


@st.composite
def _faulty_chats(draw):
    """A chat (the person's messages, each with what the model does with it, and the
    assistant's replies) and the adds at which the write fails."""
    n = draw(st.integers(2, 7))
    said = []
    for i in range(n):
        if draw(st.booleans()) or i == 0:
            said.append(
                ("user", f"I like thing{i}.", draw(st.sampled_from(["ok", "ok", "fails", "prose", "cut", "stalls"])))
            )
        else:
            said.append(("assistant", f"Noted {i}.", None))
    failing_writes = draw(st.sets(st.integers(0, n - 1), max_size=2))
    return said, failing_writes


@fuzz(12)
@given(chat=_faulty_chats())
def test_generated_chats_with_a_faulty_model_and_failing_writes_pay_once_and_keep_one_digest(
    dsn, graph_name, server, other_graph, monkeypatch, chat
):
    """Whatever the model does (answers, fails, refuses in prose, is cut off, stalls) and
    whichever writes fail: every message the person said is recorded or marked failed with
    its reason, a message recorded was paid for once, and the graph is a fresh load of its
    export."""
    import uuid

    import agefacts.adding as adding_module
    from agefacts.errors import DatabaseError
    from agefacts.memory import Memory
    from agefacts.model_client import LLMClient
    from agefacts.reads import digest

    from ..helpers import ONTO

    said, failing_writes = chat
    steps = _replies(said)
    url, script = server(steps)
    ns = "g" + uuid.uuid4().hex[:8]
    real_load, real_appended = adding_module.load_whole, adding_module.appended
    writes = {"n": 0}

    def failing(real):
        def write(*a, **kw):
            writes["n"] += 1
            if writes["n"] - 1 in failing_writes:
                raise DatabaseError("writing: the database connection failed", connection_lost=True)
            return real(*a, **kw)

        return write

    monkeypatch.setattr(adding_module, "load_whole", failing(real_load))
    monkeypatch.setattr(adding_module, "appended", failing(real_appended))
    llm = LLMClient(url, "m", retries=1, backoff=0.01, timeout=0.5, give_up_after=0)
    with Memory(dsn, graph_name, llm=llm) as memory:
        for i, (who, text, _) in enumerate(said):
            msg = [{"role": who, "content": text, "at": f"2026-03-01T10:{i:02d}:00Z"}]
            for _attempt in range(3):  # an add whose write failed is tried again, as a caller would
                try:
                    memory.add(msg, namespace=ns, conversation="c")
                    break
                except DatabaseError:
                    continue
        (conv,) = memory.export(ns)
        mine = digest(memory.db, namespace=ns)
    users = [t for t in conv.turns if t.speaker == "user"]
    assert [t.text for t in users] == [text for who, text, _ in said if who == "user"]
    for t in users:
        assert (t.recorded is not None and t.error is None) or t.error, t  # recorded, or failed with why
    # A message once recorded was never asked again (200 answers per text).
    answered = {}
    for r in script.requests:
        content = r["messages"][-1]["content"]
        for t in users:
            if f":\n{t.text}\n" in content:
                answered[t.text] = answered.get(t.text, 0) + 1
    for who, text, does in said:
        if who == "user" and does == "ok":
            assert answered.get(text, 0) == 1, (text, answered)
    from agefacts.load import Loader

    fresh = other_graph("fresh" + uuid.uuid4().hex[:6])
    assert Loader(fresh, ONTO).load(conv).status == "loaded"
    assert digest(fresh, namespace=ns) == mine


def test_a_conversation_recorded_by_hand_then_by_the_model_keeps_both_and_appends(dsn, graph_name, server, caplog):
    """A message recorded by hand (no model), then messages the memory's model extracts: the
    model's evidence is the model's and the hand's stays authored, and each add appends. The
    conversation's one model could not be set without making the hand's words the model's,
    so the model's facts were stored as authored and every add loaded the conversation whole."""
    import logging

    from agefacts.db import Database
    from agefacts.memory import Memory
    from agefacts.model_client import LLMClient

    from ..helpers import LIKES, LIVES
    from ..llm_server import completion

    url, script = server({"I love fado.": [("json", 200, completion(json.dumps(LIKES), model="live-model"))]})
    caplog.set_level(logging.DEBUG, logger="agefacts.memory")
    with Memory(dsn, graph_name, llm=LLMClient(url, "m", backoff=0.01)) as memory:
        first = [{"role": "user", "content": "I live in Porto", "at": "2026-03-01T10:00:00Z", "recorded": LIVES}]
        assert memory.add(first, namespace="mix", conversation="c").status == "loaded"
        for i, text in enumerate(["Noted.", "I love fado.", "Lovely."]):
            said = [{"role": "assistant" if i != 1 else "user", "content": text, "at": f"2026-03-01T10:0{i + 1}:00Z"}]
            assert memory.add(said, namespace="mix", conversation="c").status == "loaded"
        assert len(script.requests) == 1
    appended = [r for r in caplog.records if "appended to conversation" in r.getMessage()]
    assert len(appended) == 3, [r.getMessage() for r in caplog.records]
    with Database(dsn, graph_name) as db:
        rows = db.cypher(
            "MATCH (s:Statement)-[e:EVIDENCED_BY]->(:Message) RETURN s.predicate, e.extractor", columns=("p", "x")
        ).rows
    assert sorted(rows) == [("likes", "llm:live-model"), ("lives_in", "authored")]


def test_an_add_asked_of_a_model_never_writes_its_conversation_out_as_text(dsn, graph_name, server, monkeypatch):
    """asyncio.run looks the Ctrl-C handler up once the model has answered, and Python 3.11
    then formats the finished task as text, its result too: the whole conversation. An add to
    a conversation of 1,000 turns spent 67 ms of its 127 ms doing so, more the longer the chat."""
    from agefacts.memory import Memory
    from agefacts.model_client import LLMClient
    from agefacts.models import Conversation, Turn

    from ..helpers import LIVES
    from ..llm_server import completion

    url, script = server({"I live in Porto.": [("json", 200, completion(json.dumps(LIVES)))]})
    written: list[str] = []
    for model in (Conversation, Turn):
        monkeypatch.setattr(model, "__repr__", lambda self: written.append(type(self).__name__) or "...")
    with Memory(dsn, graph_name, llm=LLMClient(url, "m", backoff=0.01)) as memory:
        for i, text in enumerate(["Hello.", "I live in Porto."]):
            said = [{"role": "user", "content": text, "at": f"2026-03-01T10:0{i}:00Z"}]
            assert memory.add(said, namespace="rep", conversation="c").status == "loaded"
        assert [f.object for f in memory.facts("user", namespace="rep")] == ["Porto"]
    assert len(script.requests) == 2
    assert written == []


@st.composite
def _killed_chats(draw):
    """A chat (the person's messages, each with what the model does with it, and the
    assistant's replies) and where the process adding it is killed: at a drawn request to the
    model, or at the n-th time an add gets to a drawn point of its write."""
    n = draw(st.integers(2, 6))
    said = []
    for i in range(n):
        if draw(st.booleans()) or i in (0, n - 1):  # two of the person's at least: every point is met
            said.append(
                (
                    "user",
                    f"I like thing{i}.",
                    draw(st.sampled_from(["ok", "ok", "ok", "fails", "prose", "cut", "stalls"])),
                )
            )
        else:
            said.append(("assistant", f"Noted {i}.", None))
    kills = draw(
        st.lists(
            st.tuples(st.sampled_from(["asked", "kept", "writing", "written"]), st.integers(1, 2)),
            min_size=1,
            max_size=3,
        )
    )
    return said, kills, draw(st.sampled_from(["sync", "async"]))


@fuzz(3)
@given(chat=_killed_chats())
def test_generated_chats_added_by_processes_killed_anywhere_pay_once_and_keep_one_digest(
    dsn, graph_name, server, other_graph, chat
):
    """A process adding a chat (through Memory or AsyncMemory) is killed at drawn points (a request to the model in flight, what
    the model answered committed and nothing written, inside the write, after the write), with a
    model that fails, refuses, is cut off and stalls at drawn messages, and the
    caller sends the message it was adding again from a new process: every message the person
    said is recorded or marked failed with its reason, a message the model answered was paid for
    once (plus once per kill in its flight), nothing is left kept, and the graph is a fresh load
    of its export. A memory kept what it paid for in its process only: a killed one paid again."""
    import os
    import signal
    import subprocess
    import sys
    import uuid
    from pathlib import Path

    from agefacts.db import Database
    from agefacts.load import Loader
    from agefacts.memory import Memory
    from agefacts.reads import digest

    from ..helpers import ONTO

    said, kills, how = chat
    in_flight = {"proc": None, "kill_at": None, "killed": []}
    kills_in_flight = [nth for point, nth in kills if point == "asked"]
    points = [(point, nth) for point, nth in kills if point != "asked"]
    steps = _replies(said)
    url, script = server(steps)
    real_answer = script.answer

    def answer(body):
        # The n-th request of this process's life kills it before the model answers.
        proc = in_flight["proc"]
        in_flight["seen"] = in_flight.get("seen", 0) + 1
        if proc is not None and in_flight["kill_at"] == in_flight["seen"]:
            in_flight["killed"].append(body["messages"][-1]["content"])
            os.kill(proc.pid, signal.SIGKILL)
        return real_answer(body)

    script.answer = answer
    ns = "k" + uuid.uuid4().hex[:8]
    messages = [[i, who, text, f"2026-03-01T10:{i:02d}:00Z"] for i, (who, text, _) in enumerate(said)]
    root = Path(__file__).parents[2]
    done, runs, killed = 0, 0, 0
    while done < len(messages):
        runs += 1
        assert runs <= 3 * len(messages) + len(kills), "the chat never got added"
        args = [sys.executable, "-m", "tests.memory_worker", dsn, graph_name, url, ns, json.dumps(messages[done:]), how]
        in_flight["seen"], in_flight["kill_at"] = 0, None
        if points and not kills_in_flight or (points and runs % 2):
            args += [str(x) for x in points.pop(0)]
        elif kills_in_flight:
            in_flight["kill_at"] = kills_in_flight.pop(0)
        proc = subprocess.Popen(args, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        in_flight["proc"] = proc
        out, err = proc.communicate(timeout=120)
        in_flight["proc"] = None
        done += sum(1 for line in out.splitlines() if line.startswith("added "))
        if proc.returncode == -signal.SIGKILL:
            killed += 1
            continue
        assert proc.returncode == 0, err
    with Memory(dsn, graph_name) as memory:
        (conv,) = memory.export(ns)
        mine = digest(memory.db, namespace=ns)
        left = memory.db.execute(
            "SELECT count(*) FROM agefacts.extractions WHERE graph = %s AND namespace = %s", (graph_name, ns)
        )[0][0]
    assert killed >= 1  # the faults happened
    assert left == 0  # nothing kept once written
    users = [t for t in conv.turns if t.speaker == "user"]
    assert [t.text for t in users] == [text for who, text, _ in said if who == "user"]
    for t in users:
        assert (t.recorded is not None and t.error is None) or t.error, t  # recorded, or failed with why
    asked: dict[str, int] = {}
    for r in script.requests:
        for t in users:
            if f":\n{t.text}\n" in r["messages"][-1]["content"]:
                asked[t.text] = asked.get(t.text, 0) + 1
    for who, text, does in said:
        if who == "user" and does == "ok":
            lost = sum(1 for c in in_flight["killed"] if f":\n{text}\n" in c)
            assert asked.get(text, 0) <= 1 + lost, (text, asked, lost)
    fresh = other_graph("fresh" + uuid.uuid4().hex[:6])
    assert Loader(fresh, ONTO).load(conv).status == "loaded"
    assert digest(fresh, namespace=ns) == mine
    with Database(dsn, graph_name) as db:
        assert db.execute("SELECT 1") == [(1,)]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_message_sent_again_with_its_time_is_stored_once_and_one_without_twice(dsn, graph_name, asynchronous):
    """A caller whose add was cut off after the write (its process killed) cannot know that the
    message landed, and sends it again: it was stored twice, the person saying it twice. A
    message that repeats the conversation's last, time and all, is the same message; one
    without a time may be said twice ("ok")."""
    import asyncio

    from ..helpers import LIKES

    hello = {"role": "assistant", "content": "Hello!", "at": "2026-03-01T09:59:00Z"}
    said = {"role": "user", "content": "I love fado.", "at": "2026-03-01T10:00:00Z", "recorded": LIKES}
    ok = {"role": "user", "content": "ok"}

    async def on_async():
        async with AsyncMemory(dsn, graph_name) as memory:
            for msg in (hello, said, said, ok, ok):
                await memory.add([msg], namespace="again", conversation="c")
            return await memory.export("again")

    if asynchronous:
        (conv,) = asyncio.run(on_async())
    else:
        with Memory(dsn, graph_name) as memory:
            for msg in (hello, said, said, ok, ok):
                memory.add([msg], namespace="again", conversation="c")
            (conv,) = memory.export("again")
    assert [t.text for t in conv.turns] == ["Hello!", "I love fado.", "ok", "ok"]
