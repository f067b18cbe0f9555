"""The extractor against a real local HTTP server that serves recorded completions."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from agefacts.cli import main
from agefacts.errors import ExtractionError
from agefacts.extract import extract_all, parse_reply
from agefacts.model_client import LLMClient
from agefacts.models import Conversation
from agefacts.ontology import default_ontology

from ..llm_server import REPLY_LYON, completion


def conv(cid: str, *texts: str) -> Conversation:
    turns = []
    for i, t in enumerate(texts):
        turns.append({"speaker": "user", "text": t, "at": f"2026-01-01T10:0{i}:00Z"})
        turns.append({"speaker": "assistant", "text": "I see.", "at": f"2026-01-01T10:0{i}:05Z"})
    return Conversation.model_validate({"id": cid, "namespace": "t", "turns": turns})


def run(url, convs, **kw):
    async def go():
        async with LLMClient(url, "test-model", api_key="sk-secret-123", backoff=0.01, **kw) as client:
            return await extract_all(client, convs, default_ontology(), concurrency=3)

    return asyncio.run(go())


def test_fenced_json_is_read_and_the_request_carries_the_schema_and_context(server):
    fenced = "Sure! Here you go:\n```json\n" + json.dumps(REPLY_LYON) + "\n```\nAnything else?"
    url, script = server({"I live in Lyon.": [("json", 200, completion(fenced))]})
    (out,) = run(url, [conv("a", "Hello there.", "I live in Lyon.")])
    assert out.errors == []
    turn = out.conversation.turns[2]
    assert turn.recorded.statements[0].predicate == "lives_in"
    assert out.conversation.model == "test-model-1"
    req = script.requests[-1]
    assert req["response_format"]["type"] == "json_schema"
    assert (
        "lives_in"
        in req["response_format"]["json_schema"]["schema"]["properties"]["statements"]["items"]["properties"][
            "predicate"
        ]["enum"]
    )
    # Prior turns are context for the next one.
    assert "user: Hello there." in req["messages"][-1]["content"]
    assert script.headers[-1]["Authorization"] == "Bearer sk-secret-123"


def test_known_handles_are_sent_with_later_turns(server):
    url, script = server({"I live in Lyon.": [("json", 200, completion(json.dumps(REPLY_LYON)))]})
    run(url, [conv("a", "I live in Lyon.", "It rains a lot.")])
    last = script.requests[-1]["messages"][-1]["content"]
    assert "Known entities (reuse these handles):\n- e1 (Place)" in last


def test_invalid_enum_values_become_invalid_items_not_failures(server):
    bad = json.loads(json.dumps(REPLY_LYON))
    bad["statements"].append(
        {
            "subject": "user",
            "predicate": "lives_in",
            "object": "e1",
            "quote": "Lyon",
            "polarity": "definitely",
            "tense": "current",
        }
    )
    url, _ = server({"I live in Lyon.": [("json", 200, completion(json.dumps(bad)))]})
    (out,) = run(url, [conv("a", "I live in Lyon.")])
    rec = out.conversation.turns[0].recorded
    assert len(rec.statements) == 1
    (inv,) = rec.invalid
    assert inv.kind == "statement" and "polarity" in inv.reason


def test_429_then_success_is_retried(server):
    url, script = server(
        {
            "I live in Lyon.": [
                ("json", 429, {"error": "slow down"}, {"Retry-After": "0"}),
                ("json", 200, completion(json.dumps(REPLY_LYON))),
            ]
        }
    )
    (out,) = run(url, [conv("a", "I live in Lyon.")])
    assert out.errors == [] and len(script.requests) == 2


def test_a_timeout_is_retried_and_then_reported_for_its_turn_only(server):
    url, script = server({"slow": [("sleep", 1.0)]})
    (out,) = run(url, [conv("a", "slow", "quick")], timeout=0.2, retries=1)
    assert len(out.errors) == 1 and "turn 0" in out.errors[0] and "no answer within" in out.errors[0]
    assert out.conversation.turns[0].error and out.conversation.turns[0].recorded is None
    assert out.conversation.turns[2].recorded is not None
    asked = [r["messages"][-1]["content"].split("Message to extract from:\n")[1] for r in script.requests]
    assert sum(1 for a in asked if a.startswith("slow")) == 2


def test_a_malformed_reply_is_a_per_turn_error_while_other_conversations_finish(server):
    url, _ = server(
        {
            "broken": [("json", 200, completion("I'm sorry, I can't help with that."))],
            "I live in Lyon.": [("json", 200, completion(json.dumps(REPLY_LYON)))],
        }
    )
    outs = run(url, [conv("bad", "broken"), conv("good", "I live in Lyon."), conv("good2", "I live in Lyon.")])
    by_id = {o.conversation.id: o for o in outs}
    assert "holds no JSON object" in by_id["bad"].errors[0]
    assert by_id["good"].errors == [] and by_id["good2"].errors == []
    assert by_id["good"].conversation.turns[0].recorded.statements


def test_a_refusal_is_not_retried_and_the_key_is_never_shown(server):
    url, script = server({"x": [("json", 401, {"error": "bad key"})]})
    (out,) = run(url, [conv("a", "x")])
    assert "refused the request: HTTP 401" in out.errors[0]
    assert "sk-secret-123" not in out.errors[0]
    assert len(script.requests) == 1


def test_conversations_run_concurrently_up_to_the_limit(server):
    url, script = server({f"slow {i}": [("sleep", 0.3)] for i in range(6)})
    outs = run(url, [conv(f"c{i}", f"slow {i}") for i in range(6)])  # concurrency=3
    assert all(o.errors == [] for o in outs)
    # Several at once, and never more than the limit.
    assert script.most_in_flight == 3


def test_parse_reply_rejects_prose():
    with pytest.raises(ExtractionError, match="no JSON object"):
        parse_reply("nothing here")


def test_extract_command_records_replayable_conversations(server, tmp_path, monkeypatch, capsys):
    url, _ = server({"I live in Lyon.": [("json", 200, completion(json.dumps(REPLY_LYON)))]})
    src = tmp_path / "in.jsonl"
    src.write_text(
        conv("a", "I live in Lyon.").model_dump_json() + "\n" + conv("b", "I live in Lyon.").model_dump_json() + "\n"
    )
    monkeypatch.setenv("AGEFACTS_LLM_API_KEY", "sk-secret-123")
    out = tmp_path / "out"
    assert main(["extract", str(src), "--out", str(out), "--llm-url", url, "--model", "m"]) == 0
    captured = capsys.readouterr()
    assert "sk-secret-123" not in captured.out + captured.err
    (name_a,) = [p.name for p in out.iterdir() if p.name.startswith("t--a-")]
    recorded = json.loads((out / name_a).read_text())
    assert recorded["model"] == "test-model-1"
    assert recorded["turns"][0]["recorded"]["statements"][0]["quote"] == "I live in Lyon"
    # The recording grades and compiles with no network.
    assert main(["compile", str(out / name_a)]) == 0
    assert "lives_in" in capsys.readouterr().out


def test_recordings_of_different_conversations_never_share_a_file(server, tmp_path, capsys):
    from agefacts.recordings import recording_name

    url, _ = server({"I live in Lyon.": [("json", 200, completion(json.dumps(REPLY_LYON)))]})
    ids = ["trip/2023", "trip_2023", "trip:2023", "é" * 200]
    convs = [conv(i, "I live in Lyon.") for i in ids]
    other_ns = conv("trip/2023", "I live in Lyon.").model_copy(update={"namespace": "u"})
    src = tmp_path / "in.jsonl"
    src.write_text("".join(c.model_dump_json() + "\n" for c in [*convs, other_ns]))
    out = tmp_path / "out"
    assert main(["extract", str(src), "--out", str(out), "--llm-url", url, "--model", "m"]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert len(names) == 5 and names == sorted(recording_name(c) for c in [*convs, other_ns])
    assert all(len(n.encode()) < 200 and n.startswith(("t--trip_2023-", "u--trip_2023-", "t--ééé")) for n in names)
    assert "extracted 5 conversation(s)" in capsys.readouterr().out


def test_the_summary_counts_turns_and_a_run_whose_turns_all_failed_says_so(server, tmp_path, capsys):
    url, _ = server({"x": [("json", 401, {"error": "bad key"})], "y": [("json", 401, {"error": "bad key"})]})
    src = tmp_path / "in.jsonl"
    src.write_text(conv("a", "x", "y").model_dump_json() + "\n")
    assert main(["extract", str(src), "--out", str(tmp_path / "out"), "--llm-url", url, "--model", "m"]) == 1
    assert "0 user turn(s) recorded, 2 failed" in capsys.readouterr().out


def test_a_rerun_asks_only_for_turns_not_yet_recorded_and_keeps_the_others_byte_for_byte(server, tmp_path, capsys):
    from agefacts.recordings import recording_name

    lyon = [("json", 200, completion(json.dumps(REPLY_LYON)))]
    url, script = server({"I live in Lyon.": lyon, "flaky": [("json", 401, {"error": "no"}), *lyon]})
    out = tmp_path / "out"

    def extract(c, *extra: str) -> str:
        src = tmp_path / "in.jsonl"
        src.write_text(c.model_dump_json() + "\n")
        main(["extract", str(src), "--out", str(out), "--llm-url", url, "--model", "m", *extra])
        return capsys.readouterr().out

    first = conv("a", "I live in Lyon.", "flaky", "hello")
    said = extract(first)
    assert len(script.requests) == 3 and "2 user turn(s) recorded, 1 failed, 0 kept" in said
    path = out / recording_name(first)
    before = path.read_bytes()
    # Again: only the turn that failed is sent; the recorded ones stay as they were.
    said = extract(first)
    assert len(script.requests) == 4 and "1 user turn(s) recorded, 0 failed, 2 kept" in said
    after = json.loads(path.read_text())
    assert json.loads(before)["turns"][0] == after["turns"][0] and after["turns"][2].get("error") is None
    # Nothing left to ask: nothing is sent and the file does not change.
    settled = path.read_bytes()
    assert "0 user turn(s) recorded, 0 failed, 3 kept" in extract(first)
    assert len(script.requests) == 4 and path.read_bytes() == settled
    # A conversation that grew: only its new turn is sent.
    grown = conv("a", "I live in Lyon.", "flaky", "hello", "I live in Lyon.")
    assert "1 user turn(s) recorded, 0 failed, 3 kept" in extract(grown)
    assert len(script.requests) == 5
    # --redo asks for every turn again.
    assert "4 user turn(s) recorded, 0 failed, 0 kept" in extract(grown, "--redo")
    assert len(script.requests) == 9


def test_a_request_waiting_out_a_backoff_leaves_its_place_to_another_conversation(server):
    # One place for requests; A's first turn is told to come back in a second. B's turns run
    # in that second, rather than waiting behind A's backoff.
    lyon = ("json", 200, completion(json.dumps(REPLY_LYON)))
    url, script = server(
        {
            "a1": [("json", 429, {"error": "slow down"}, {"Retry-After": "1"}), lyon],
            "a2": [lyon],
            "b1": [lyon],
            "b2": [lyon],
        }
    )

    async def go():
        async with LLMClient(url, "m", backoff=0.01, concurrency=1) as client:
            return await extract_to(client, [conv("a", "a1", "a2"), conv("b", "b1", "b2")], default_ontology(), out, 1)

    import tempfile
    from pathlib import Path

    from agefacts.extract import extract_to

    out = Path(tempfile.mkdtemp())
    outs = asyncio.run(go())
    assert all(o.errors == [] for o in outs)
    said = [
        r["messages"][-1]["content"].split("Message to extract from:\n", 1)[1].split("\n", 1)[0]
        for r in script.requests
    ]
    assert said == ["a1", "b1", "b2", "a1", "a2"] and script.most_in_flight == 1


def test_help_shows_the_real_defaults(capsys):
    import pytest as _pytest

    with _pytest.raises(SystemExit):
        main(["extract", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "here http://127.0.0.1:8080/v1" in text and "(default 120)" in text and "(default 4)" in text
    from agefacts.extract import DEFAULT_CONTEXT_TURNS

    assert f"each request (default {DEFAULT_CONTEXT_TURNS};" in text


def test_a_dead_endpoint_stops_the_run_before_any_turn(tmp_path, capsys):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once it is closed
    src = tmp_path / "in.jsonl"
    src.write_text(conv("a", "I live in Lyon.").model_dump_json() + "\n")
    out = tmp_path / "out"
    assert (
        main(["extract", str(src), "--out", str(out), "--llm-url", f"http://127.0.0.1:{port}/v1", "--model", "m"]) == 1
    )
    err = capsys.readouterr().err
    assert f"nothing answers at http://127.0.0.1:{port}/v1/chat/completions" in err and "Traceback" not in err
    assert not out.exists() or not any(out.iterdir())


def test_each_request_carries_a_bounded_context_and_every_known_entity(server):
    from agefacts.extract import DEFAULT_CONTEXT_TURNS

    texts = [f"turn number {i}." for i in range(9)]
    url, script = server({})
    (out,) = run(url, [conv("long", "I live in Lyon.", *texts)])
    assert out.errors == []
    last = script.requests[-1]["messages"][-1]["content"]
    context = last.split("Conversation so far:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(context) == DEFAULT_CONTEXT_TURNS and context[-1] == "assistant: I see."
    assert "turn number 0." not in last and "turn number 7." in last
    sizes = [len(json.dumps(r)) for r in script.requests]
    assert max(sizes[5:]) < 1.1 * min(sizes[5:])  # once the budget is full it no longer grows


def test_a_killed_run_keeps_every_conversation_it_finished_and_a_rerun_pays_only_for_the_rest(server, tmp_path):
    import os
    import signal
    import subprocess
    import sys

    from agefacts.models import Conversation

    url, script = server({f"slow {i}": [("sleep", 0.15)] for i in range(24)})
    convs = [conv(f"c{i}", f"slow {2 * i}", f"slow {2 * i + 1}") for i in range(12)]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(c.model_dump_json() + "\n" for c in convs))
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "agefacts", "extract", str(src), "--out", str(out), "--llm-url", url, "--model", "m"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([*argv, "--concurrency", "2"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(list(out.glob("*.json"))) < 3:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    done = sorted(out.glob("*.json"))
    assert 3 <= len(done) < 12
    for path in done:  # every file there is a whole conversation, every user turn recorded
        recorded = Conversation.model_validate_json(path.read_text())
        assert all(t.recorded is not None for t in recorded.turns if t.speaker == "user")
    sent = len(script.requests)
    journaled = sum(1 for p in out.glob("*.journal") for line in p.read_text().splitlines() if _whole(line))
    rerun = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    # Only the turns not yet answered are asked for again: those of the conversations not
    # written, less what their journals kept.
    assert len(script.requests) - sent == 2 * (12 - len(done)) - journaled
    assert len(list(out.glob("*.json"))) == 12 and not list(out.glob("*.journal"))


def _whole(line: str) -> bool:
    """A journal line written whole (the last line of a killed run may be cut off)."""
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def test_progress_counts_the_turns_to_send_those_sent_and_those_that_failed(server, tmp_path):
    from agefacts.extract import extract_to
    from agefacts.recordings import write_recording

    lyon = [("json", 200, completion(json.dumps(REPLY_LYON)))]
    url, script = server({"I live in Lyon.": lyon, "refused": [("json", 400, {"error": "no"})]})
    done_before = conv("old", "I live in Lyon.")
    (recorded,) = run(url, [done_before])
    write_recording(recorded.conversation, tmp_path)  # an earlier run's file: resumed, not sent
    seen = []

    async def go():
        async with LLMClient(url, "test-model", backoff=0.01, retries=0) as client:
            return await extract_to(
                client,
                [done_before, conv("a", "I live in Lyon.", "refused", "Hello.")],
                default_ontology(),
                tmp_path,
                progress=lambda p: seen.append((p.done, p.total, p.failed, p.line())),
            )

    asyncio.run(go())
    assert len(script.requests) == 1 + 3
    assert [(d, t, f) for d, t, f, _ in seen] == [(1, 3, 0), (2, 3, 1), (3, 3, 1)]
    assert seen[-1][3].startswith("extract: 3/3 turns, 1 failed, ")


def test_extraction_keeps_eight_requests_in_flight_at_concurrency_eight(capsys):
    """At concurrency 8, eight requests are with the endpoint at once, every time: the local
    endpoint answers none until eight are waiting (a barrier), so a client that kept fewer in
    flight would stall and fail here, whatever the machine's load. (This was a timed test: a
    mean of at least 6 in flight, which a busy machine failed; speed is agefacts bench's.)"""
    import threading

    from agefacts.fake_model import FakeModel

    gathered = threading.Barrier(8, timeout=30)

    def answer(body):
        gathered.wait()  # raises, and fails the request, when fewer than eight ever gather
        return 200, completion(json.dumps(_EMPTY)), {}

    convs = [conv(f"c{i}", "one.", "two.", "three.") for i in range(16)]

    async def go():
        async with LLMClient(model.url, "m", backoff=0.01, retries=0) as client:
            return await extract_all(client, convs, default_ontology(), concurrency=8)

    with FakeModel(answer) as model:
        outcomes = asyncio.run(go())
    assert [e for o in outcomes for e in o.errors] == []
    assert model.most_in_flight == 8 and len(model.requests) == 48 and not gathered.broken
    assert main(["bench-extract", "--conversations", "4", "--turns", "2", "--latency", "0", "--concurrency", "2"]) == 0
    out = capsys.readouterr().out
    assert "user turns: 8 (4 conversations)" in out and out.splitlines()[-1].split()[0] == "2"


# -- replies as real model servers give them --------------------------------------------------------
_EMPTY = {"entities": [], "statements": [], "followups": []}


@pytest.mark.parametrize(
    "reply",
    [
        # A reasoning model thinks aloud first, braces and all.
        '<think>The user says {"entities": ...}; Lyon is a {Place}.</think>\n' + json.dumps(REPLY_LYON),
        "<think>\nfirst {draft}\n</think>\n```json\n" + json.dumps(REPLY_LYON) + "\n```",
        # Prose with braces around the object.
        "Here is the {result} you asked for: " + json.dumps(REPLY_LYON) + "\nNote: {none}",
        # A schema-shaped example first, then the answer: the answer is the last object.
        "The format is " + json.dumps(_EMPTY) + ". Answer: " + json.dumps(REPLY_LYON),
    ],
)
def test_the_extraction_is_found_in_what_real_model_servers_reply(reply):
    proposal = parse_reply(reply)
    assert [s.predicate for s in proposal.statements] == ["lives_in"]
    assert [e.name for e in proposal.entities] == ["Lyon"]


@pytest.mark.parametrize("opening", ["<think>", ""])
def test_a_draft_in_the_thinking_is_not_the_answer(opening):
    """The thinking may hold a whole draft; the answer after it is what counts, also when the
    server stripped the opening tag and left only the closing one."""
    nothing = json.dumps({"entities": [], "statements": [], "followups": []})
    reply = opening + "Draft: " + json.dumps(REPLY_LYON) + " but Lyon is not said.</think>\n" + nothing
    proposal = parse_reply(reply)
    assert proposal.statements == [] and proposal.entities == []
    # An empty object after the thinking is no answer at all: not "states nothing".
    with pytest.raises(ExtractionError, match="no extraction"):
        parse_reply(opening + "Draft: " + json.dumps(REPLY_LYON) + "</think>\n{}")


@pytest.mark.parametrize(
    "reply, why",
    [
        ("<think>I am still thinking about {the user", "no JSON object"),
        ('{"entities": [', "does not parse"),
        ("[1, 2]", "no JSON object"),
        # Cut off inside its statements: only an inner object (an entity) is whole, which is
        # no extraction; it was recorded as "states nothing" and never asked again.
        (
            '{"entities": [{"handle": "e1", "type": "Person", "mention": "Caroline", "resolution": "resolved", '
            '"name": "Caroline"}], "statements": [{"subj',
            "no extraction.*cut off",
        ),
        ('{"note": 1}', "no extraction"),
    ],
)
def test_a_reply_without_a_whole_extraction_says_what_it_holds(reply, why):
    with pytest.raises(ExtractionError, match=why):
        parse_reply(reply)


def test_a_reply_whose_content_comes_in_parts_is_read(server):
    parts = [{"type": "text", "text": "```json\n"}, {"type": "text", "text": json.dumps(REPLY_LYON) + "\n```"}]
    body = completion("")
    body["choices"][0]["message"]["content"] = parts
    url, _ = server({"I live in Lyon.": [("json", 200, body)]})
    (out,) = run(url, [conv("a", "I live in Lyon.")])
    assert out.errors == []
    assert out.conversation.turns[0].recorded.statements[0].predicate == "lives_in"


def test_a_server_that_refuses_response_format_is_asked_again_without_it():
    """Some OpenAI-compatible servers answer 400 to a json_schema response_format they do not
    support: the client asks again without it, once, and no longer sends it."""
    from agefacts.fake_model import FakeModel

    def answer(body):
        if "response_format" in body:
            return 400, {"error": {"message": "response_format json_schema is not supported"}}, {}
        return 200, completion(json.dumps(REPLY_LYON)), {}

    with FakeModel(answer) as model:
        outs = run(model.url, [conv("a", "I live in Lyon.", "Still in Lyon.")], retries=0)
        refused = [r for r in model.requests if "response_format" in r]
    assert outs[0].errors == []
    assert outs[0].conversation.turns[0].recorded.statements[0].predicate == "lives_in"
    assert len(refused) == 1  # the fault happened, once
    assert len(model.requests) == 3


def test_a_400_about_something_else_is_still_a_refusal(server):
    url, script = server({"x": [("json", 400, {"error": {"message": "model not found"}})]})
    (out,) = run(url, [conv("a", "x")])
    assert "refused the request: HTTP 400" in out.errors[0]
    assert len(script.requests) == 1


def test_an_error_sent_with_status_200_is_retried(server):
    """Some gateways pass an upstream failure on as HTTP 200 with an error object and no
    choices: it is retried like a 503, and named if it lasts."""
    busy = ("json", 200, {"error": {"message": "upstream overloaded", "code": 503}})
    url, script = server({"I live in Lyon.": [busy, ("json", 200, completion(json.dumps(REPLY_LYON)))], "x": [busy]})
    outs = run(url, [conv("a", "I live in Lyon."), conv("b", "x")], retries=2)
    by_id = {o.conversation.id: o for o in outs}
    assert by_id["a"].errors == []
    assert by_id["a"].conversation.turns[0].recorded.statements[0].predicate == "lives_in"
    assert "failed after 3 attempts" in by_id["b"].errors[0] and "upstream overloaded" in by_id["b"].errors[0]
    asked = [r["messages"][-1]["content"] for r in script.requests]
    assert (
        sum("I live in Lyon." in a for a in asked) == 2
        and sum(a.endswith("x\n\nReply with the JSON object only.") for a in asked) == 3
    )


def test_a_recording_holding_any_invalid_item_reads_back(tmp_path):
    """What a model got wrong is kept as invalid items, whatever it was, null included: the
    recording is written without nulls, so a null item came back missing and the file
    `extract` wrote could not be loaded ("invalid.2.item: Field required")."""
    from agefacts.inputs import read_conversations
    from agefacts.recordings import write_recording

    reply = json.dumps(
        {"entities": "nope", "statements": [{"subject": 5, "object": None}, None], "followups": [None, 7, {"gap": 1}]}
    )
    proposal = parse_reply(reply)
    assert len(proposal.invalid) == 6
    c = conv("bad-items", "I live in Lyon.")
    turns = list(c.turns)
    turns[0] = turns[0].model_copy(update={"recorded": proposal})
    path = write_recording(c.model_copy(update={"turns": turns}), tmp_path)
    ((_, back),) = list(read_conversations([path]))
    assert isinstance(back, Conversation), back
    assert [i.item for i in back.turns[0].recorded.invalid] == [i.item for i in proposal.invalid]


def test_a_user_turn_without_a_time_is_not_paid_for(server):
    """A statement's known time is its message's time, so what a model reads from a user turn
    with no 'at' cannot be kept: such a turn is not sent (it was sent, paid for, and its reply
    dropped, on every run again), and its error says what to add."""
    url, script = server({"I live in Lyon.": [("json", 200, completion(json.dumps(REPLY_LYON)))]})
    c = Conversation.model_validate(
        {
            "id": "undated",
            "namespace": "t",
            "turns": [
                {"speaker": "user", "text": "I live in Lyon."},
                {"speaker": "user", "text": "I live in Lyon.", "at": "2026-01-01T10:00:00Z"},
            ],
        }
    )
    (out,) = run(url, [c])
    assert len(script.requests) == 1  # the dated turn only
    assert len(out.errors) == 1 and "turn 0" in out.errors[0] and "add 'at'" in out.errors[0]
    assert out.conversation.turns[0].recorded is None and out.conversation.turns[1].recorded.statements
    run(url, [out.conversation])
    assert len(script.requests) == 1  # a rerun pays for it no more than the first run


# -- an endpoint that stopped answering --------------------------------------------------------------
def test_an_endpoint_that_keeps_failing_is_no_longer_asked(server):
    """A model server that fails every request (down behind a proxy that answers 503, or
    hung) cost every remaining turn all its retries, for hours; after ``give_up_after``
    requests in a row have failed after all their attempts, it is not asked again for a
    while, and the turns not asked stay unrecorded, for the next run."""
    url, script = server({})
    script.steps = {t: [("json", 503, {"error": "down"})] for t in ("a", "b", "c", "d", "e", "f")}

    async def go():
        async with LLMClient(url, "m", backoff=0.01, retries=1, give_up_after=2) as client:
            outs = await extract_all(
                client, [conv("x", "a", "b", "c"), conv("y", "d", "e", "f")], default_ontology(), concurrency=1
            )
            return client, outs

    client, outs = asyncio.run(go())
    assert len(script.requests) == 4  # two turns, two attempts each
    assert client.down is not None and "failed 2 requests in a row" in client.down
    errors = [e for o in outs for e in o.errors]
    assert len(errors) == 2 and "HTTP 503" in errors[0] and "failed 2 requests in a row" in errors[1]
    # The turns not asked have neither a recording nor an error: the next run asks them.
    unasked = [t for o in outs for t in o.conversation.turns if t.speaker == "user" and t.error is None]
    assert len(unasked) == 4 and all(t.recorded is None for t in unasked)


def test_a_failing_endpoint_is_asked_again_after_a_while_and_a_success_forgets_the_failures(server):
    url, script = server({"a": [("json", 503, {"error": "down"}), ("json", 200, completion(json.dumps(REPLY_LYON)))]})

    async def go():
        async with LLMClient(url, "m", backoff=0.01, retries=0, give_up_after=1, cool_down=0.2) as client:
            with pytest.raises(ExtractionError, match="HTTP 503"):
                await client.complete([{"role": "user", "content": "Message to extract from:\na\n\nReply with"}])
            assert client.down is not None
            with pytest.raises(ExtractionError, match="in a row"):  # not asked
                await client.complete([{"role": "user", "content": "Message to extract from:\na\n\nReply with"}])
            await asyncio.sleep(0.25)
            await client.complete([{"role": "user", "content": "Message to extract from:\na\n\nReply with"}])
            return client

    client = asyncio.run(go())
    assert len(script.requests) == 2 and client.down is None


def test_the_extract_command_stops_on_an_endpoint_that_keeps_failing(server, tmp_path, capsys):
    url, script = server({})
    texts = [f"t{i}" for i in range(8)]
    script.steps = {t: [("json", 503, {"error": "down"})] for t in texts}
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(conv(f"c{i}", t).model_dump_json() for i, t in enumerate(texts)) + "\n")
    argv = ["extract", str(src), "--out", str(tmp_path / "out"), "--llm-url", url, "--model", "m", "--retries", "0"]
    assert main([*argv, "--concurrency", "1"]) == 1
    err = capsys.readouterr().err
    assert len(script.requests) == 3  # the default: three requests in a row
    assert err.count("stopped asking") == 1 and "the same command again" in err


def test_a_blank_user_turn_states_nothing_and_is_not_sent(server):
    url, script = server({"I live in Lyon.": [("json", 200, completion(json.dumps(REPLY_LYON)))]})
    (out,) = run(url, [conv("blank", " \n\t", "", "I live in Lyon.")])
    assert len(script.requests) == 1 and out.errors == []
    blank = [t for t in out.conversation.turns if t.speaker == "user"][:2]
    assert all(t.recorded is not None and not t.recorded.statements and t.error is None for t in blank)


def test_a_turn_asked_again_sees_every_handle_the_recording_holds(server):
    """A turn asked again (it failed) was sent only the entities of the turns before it, so a
    handle a later turn had declared (e1, Tom) could be given again to someone else, and the
    two were merged: one person's name replaced another's."""
    tom = {
        "entities": [{"handle": "e1", "type": "Person", "mention": "Tom", "resolution": "resolved", "name": "Tom"}],
        "statements": [],
        "followups": [],
    }
    url, script = server({"flaky": [("json", 200, completion(json.dumps(REPLY_LYON)))]})
    c = conv("a", "flaky", "Tom called.")
    turns = [t.model_dump() for t in c.turns]
    turns[0]["error"] = "the reply was cut off"
    turns[2]["recorded"] = tom
    c = Conversation.model_validate({**c.model_dump(), "turns": turns})
    (out,) = run(url, [c])
    assert out.errors == [] and len(script.requests) == 1
    prompt = "\n".join(m["content"] for m in script.requests[0]["messages"])
    assert "Known entities" in prompt and "e1" in prompt and "Tom" in prompt


@pytest.mark.slow
def test_a_run_killed_inside_a_long_conversation_loses_only_the_request_in_flight(tmp_path):
    """Recordings were written only when a whole conversation was done: a kill 30 s into
    LoCoMo's conversations (about 294 user turns each) lost 2,067 answered turns. Each
    answered turn now goes to a journal beside the output at once; the rerun reads it."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from agefacts.fake_model import FakeModel
    from agefacts.recordings import recording_name

    nothing = json.dumps({"entities": [], "statements": [], "followups": []})
    turns = []
    for i in range(60):
        turns.append({"speaker": "user", "text": f"message {i}", "at": f"2026-01-01T10:{i:02d}:00Z"})
        turns.append({"speaker": "assistant", "text": "I see.", "at": f"2026-01-01T10:{i:02d}:05Z"})
    long = Conversation.model_validate({"id": "long", "namespace": "t", "turns": turns})
    src = tmp_path / "long.json"
    src.write_text(long.model_dump_json(exclude_none=True))
    out = tmp_path / "out"
    with FakeModel(lambda body: (200, completion(nothing), {}), latency=0.05) as model:
        command = [sys.executable, "-m", "agefacts", "extract", str(src), "--out", str(out)]
        command += ["--llm-url", model.url, "--model", "m", "--concurrency", "1"]
        run = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while len(model.requests) < 20 and time.monotonic() < deadline and run.poll() is None:
            time.sleep(0.01)
        os.kill(run.pid, signal.SIGKILL)
        run.wait()
        assert run.returncode == -signal.SIGKILL  # it was killed, not finished
        asked_before = len(model.requests)
        assert 20 <= asked_before < 60
        assert not (out / recording_name(long)).exists()
        journal = out / (recording_name(long) + ".journal")
        kept = sum(1 for line in journal.read_text().splitlines() if _whole(line))
        assert kept >= asked_before - 1  # at most the request in flight is lost
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        assert f"{60 - kept} user turn(s) recorded, 0 failed, {kept} kept" in done.stdout, done.stdout
        assert len(model.requests) - asked_before == 60 - kept
    whole = Conversation.model_validate_json((out / recording_name(long)).read_text())
    assert all(t.recorded is not None for t in whole.turns if t.speaker == "user")
    assert not journal.exists()


def test_a_reply_the_server_says_was_cut_off_is_the_turns_error_whatever_it_parses_to(server):
    """finish_reason 'length' was ignored: a cut reply that opened with an example extraction
    parsed, and the turn was recorded as stating nothing."""
    body = completion('{"entities": [], "statements": [], "followups": []} Now the message: {"entities": [{"han')
    body["choices"][0]["finish_reason"] = "length"
    url, script = server({"I live in Lyon.": [("json", 200, body)]})
    (out,) = run(url, [conv("a", "I live in Lyon.")])
    turn = out.conversation.turns[0]
    assert turn.recorded is None
    assert "cut off at its length limit (finish_reason 'length')" in (turn.error or ""), turn
    assert len(out.errors) == 1


def test_the_turns_not_asked_are_those_still_waiting_not_those_recorded_before():
    """ "N user turns were not asked" counted the turns earlier runs had recorded, in the
    conversations a stopped run never began (LoCoMo: 1,755 when 21 were waiting)."""
    from agefacts.extract import ConversationOutcome, unasked_turns

    empty = {"entities": [], "statements": [], "followups": []}

    def with_recorded(c, keep):
        return c.model_copy(
            update={"turns": [t.model_copy(update={"recorded": empty}) if t.text in keep else t for t in c.turns]}
        )

    begun = with_recorded(conv("a", "x1", "x2", "x3"), {"x1"})  # x1 recorded now, x2 failed, x3 not reached
    begun = begun.model_copy(
        update={"turns": [t.model_copy(update={"error": "HTTP 500"}) if t.text == "x2" else t for t in begun.turns]}
    )
    never = with_recorded(conv("b", "b1", "b2", "b3", "b4"), {"b1", "b2", "b3"})  # one waits, three recorded before
    outcomes = [
        ConversationOutcome(begun, ["HTTP 500"], recorded=1, failed=1),
        ConversationOutcome(never, [], asked=False),
    ]
    assert unasked_turns(outcomes) == 2  # x3 and b4


def test_a_run_that_stops_early_keeps_the_errors_of_the_turns_it_did_not_reach(server, tmp_path, capsys):
    """A first run left five errors; a second stopped early (the endpoint judged down) and
    wrote the turns it did not reach with neither a recording nor an error, so a load counted
    fewer failed turns than there were."""
    # Each turn refused at first (every turn fails, none judges the endpoint down), then 500s
    # (three in a row and the second run stops).
    url, _ = server({f"x{i}": [("json", 400, {"error": "no"}), ("json", 500, {"error": "down"})] for i in range(1, 6)})
    src = tmp_path / "in.jsonl"
    src.write_text(conv("a", "x1", "x2", "x3", "x4", "x5").model_dump_json() + "\n")
    out = tmp_path / "out"
    argv = ["extract", str(src), "--out", str(out), "--llm-url", url, "--model", "m", "--retries", "0"]
    for _ in range(2):
        main(argv)
    capsys.readouterr()
    (recording,) = [json.loads(p.read_text()) for p in out.iterdir() if p.suffix == ".json"]
    users = [t for t in recording["turns"] if t["speaker"] == "user"]
    assert all(t.get("error") for t in users), [(t["text"], t.get("error")) for t in users]


def test_turns_behind_three_always_failing_turns_are_asked(server, tmp_path, capsys):
    """Three turns that always fail, then "I live in Lyon.": each run asked the three again
    first, judged the endpoint down after them, and never asked the fourth (9 requests in three
    runs, none for Lyon)."""
    down = [("json", 500, {"error": "down"})]
    lyon = [("json", 200, completion(json.dumps(REPLY_LYON)))]
    url, script = server({"bad1": down, "bad2": down, "bad3": down, "I live in Lyon.": lyon})
    src = tmp_path / "in.jsonl"
    # A first run (another day) asked the three and recorded their failures.
    failed_before = conv("a", "bad1", "bad2", "bad3", "I live in Lyon.")
    failed_before = failed_before.model_copy(
        update={
            "turns": [
                t.model_copy(update={"error": "HTTP 500"}) if t.text.startswith("bad") else t
                for t in failed_before.turns
            ]
        }
    )
    src.write_text(failed_before.model_dump_json() + "\n")
    out = tmp_path / "out"
    main(["extract", str(src), "--out", str(out), "--llm-url", url, "--model", "m", "--retries", "0"])
    capsys.readouterr()
    asked = [r["messages"][-1]["content"] for r in script.requests]
    assert any(":\nI live in Lyon.\n" in m for m in asked)
    (recording,) = [json.loads(p.read_text()) for p in out.iterdir() if p.suffix == ".json"]
    lyon_turn = next(t for t in recording["turns"] if t["text"] == "I live in Lyon.")
    assert lyon_turn["recorded"]["statements"][0]["predicate"] == "lives_in" and lyon_turn.get("error") is None


def test_a_client_reads_the_certificates_once_a_process_not_once_an_add(server, monkeypatch):
    """Each entry into an LLMClient (each add of a Memory) made an HTTP client that read the
    system's certificates again: 26 ms of a 70 ms add of one message."""
    import ssl

    url, _ = server({})
    reads = []
    real = ssl.SSLContext.load_verify_locations
    monkeypatch.setattr(
        ssl.SSLContext, "load_verify_locations", lambda self, *a, **k: reads.append(1) or real(self, *a, **k)
    )
    client = LLMClient(url, "m", backoff=0.01)

    async def once():
        async with client:
            return await client.complete(
                [{"role": "user", "content": "Message to extract from:\nhi\n\nReply with"}], {}
            )

    for _ in range(3):
        asyncio.run(once())
    assert len(reads) <= 1
