"""``agefacts mcp`` over stdio, driven by the MCP SDK's own client, against the real engine."""

from __future__ import annotations

import asyncio
import json
import sys

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from agefacts.load import load_paths
from agefacts.named import run_named

from ..helpers import EXAMPLES, ONTO
from ..llm_server import completion


def _server(dsn: str, graph: str, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "agefacts", "mcp", "--dsn", dsn, "--graph", graph, *extra],
    )


def _call(params: StdioServerParameters, calls: list[tuple[str, dict]]) -> tuple[list[str], list]:
    async def go():
        async with Client(params) as client:
            tools = sorted(t.name for t in (await client.list_tools()).tools)
            return tools, [await client.call_tool(name, args) for name, args in calls]

    return asyncio.run(go())


def test_the_sdk_client_recalls_facts_with_their_quotes(db, dsn, graph_name):
    load_paths(db, [EXAMPLES], ONTO)
    tools, (recall, other, foreign, missing, corrected, now) = _call(
        _server(dsn, graph_name, "--namespace", "nina"),
        [
            ("recall", {"question": "Where do I live?", "valid_at": "2024-10-01"}),
            ("facts", {"entity": "user", "valid_at": "2024-10-01", "known_at": "2024-07-01"}),
            ("recall", {"question": "Where do I live?", "namespace": "ann"}),
            ("history", {"entity": "nobody-at-all", "predicate": "lives_in"}),
            ("correct", {"entity": "user", "predicate": "lives_in", "said": "Bergen", "by": "Nina", "instead": "Oslo"}),
            ("facts", {"entity": "user"}),
        ],
    )
    assert tools == [
        "conversations",
        "correct",
        "entities",
        "facts",
        "forget",
        "history",
        "ontology",
        "recall",
        "remember",
        "status",
    ]
    assert not recall.is_error
    answer = recall.structured_content
    first = answer["facts"][0]
    assert (first["predicate"], first["object"], first["quote"]) == (
        "lives_in",
        "Oslo",
        "We moved to Oslo in June",
    )
    assert first["recorded_at"] == "2024-07-02T09:00:00Z"
    assert answer["context"].startswith("[1] user lives_in Oslo")
    (lyon,) = other.structured_content["result"]
    assert lyon["object"] == "Lyon"
    # Errors are tool errors, in our words.
    # A server kept to one namespace has no namespace parameter: an argument naming another
    # is not in its schema and reads nina's memory still, never ann's.
    assert [f["object"] for f in foreign.structured_content["facts"]][:1] == ["Bergen"]
    assert missing.is_error and "no entity 'nobody-at-all'" in missing.content[0].text
    # A fact taken back: Bergen was wrong, it is Oslo.
    assert corrected.structured_content["conversation"].startswith("correction-")
    assert [f["object"] for f in now.structured_content["result"]] == ["Oslo"]


def test_remember_then_recall_then_forget_through_the_server(db, dsn, graph_name, server):
    reply = {
        "entities": [{"handle": "e1", "type": "Place", "mention": "Porto", "resolution": "resolved", "name": "Porto"}],
        "statements": [
            {"subject": "user", "predicate": "lives_in", "object": "e1", "quote": "I live in Porto"}
            | {"polarity": "asserted", "tense": "current"}
        ],
        "followups": [],
    }
    url, script = server({"I live in Porto.": [("json", 200, completion(json.dumps(reply)))]})
    _, (unscoped, remembered, recalled, forgotten, after) = _call(
        _server(dsn, graph_name, "--llm-url", url, "--model", "m"),
        [
            ("recall", {"question": "Where do I live?"}),
            (
                "remember",
                {"messages": [{"role": "user", "content": "I live in Porto."}], "conversation": "c1"}
                | {"namespace": "rui"},
            ),  # fmt: skip
            ("recall", {"question": "Where do I live?", "namespace": "rui"}),
            ("forget", {"namespace": "rui", "conversations": ["c1"]}),
            ("recall", {"question": "Where do I live?", "namespace": "rui"}),
        ],
    )
    assert unscoped.is_error and "name the namespace" in unscoped.content[0].text
    assert not remembered.is_error, remembered.content
    assert remembered.structured_content["status"] == "loaded" and len(script.requests) == 1
    assert [f["object"] for f in recalled.structured_content["facts"]] == ["Porto"]
    assert forgotten.structured_content == {"forgotten": ["c1"]}
    assert after.structured_content["facts"] == []
    assert run_named(db, "conversations", {"namespace": "rui"}).rows == []


def test_every_tool_parameter_is_described_and_a_scoped_server_offers_no_namespace(db, dsn, graph_name):
    """No parameter had a description (a model could not tell that valid_at is ISO-8601 or
    what a conversation is), and a server started with --namespace still offered one."""

    def schemas(params):
        async def go():
            async with Client(params) as client:
                return {t.name: t.input_schema for t in (await client.list_tools()).tools}

        return asyncio.run(go())

    for extra, scoped in (((), False), (("--namespace", "nina"), True)):
        tools = schemas(_server(dsn, graph_name, *extra))
        assert set(tools) == {
            "conversations",
            "correct",
            "entities",
            "facts",
            "forget",
            "history",
            "recall",
            "remember",
            "status",
            "ontology",
        }
        for name, schema in tools.items():
            props = schema["properties"]
            # status names the server's own namespace, and the ontology is everyone's: no namespace.
            assert ("namespace" in props) is not (scoped or name in ("status", "ontology")), (name, scoped)
            undescribed = [p for p, spec in props.items() if not spec.get("description")]
            assert undescribed == [], (name, undescribed)
        assert "ISO-8601" in tools["facts"]["properties"]["valid_at"]["description"]


def test_forget_without_conversations_wipes_nothing_unless_asked(db, dsn, graph_name):
    """forget with no arguments wiped the whole namespace without a word."""
    load_paths(db, [EXAMPLES], ONTO)
    _, (refused, after, everything, gone) = _call(
        _server(dsn, graph_name, "--namespace", "nina"),
        [
            ("forget", {}),
            ("facts", {"entity": "user"}),
            ("forget", {"everything": True}),
            ("facts", {"entity": "user"}),
        ],
    )
    assert refused.is_error and "everything=true" in refused.content[0].text
    assert after.structured_content["result"] != []
    assert sorted(everything.structured_content["forgotten"]) == ["nina-01", "nina-02", "nina-03"]
    assert gone.is_error  # no one is left to ask about


def test_recall_is_compact_and_a_model_can_list_what_is_remembered(db, dsn, graph_name):
    """recall answered about 7.8 kB of JSON where its own context was 1.3 kB; and a model had no
    way to learn the conversation ids forget takes, or who the memory knows."""
    load_paths(db, [EXAMPLES], ONTO)
    _, (recall, conversations, entities) = _call(
        _server(dsn, graph_name, "--namespace", "ann"),
        [("recall", {"question": "Where does my husband work?"}), ("conversations", {}), ("entities", {})],
    )
    answer = recall.structured_content
    assert answer["facts"] and answer["context"].startswith("[1] ")
    assert len(json.dumps(answer)) < 3 * len(answer["context"]), len(json.dumps(answer))
    assert set(answer["facts"][0]) >= {"subject", "predicate", "quote", "conversation", "message", "said_at"}
    assert not any("key" in field for fact in answer["facts"] for field in fact)
    listed = conversations.structured_content["result"]
    assert [c["conversation"] for c in listed] == ["ann-01", "ann-02", "ann-03", "ann-04"]
    assert all(c["statements"] >= 0 and c["loaded_at"] for c in listed)
    known = {e["name"]: e for e in entities.structured_content["result"]}
    assert known["user"]["type"] == "Person" and "Tom" in known and "Acme" in known


def test_bad_arguments_come_back_as_one_sentence_naming_each_argument(db, dsn, graph_name):
    """Arguments a tool's schema refuses came back as pydantic's multi-line report (with a
    link to its docs), and our own errors behind 'Error executing tool NAME:'."""
    load_paths(db, [EXAMPLES / "nina-01.json"], ONTO)
    _, results = _call(
        _server(dsn, graph_name, "--namespace", "nina"),
        [
            ("recall", {"question": 5, "k": "lots"}),
            ("forget", {"conversations": "nina-01"}),
            ("facts", {"entity": "user", "valid_at": "yesterday"}),
        ],
    )
    texts = [r.content[0].text for r in results]
    assert all(r.is_error for r in results)
    assert all("\n" not in t and "pydantic" not in t and "Error executing" not in t for t in texts), texts
    assert texts[0].startswith("recall: ") and "question should be a valid string, not 5" in texts[0]
    assert "k should be a valid integer" in texts[0]
    assert "conversations should be a valid list, not 'nina-01'" in texts[1]
    assert texts[2].startswith("facts: time 'yesterday' is not an ISO-8601 date")


def test_a_server_says_which_database_it_serves(db, dsn, graph_name):
    import psycopg

    _, (status,) = _call(_server(dsn, graph_name, "--namespace", "nina"), [("status", {})])
    parts = psycopg.conninfo.conninfo_to_dict(dsn)
    assert status.structured_content == {
        "database": f"the server at {parts['host']}:{parts['port']}, database {parts['dbname']}",
        "graph": graph_name,
        "namespace": "nina",
    }


def test_a_host_that_drops_the_environment_gets_a_refusal_not_a_new_empty_memory(tmp_path):
    """The MCP SDK starts a server with HOME, PATH, SHELL and TERM only: AGEFACTS_DSN set in the
    user's shell never reached `agefacts mcp`, which started a new, empty embedded engine,
    answered "no entity 'user'" and left that engine running. Asked for a server, it refuses."""
    import subprocess

    from mcp.client.stdio import get_default_environment

    env = get_default_environment()  # what the SDK passes when the config has no env block
    assert not any(k.startswith(("AGEFACTS_", "PG")) for k in env)
    env["HOME"] = str(tmp_path)  # no engine of the user's is touched
    run = subprocess.run(
        [sys.executable, "-m", "agefacts", "mcp", "--server-only"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2, run.stderr
    assert "--server-only: no server is named" in run.stderr and 'AGEFACTS_DSN in its "env" block' in run.stderr
    assert not (tmp_path / ".local/share/agefacts/engine.json").exists()  # no engine was started


def test_an_embedded_engine_the_server_started_is_named_and_stopped_with_it(tmp_path):
    import os

    from agefacts.engine import Engine

    from .conftest import free_port

    home = tmp_path / "home"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGEFACTS_", "PG")) or k == "AGEFACTS_CACHE"}
    env |= {"AGEFACTS_HOME": str(home), "AGEFACTS_PORT": str(port)}
    params = StdioServerParameters(command=sys.executable, args=["-m", "agefacts", "mcp"], env=env)
    _, (status,) = _call(params, [("status", {})])
    database = status.structured_content["database"]
    assert database.startswith(f"the embedded engine on port {port} (data {home / 'data'}")
    assert "started by this server and stopped with it" in database
    assert Engine(home=home).status() == {"running": False}  # not left running


def test_the_ontology_tool_lists_what_facts_may_say(db, dsn, graph_name):
    _, (got,) = _call(_server(dsn, graph_name, "--namespace", "nina"), [("ontology", {})])
    vocabulary = got.structured_content
    assert vocabulary["entity_types"] == ["Person", "Place", "Organization", "Group", "Event", "Activity"]
    lives = next(p for p in vocabulary["predicates"] if p["predicate"] == "lives_in")
    assert lives == {
        "predicate": "lives_in",
        "subject": "Person | Group",
        "object": "Place",
        "one_at_a_time": True,
        "means": "where someone lives",
    }


def test_remember_without_a_model_keeps_the_messages_and_says_facts_need_one(db, dsn, graph_name):
    _, (remembered, recalled) = _call(
        _server(dsn, graph_name, "--namespace", "rui"),
        [
            ("remember", {"conversation": "c", "messages": [{"role": "user", "content": "I live in Porto."}]}),
            ("recall", {"question": "Porto?"}),
        ],
    )
    assert not remembered.is_error, remembered.content
    got = remembered.structured_content
    assert got["status"] == "pending" and "no model" in got["errors"][0]
    assert [m["text"] for m in recalled.structured_content["messages"]] == ["I live in Porto."]


def test_correct_brings_a_value_never_mentioned_and_facts_speak_as_recall_does(db, dsn, graph_name):
    """instead: "Bath" failed ("no entity 'Bath'") unless Bath had been mentioned; facts with
    "my partner" failed where the mention was "my partner Alex", pointing a model at a command
    line; the correction read as the user's own words; facts sent keys and offsets."""
    from agefacts.load import Loader

    from ..helpers import claim, conversation, user_turn

    alex = {"handle": "e1", "type": "Person", "mention": "my partner Alex", "resolution": "resolved", "name": "Alex"}
    alex["attrs"] = {"rel": "partner_of:user"}
    bristol = {"handle": "e2", "type": "Place", "mention": "Bristol", "resolution": "resolved", "name": "Bristol"}
    said = conversation(
        "c1",
        [
            user_turn(
                "My partner Alex lives in Bristol.",
                "2025-01-02T10:00:00Z",
                entities=[alex, bristol],
                statements=[
                    claim("user", "partner_of", "My partner Alex", obj="e1"),
                    claim("e1", "lives_in", "lives in Bristol", obj="e2"),
                ],
            )
        ],
        namespace="rui",
    )
    assert Loader(db, ONTO).load(said).status == "loaded"
    _, (partner, nobody, fixed, now, recalled) = _call(
        _server(dsn, graph_name, "--namespace", "rui"),
        [
            ("facts", {"entity": "my partner"}),
            ("facts", {"entity": "Nobody At All"}),
            (
                "correct",
                {"entity": "Alex", "predicate": "lives_in", "said": "Bristol", "by": "assistant", "instead": "Bath"},
            ),
            ("facts", {"entity": "Alex"}),
            ("recall", {"question": "Where does Alex live? Bristol?"}),
        ],
    )
    assert not partner.is_error, partner.content
    assert [f["object"] for f in partner.structured_content["result"] if f["predicate"] == "lives_in"] == ["Bristol"]
    assert all(set(f) <= {"subject", "predicate", "object", "value", "valid_from", "valid_until", "recorded_at",
                          "recurrence", "quote", "conversation", "message", "said_at"} for f in partner.structured_content["result"])  # fmt: skip
    assert nobody.is_error and "the entities tool lists them" in nobody.content[0].text
    assert "agefacts query" not in nobody.content[0].text
    assert not fixed.is_error, fixed.content
    assert [f["object"] for f in now.structured_content["result"] if f["predicate"] == "lives_in"] == ["Bath"]
    assert "user said" not in recalled.structured_content["context"]
