"""An add to a conversation a memory wrote writes only what its new messages add: the earlier
messages stay as they were, the stored document is not written again, and the graph is the
graph a load of the whole conversation gives (generated chats compared after every add with a
fresh load through the bulk path, and at the end through the Cypher path too; the content hash
equal, so a load of the export is "unchanged")."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from agefacts import AsyncMemory, Memory
from agefacts.db import Database
from agefacts.load import Loader
from agefacts.models import Turn
from agefacts.reads import digest

from ..helpers import ONTO, claim, fresh, fuzz, place, user_turn

PLACES = ["Oslo", "Lyon", "Bergen", "Porto"]
VALUES = ["tea", "jazz", "chess", "fado"]


def _message_ids(db: Database) -> dict[int, int]:
    rows = db.execute(
        f'SELECT id::text, properties::text FROM "{db.graph}"."Message"'  # the test's own graph name
    )
    import json

    return {json.loads(p)["ordinal"]: int(i) for i, p in rows}


def _said(i: int, at: str) -> Turn:
    text = f"I visited place{i} and I like v{i}."
    return Turn.model_validate(
        user_turn(
            text,
            at,
            [place(f"e{i}", f"Place{i}")],
            [
                claim("user", "from_place", f"I visited place{i}", obj=f"e{i}"),
                claim("user", "likes", f"I like v{i}", value=f"v{i}"),
            ],
        )
    )


def test_an_add_to_a_long_conversation_writes_only_its_new_messages(dsn, graph_name, db):
    with Memory(dsn, graph_name, ontology=ONTO) as memory:
        history = [_said(i, f"2024-01-{1 + i % 28:02d}T10:00:00Z") for i in range(30)]
        memory.add(history, namespace="ann", conversation="chat")
        memory.add([_said(30, "2024-02-01T10:00:00Z")], namespace="ann", conversation="chat")
        before = _message_ids(db)
        document = db.execute(
            "SELECT document FROM agefacts.ingest_log WHERE graph = %s AND conversation = 'chat'", (graph_name,)
        )[0][0]
        added = memory.add([_said(31, "2024-02-02T10:00:00Z")], namespace="ann", conversation="chat")
        after = _message_ids(db)
        assert {o: after[o] for o in before} == before  # the earlier messages' rows were left as they were
        assert sorted(after) == list(range(32))
        assert (
            db.execute(
                "SELECT document FROM agefacts.ingest_log WHERE graph = %s AND conversation = 'chat'", (graph_name,)
            )[0][0]
            == document
        )
        assert added.counts["statements"] == 64 and added.counts["evidence"] == 64 and added.counts["entities"] == 32
        (exported,) = memory.export("ann")
        assert len(exported.turns) == 32
        # The whole conversation, loaded again, is the conversation as it stands: unchanged.
        assert Loader(db, ONTO).load(exported).status == "skipped"
        assert Loader(db, ONTO).load(exported.model_copy(update={"title": "x"})).status == "loaded"
        assert db.execute("SELECT count(*) FROM agefacts.ingest_turns WHERE graph = %s", (graph_name,))[0][0] == 0
        assert memory.forget("ann") == ["chat"]


def test_an_async_memory_appends_alike(dsn, graph_name, db):
    async def run() -> None:
        async with AsyncMemory(dsn, graph_name, ontology=ONTO) as memory:
            await memory.add([_said(i, "2024-01-02T10:00:00Z") for i in range(5)], namespace="ann", conversation="chat")
            await memory.add([_said(5, "2024-01-03T10:00:00Z")], namespace="ann", conversation="chat")
            before = _message_ids(db)
            await memory.add([_said(6, "2024-01-04T10:00:00Z")], namespace="ann", conversation="chat")
            after = _message_ids(db)
            assert {o: after[o] for o in before} == before and sorted(after) == list(range(7))
            (exported,) = await memory.export("ann")
            assert Loader(db, ONTO).load(exported).status == "skipped"
            assert await memory.forget("ann", "chat") == ["chat"]
            assert db.execute("SELECT count(*) FROM agefacts.ingest_turns WHERE graph = %s", (graph_name,))[0][0] == 0

    asyncio.run(run())


def test_two_memories_taking_turns_on_one_conversation_keep_every_message(dsn, graph_name, db):
    """Each memory's tail is stale once the other wrote: it loads the whole conversation
    then, built on what the other wrote."""
    with Memory(dsn, graph_name, ontology=ONTO) as a, Memory(dsn, graph_name, ontology=ONTO) as b:
        for i in range(6):
            (a if i % 3 else b).add([_said(i, f"2024-01-{i + 2:02d}T10:00:00Z")], namespace="ann", conversation="chat")
        (exported,) = a.export("ann")
        assert [t.text for t in exported.turns] == [_said(i, "2024-01-01T00:00:00Z").text for i in range(6)]
        assert Loader(db, ONTO).load(exported).status == "skipped"


# -- generated chats ---------------------------------------------------------------------------------
@st.composite
def chats(draw):
    """A chat as adds of a few messages each: user turns declaring new places, naming a
    placeholder of an earlier turn, saying again what an earlier turn said, moving (a
    single-valued predicate), asking follow-ups; assistant turns; a whole history sent
    again; a message earlier than all before; another conversation sharing statements."""
    adds: list[list[Turn]] = []
    handles: list[str] = []
    placeholders: list[str] = []
    n = 0
    day = 1
    for _ in range(draw(st.integers(2, 7))):
        batch = []
        for _ in range(draw(st.integers(1, 3))):
            kind = draw(st.sampled_from(["new", "again", "move", "name", "value", "assistant", "placeholder"]))
            day += draw(st.integers(0, 2))
            at = draw(st.sampled_from([f"2024-03-{min(day, 28):02d}T10:00:00Z", "2024-01-01T00:00:00Z"]))
            if draw(st.integers(0, 5)) != 0:
                at = f"2024-03-{min(day, 28):02d}T10:00:00Z"
            n += 1
            if kind == "assistant":
                batch.append(Turn(speaker="assistant", text=f"Noted {n}.", at=at))
                continue
            ents, stmts, fus = [], [], []
            if kind == "new" or (kind in ("again", "move") and not handles):
                h = f"e{n}"
                name = draw(st.sampled_from(PLACES))
                ents.append(place(h, name))
                handles.append(h)
                text = f"I am from {name} now {n}."
                stmts.append(claim("user", "from_place", f"I am from {name}", obj=h))
            elif kind == "again":
                h = draw(st.sampled_from(handles))
                text = f"Again I am from there {n}."
                stmts.append(claim("user", "from_place", "I am from there", obj=h))
            elif kind == "move":
                h = draw(st.sampled_from(handles))
                text = f"I live there since {n}."
                stmts.append(claim("user", "lives_in", "I live there", obj=h, valid_from=f"2024-03-{min(day, 28):02d}"))
            elif kind == "placeholder":
                h = f"p{n}"
                ents.append({"handle": h, "type": "Person", "mention": "my friend", "resolution": "nil_placeholder"})
                placeholders.append(h)
                text = f"My friend called {n}."
                fus.append({"gap": f"{h}.name", "priority": "banked", "question": "What is your friend's name?"})
            elif kind == "name" and placeholders:
                h = draw(st.sampled_from(placeholders))
                name = draw(st.sampled_from(["Tom", "Mia"]))
                ents.append({"handle": h, "type": "Person", "mention": name, "resolution": "resolved", "name": name})
                text = f"{name} is my friend {n}."
            else:
                value = draw(st.sampled_from(VALUES))
                text = f"I like {value} {n}."
                stmts.append(claim("user", "likes", f"I like {value}", value=value))
            batch.append(Turn.model_validate(user_turn(text, at, ents, stmts, fus)))
        adds.append(batch)
    resend = draw(st.lists(st.integers(0, len(adds) - 1), max_size=2))
    shared = draw(st.booleans())
    return adds, set(resend), shared


@fuzz(8)
@given(chat=chats())
def test_a_chat_added_message_by_message_is_the_graph_a_load_of_it_gives(dsn, graph_name, chat):
    adds, resend, shared = chat
    graphs = {via: fresh(Database(dsn, f"{graph_name}_{via}").connect()) for via in ("bulk", "cypher")}
    mine = fresh(Database(dsn, graph_name + "_m").connect())
    try:
        with Memory(dsn, graph_name + "_m", ontology=ONTO) as memory:
            if shared:  # another conversation says some of the same: statements shared, recomputed
                memory.add(
                    [
                        Turn.model_validate(
                            user_turn(
                                "I like tea 0.",
                                "2024-02-01T10:00:00Z",
                                (),
                                [claim("user", "likes", "I like tea", value="tea")],
                            )
                        )
                    ],
                    namespace="fz",
                    conversation="other",
                )
            sent: list[Turn] = []
            for i, batch in enumerate(adds):
                sent += batch
                memory.add(sent if i in resend else batch, namespace="fz", conversation="chat")
                exported = memory.export("fz")
                # After every add, a fresh load (the bulk path; the Cypher path, slower, at the end).
                for via in ("bulk", "cypher") if i == len(adds) - 1 else ("bulk",):
                    db = graphs[via]
                    outcomes = list(Loader(fresh(db), ONTO, via=via).load_many((c.id, c) for c in exported))
                    assert all(o.status == "loaded" for o in outcomes), [o.reason for o in outcomes]
                    assert digest(db) == digest(mine), (via, i)
                # The content hash is the whole conversation's: loading the export is no change.
                assert all(o.status == "skipped" for o in Loader(mine, ONTO).load_many((c.id, c) for c in exported))
            assert len(memory.export("fz", ["chat"])[0].turns) == len(sent)
    finally:
        for db in (*graphs.values(), mine):
            db.drop_graph()
            db.close()
