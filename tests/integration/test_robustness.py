"""Nothing lost, nothing injected: bad input, hostile text, faults, concurrency, fuzzing."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agefacts.cli import main
from agefacts.compile import compile_conversation
from agefacts.db import Database
from agefacts.engine import Engine
from agefacts.errors import DatabaseError
from agefacts.load import Loader, load_paths
from agefacts.models import Conversation
from agefacts.reads import digest, graph_content

from ..helpers import EXAMPLES, ONTO, claim, spelled_times, user_turn
from .conftest import free_port

GOOD = json.loads((EXAMPLES / "nina-01.json").read_text())


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def load_cli(*args: str) -> int:
    return main(["load", *args])


# -- bad input ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, text, expect",
    [
        ("notjson.json", "this is not json", "not valid JSON"),
        ("truncated.json", json.dumps(GOOD)[:-40], "not valid JSON"),
        ("noid.json", json.dumps({k: v for k, v in GOOD.items() if k != "id"}), "id: Field required"),
        (
            "both.json",
            json.dumps(
                {
                    **GOOD,
                    "turns": [
                        {
                            **GOOD["turns"][0],
                            "recorded": {
                                "statements": [
                                    {
                                        "subject": "user",
                                        "predicate": "lives_in",
                                        "object": "e1",
                                        "value": "Lyon",
                                        "quote": "x",
                                        "polarity": "asserted",
                                        "tense": "current",
                                    }
                                ]
                            },
                        }
                    ],
                }
            ),
            "exactly one of 'object'",
        ),
        (
            "notime.json",
            json.dumps({**GOOD, "turns": [{k: v for k, v in GOOD["turns"][0].items() if k != "at"}]}),
            "statements but no 'at' time; add the time",
        ),
        ("nul.json", json.dumps({**GOOD, "title": "a\u0000b"}), "NUL character"),
        (
            "surrogate.json",
            json.dumps({**GOOD, "turns": [{**GOOD["turns"][0], "text": "I live in Lyon \ud800"}]}),
            "lone surrogate",
        ),
        ("array.json", "[1, 2]", "a conversation is a JSON object"),
    ],
)
def test_bad_input_is_refused_by_name_and_nothing_is_written(cli_env, tmp_path, capsys, name, text, expect):
    path = write(tmp_path, name, text)
    assert load_cli(str(path)) == 1
    out = capsys.readouterr().out
    assert f"FAILED {path}" in out and expect in out
    assert main(["query", "MATCH (n) RETURN count(n) AS n", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"n": 0}]


def test_an_invalid_ontology_file_is_refused_before_anything_loads(cli_env, tmp_path, capsys):
    onto = write(
        tmp_path,
        "onto.json",
        json.dumps({"name": "x", "entity_types": ["person"], "predicates": ["a"], "system_prompt": "p"}),
    )
    assert load_cli(str(EXAMPLES / "nina-01.json"), "--ontology", str(onto)) == 1
    err = capsys.readouterr().err
    assert str(onto) in err and "cannot be a graph label" in err


def test_what_a_model_got_wrong_is_rejected_not_an_input_error(db):
    summary = load_paths(db, [EXAMPLES / "olu-01.json", EXAMPLES / "priya-01.json", EXAMPLES / "hana-01.json"], ONTO)
    assert [o.status for o in summary.outcomes] == ["loaded"] * 3
    assert summary.totals()["rejected"] == 3


def test_big_inputs_load(db, monkeypatch):
    # Past the message limit a person's chat needs (agefacts.limits), raised as its error says.
    monkeypatch.setenv("AGEFACTS_MAX_MESSAGE_CHARS", "5000000")
    text = ("I live in Lyon. " + "la " * 1_700_000)[:5_000_000]
    statements = [claim("user", "likes", "I live in Lyon", value=f"thing {i}") for i in range(10_000)]
    conv = Conversation.model_validate(
        {"id": "big", "namespace": "big", "turns": [user_turn(text, "2026-01-01T00:00:00Z", [], statements)]}
    )
    out = Loader(db, ONTO).load(conv)
    assert out.status == "loaded" and out.counts["statements"] == 10_000
    assert db.cypher("MATCH (m:Message) RETURN size(m.text)").rows == [(5_000_000,)]
    assert db.cypher("MATCH (s:Statement) RETURN count(s)").rows == [(10_000,)]


# -- injection ---------------------------------------------------------------------------------------
HOSTILE = [
    "'); DROP TABLE agefacts.ingest_log; --",
    '") DETACH DELETE n //',
    "$$ SELECT 1 $$",
    "$x$ $tag$ $$",
    "\\\\\\' \\n \\u0041",
    "line\u2028separator\u2029paragraph",
    "\u202eright-to-left\u200f mark",
    "}) MATCH (n) DETACH DELETE n RETURN 1 //",
    "\t\r\n tabs and newlines",
    "emoji 🇪🇸😀 and é",
    "x" * 99_000,  # with the test's own words, just under the message limit
]


def hostile_conversation(s: str, i: int) -> Conversation:
    text = f"I like it: {s}"
    return Conversation.model_validate(
        {
            "id": f"{s[:190]}-{i}",
            "namespace": f"ns {s[:190]}",  # ids and namespaces are at most 200 characters
            "title": s,
            "notes": s,
            "model": s[:100],
            "turns": [
                user_turn(
                    text,
                    "2026-01-01T00:00:00Z",
                    [
                        {
                            "handle": "e1",
                            "type": "Person",
                            "mention": s,
                            "name": s,
                            "attrs": {"rel": f"friend_of:user {s[:50]}"},
                        }
                    ],
                    [claim("e1", "likes", text, value=s), claim("user", "friend_of", text, obj="e1")],
                    [{"gap": "e1.pronouns", "priority": "banked", "question": s, "reason": s}],
                ),
                {"speaker": "assistant", "text": s, "at": "2026-01-01T00:00:01Z"},
            ],
        }
    )


def catalog(db: Database) -> tuple:
    """The tables and graphs of the database, but for the graphs other tests make and drop
    meanwhile (a server is shared by the suite's workers: theirs, and the graphs the bench
    commands make, agefacts_bench*): one of those is no table a hostile text made."""
    others = r"^(t_[0-9a-f]{12}|agefacts_bench)"
    tables = db.execute(
        "SELECT schemaname, tablename FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema') "
        "AND (schemaname = %s OR schemaname !~ %s) ORDER BY 1, 2",
        (db.graph, others),
    )
    graphs = db.execute(
        "SELECT name FROM ag_catalog.ag_graph WHERE name = %s OR name !~ %s ORDER BY 1", (db.graph, others)
    )
    return tables, graphs


@pytest.mark.parametrize("via", ["bulk", "cypher"])
def test_hostile_text_in_every_field_is_stored_verbatim_and_asks_for_nothing_else(db, via):
    load_paths(db, [EXAMPLES / "nina-01.json"], ONTO)  # the graph's own labels exist
    tables_before, graphs_before = catalog(db)
    labels_before = set(db.labels())
    convs = [hostile_conversation(s, i) for i, s in enumerate(HOSTILE)]
    outs = list(Loader(db, ONTO, via=via).load_many((c.id, c) for c in convs))
    assert [o.status for o in outs] == ["loaded"] * len(HOSTILE), [o.reason for o in outs]
    for conv, s in zip(convs, HOSTILE, strict=True):
        row = db.cypher(
            "MATCH (c:Conversation)<-[:PART_OF]-(m:Message)<-[e:EVIDENCED_BY]-(st:Statement)<-[:SUBJECT_OF]-(p:Person) "
            "WHERE c.namespace = $ns AND st.predicate = 'likes' "
            "RETURN c.id, c.title, m.text, e.quote, st.value, p.name, p.mentions, p.attrs, e.model",
            {"ns": conv.namespace},
            columns=tuple("abcdefghi"),
        ).rows
        text = f"I like it: {s}"
        assert row == [
            (conv.id, s, text, text, " ".join(s.split()), s, [s], {"rel": f"friend_of:user {s[:50]}"}, s[:100])
        ]
        reply = db.cypher(
            "MATCH (m:Message) WHERE m.namespace = $ns AND m.speaker = 'assistant' RETURN m.text",
            {"ns": conv.namespace},
        ).rows
        assert reply == [(s,)]
    questions = db.execute(
        "SELECT question, reason FROM agefacts.questions WHERE graph = %s AND question <> '' ORDER BY namespace",
        (db.graph,),
    )
    assert sorted(q for q, _ in questions) == sorted(HOSTILE)
    assert catalog(db) == (tables_before, graphs_before)
    assert set(db.labels()) == labels_before


# -- faults ------------------------------------------------------------------------------------------
def many_conversations(n: int) -> list[Conversation]:
    out = []
    for i in range(n):
        out.append(
            Conversation.model_validate(
                {
                    "id": f"c{i:03d}",
                    "namespace": f"ns{i % 4}",
                    "turns": [
                        user_turn(
                            f"I live in City{i % 7} and like topic{i}.",
                            f"2026-01-{1 + i % 28:02d}T10:00:00Z",
                            [{"handle": "e1", "type": "Place", "mention": f"City{i % 7}", "name": f"City{i % 7}"}],
                            [
                                claim(
                                    "user",
                                    "lives_in",
                                    f"I live in City{i % 7}",
                                    obj="e1",
                                    valid_from=f"2025-{1 + i % 12:02d}",
                                ),
                                claim("user", "likes", f"like topic{i}", value=f"topic{i}"),
                            ],
                        )
                    ],
                }
            )
        )
    return out


@pytest.mark.parametrize("first", [False, True], ids=["by-batches", "first-load"])
def test_engine_stopped_mid_load_then_rerun_completes_without_duplicates(tmp_path, first):
    engine = Engine(home=tmp_path / "home")
    port = free_port()
    state, _ = engine.start(data=tmp_path / "data", port=port)
    try:
        convs = many_conversations(60)
        reference = Database(state.dsn, "uninterrupted").connect()
        list(Loader(reference, ONTO).load_many((c.id, c) for c in convs))
        expected = digest(reference)

        db = Database(state.dsn, "interrupted").connect()
        # By batches, each commits as it goes; a first load (agefacts.firstload) is one
        # transaction, which the lost connection takes whole.
        loader = Loader(db, ONTO, batch_conversations=10, retries=1, first_load=first)
        real = Loader._record
        calls = {"n": 0}

        def record_then_stop(self, loaded):
            real(self, loaded)
            calls["n"] += 1
            if calls["n"] == 3:
                engine.stop()  # the third batch dies with its connection

        loader._record = record_then_stop.__get__(loader)
        outcomes = list(loader.load_many((c.id, c) for c in convs))
        loaded = [o.conversation for o in outcomes if o.status == "loaded"]
        failed = [o for o in outcomes if o.status == "failed"]
        assert calls["n"] == 3  # the fault happened
        assert (len(loaded), len(failed)) == ((0, 60) if first else (20, 40))
        assert loader.first_loads == 0
        assert all("connection was lost" in o.reason and "run the same command again" in o.reason for o in failed)

        engine.start(data=tmp_path / "data", port=port)
        db = Database(state.dsn, "interrupted").connect()
        again = list(Loader(db, ONTO).load_many((c.id, c) for c in convs))
        assert sorted(o.conversation for o in again if o.status == "skipped") == sorted(loaded)
        assert sum(o.status == "loaded" for o in again) == 60 - len(loaded)
        assert digest(db) == expected
    finally:
        engine.stop()


def test_a_connection_dropped_between_batches_is_reopened(db):
    import socket

    convs = many_conversations(30)
    loader = Loader(db, ONTO, batch_conversations=10)
    real = Loader._record
    calls = {"n": 0}

    def record_then_drop(self, loaded):
        real(self, loaded)
        calls["n"] += 1
        if calls["n"] == 1:
            # Cut the socket under the connection once this batch's work is sent.
            fd = self.db.conn.pgconn.socket
            socket.socket(fileno=fd).detach()
            socket.socket(socket.AF_INET, socket.SOCK_STREAM, 0, fd).shutdown(socket.SHUT_RDWR)

    loader._record = record_then_drop.__get__(loader)
    outcomes = list(loader.load_many((c.id, c) for c in convs))
    assert [o.status for o in outcomes] == ["loaded"] * 30
    assert db.cypher("MATCH (c:Conversation) RETURN count(c)").rows == [(30,)]


# -- concurrency ---------------------------------------------------------------------------------------
def test_two_loaders_at_once_on_overlapping_input_match_one_sequential_load(dsn, db, other_graph):
    """On the embedded engine the server runs one client's transaction at a time, so the two
    loaders interleave batch by batch rather than truly at once; on a server the unique key
    indexes turn a race for the same key into a retried conflict (next test)."""
    convs = many_conversations(40)
    sequential = other_graph("seq")
    list(Loader(sequential, ONTO).load_many((c.id, c) for c in convs))
    errors: list[BaseException] = []

    def run(part: list[Conversation]) -> None:
        try:
            mine = Database(dsn, db.graph).connect()
            outcomes = list(Loader(mine, ONTO, batch_conversations=5).load_many((c.id, c) for c in part))
            failed = [(o.conversation, o.reason) for o in outcomes if o.status == "failed"]
            assert not failed, failed
        except BaseException as exc:
            errors.append(exc)

    def query() -> None:
        try:
            reader = Database(dsn, db.graph).connect()
            for _ in range(20):
                reader.cypher("MATCH (s:Statement) RETURN count(s)")
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=run, args=(convs[:30],)),
        threading.Thread(target=run, args=(convs[10:],)),
        threading.Thread(target=query),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    assert digest(db) == digest(sequential)
    keys = [r[0] for r in db.cypher_raw("MATCH (n) RETURN n.k")] + [
        r[0] for r in db.cypher_raw("MATCH ()-[e]->() RETURN e.k")
    ]
    assert len(keys) == len(set(keys))


@pytest.mark.parametrize("via", ["bulk", "cypher", "first-load"])
def test_unique_key_conflicts_and_deadlocks_are_retried(db, monkeypatch, via):
    """Conflicts raised where the batch (bulk) or the conversation (cypher) is really written:
    each is retried, and the failures injected did happen. In a first load (a new graph,
    agefacts.firstload) a conflict rolls it back and the ordinary path, which retries, loads
    the batches again."""
    from agefacts import bulk, firstload

    failures = ["23505", "40P01"]
    raised: list[str] = []

    def flaky(real):
        def wrapper(self, *args, **kwargs):
            if failures:
                code = failures.pop(0)
                raised.append(code)
                raise DatabaseError(f"simulated conflict (SQLSTATE {code})", code)
            return real(self, *args, **kwargs)

        return wrapper

    if via == "first-load":
        monkeypatch.setattr(firstload.FirstLoad, "write_batch", flaky(firstload.FirstLoad.write_batch))
    if via != "cypher":
        monkeypatch.setattr(bulk.BulkWriter, "write_batch", flaky(bulk.BulkWriter.write_batch))
    else:
        monkeypatch.setattr(Loader, "_record", flaky(Loader._record))
    loader = Loader(db, ONTO, via="cypher" if via == "cypher" else "bulk", first_load=via == "first-load")
    outcomes = list(loader.load_many((c.id, c) for c in many_conversations(5)))
    assert [o.status for o in outcomes] == ["loaded"] * 5
    assert raised == ["23505", "40P01"]
    assert loader.first_loads == 0 and len(loader.fallbacks) == (via == "first-load")
    assert db.cypher("MATCH (c:Conversation) RETURN count(c)").rows == [(5,)]


# -- fuzzing -------------------------------------------------------------------------------------------
words = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=12
)


@st.composite
def conversations(draw, cid: str):
    n_turns = draw(st.integers(1, 3))
    entities = [
        {
            "handle": f"e{i}",
            "type": draw(st.sampled_from(["Person", "Place", "Organization"])),
            "mention": draw(words),
            **({"name": draw(words)} if draw(st.booleans()) else {}),
        }
        for i in range(draw(st.integers(0, 3)))
    ]
    turns = []
    for t in range(n_turns):
        parts = [draw(words) for _ in range(draw(st.integers(1, 4)))]
        text = " ".join(parts)
        stmts = []
        for _ in range(draw(st.integers(0, 3))):
            quote = draw(st.sampled_from(parts + ["not in the text at all"]))
            handles = ["user"] + [e["handle"] for e in entities]
            pred = draw(st.sampled_from(["likes", "lives_in", "works_at", "name", "friend_of"]))
            kw = {}
            if draw(st.booleans()):
                kw["valid_from"] = draw(
                    st.one_of(st.sampled_from(["2024", "2024-06", "2025-01-15", "soon"]), spelled_times())
                )
            if draw(st.integers(0, 3)) == 0:
                kw["valid_until"] = draw(spelled_times())
            if pred in ("lives_in", "works_at", "friend_of") and entities:
                stmts.append(
                    claim(draw(st.sampled_from(handles)), pred, quote, obj=draw(st.sampled_from(handles[1:])), **kw)
                )
            else:
                stmts.append(
                    claim(
                        draw(st.sampled_from(handles)),
                        pred,
                        quote,
                        value=draw(words),
                        polarity=draw(st.sampled_from(["asserted", "asserted", "hedged", None])),
                        **kw,
                    )
                )
        fus = [
            {
                "gap": f"{e['handle']}.name",
                "priority": draw(st.sampled_from(["immediate", "banked"])),
                "question": draw(words),
            }
            for e in entities
            if draw(st.booleans())
        ]
        at = draw(st.one_of(st.just(f"2026-0{1 + t}-0{1 + t}T10:00:00Z"), spelled_times(dated=False)))
        turns.append(user_turn(text, at, entities if t == 0 else [], stmts, fus))
    return Conversation.model_validate({"id": cid, "namespace": draw(st.sampled_from(["a", "b $$'"])), "turns": turns})


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(a=conversations("A"), b=conversations("B"), a2=conversations("A"))
def test_fuzzed_conversations_keep_every_invariant(dsn, graph_name, a, b, a2):
    a2 = a2.model_copy(update={"namespace": a.namespace})
    # Determinism.
    assert compile_conversation(a, ONTO) == compile_conversation(a.model_copy(deep=True), ONTO)
    first = Database(dsn, graph_name + "_ab").connect()
    second = Database(dsn, graph_name + "_ba").connect()
    try:
        for db in (first, second):
            db.drop_graph()
            db.ensure_graph()
        assert [o.status for o in Loader(first, ONTO).load_many([("a", a), ("b", b)])] == ["loaded", "loaded"]
        d = digest(first)
        # Idempotence, through either path.
        list(Loader(first, ONTO, force=True, via="cypher").load_many([("a", a), ("b", b)]))
        assert digest(first) == d
        # Order independence.
        list(Loader(second, ONTO).load_many([("b", b), ("a", a)]))
        assert digest(second) == d
        # Grounding honesty and no injection: every evidence edge indexes its message.
        rows = first.cypher(
            "MATCH (s:Statement)-[e:EVIDENCED_BY]->(m:Message) RETURN e.quote, e.char_start, e.char_end, e.byte_start, e.byte_end, m.text",
            columns=tuple("abcdef"),
        ).rows
        texts = {t.text for c in (a, b) for t in c.turns}
        for quote, cs, ce, bs, be, text in rows:
            assert text in texts
            assert text[cs:ce] == quote
            assert text.encode("utf-8")[bs:be] == quote.encode("utf-8")
        assert all(line.startswith('["') for line in graph_content(first))
        # A changed conversation replaces its old version: the graph is a fresh load of what
        # is there now, whichever path replaces and whichever loads afresh.
        assert [o.status for o in Loader(first, ONTO).load_many([("a2", a2)])] == [
            "skipped" if a2.model_dump() == a.model_dump() else "loaded"
        ]
        second.drop_graph()
        second.ensure_graph()
        list(Loader(second, ONTO, via="cypher").load_many([("b", b), ("a2", a2)]))
        assert digest(first) == digest(second)
    finally:
        for db in (first, second):
            db.drop_graph()
            db.close()
