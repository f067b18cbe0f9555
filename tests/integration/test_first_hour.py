"""What a person meets in their first hour with the command line: no crash where a row holds a
time, and every row of a read over several memories says whose it is."""

from __future__ import annotations

import json

import pytest

from agefacts.cli import main

from ..helpers import EXAMPLES


@pytest.mark.parametrize("fmt", ["table", "json", "jsonl", "csv"])
def test_the_conversations_query_prints_in_every_format(cli_env, capsys, fmt):
    """It failed in every format with "datetime is not JSON serializable" (exit 70), and
    forget's own error message tells people to run it."""
    assert main(["load", str(EXAMPLES)]) == 0
    capsys.readouterr()
    assert main(["query", "--name", "conversations", "--param", "namespace=nina", "--format", fmt]) == 0
    out = capsys.readouterr().out
    assert "nina-01" in out and "Traceback" not in out
    if fmt == "json":
        rows = json.loads(out)
        assert len(rows) == 3 and rows[0]["loaded_at"][:4].isdigit() and "T" in rows[0]["loaded_at"]


def test_history_says_whose_rows_they_are_when_no_namespace_is_given(cli_env, capsys):
    """history without --namespace for a name in one namespace, and with --all-namespaces,
    failed ("'namespace' is not in list", exit 70)."""
    assert main(["load", str(EXAMPLES)]) == 0
    capsys.readouterr()
    assert main(["history", "Tom", "works_at"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("namespace | subject") and "ann" in out
    assert main(["history", "user", "lives_in", "--all-namespaces", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["namespace"] for r in rows} >= {"nina", "omar"} and all(r["namespace"] for r in rows)


def test_ask_over_every_memory_says_whose_each_line_is_and_names_the_owner_once(cli_env, capsys):
    """With --all-namespaces, `--format context` lines carried no namespace (twelve rows from
    five people could not be told apart) and "Linked:" repeated "user ('i')" once per memory."""
    assert main(["load", str(EXAMPLES)]) == 0
    capsys.readouterr()
    assert main(["ask", "Where do I live?", "--all-namespaces"]) == 0
    out = capsys.readouterr().out
    (linked,) = [line for line in out.splitlines() if line.startswith("Linked: ")]
    assert linked.count("user ('i')") == 1 and " namespaces" in linked
    assert main(["ask", "Where do I live?", "--all-namespaces", "--format", "context"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) > 3 and all(" of namespace " in line for line in lines)
    assert any("of namespace nina" in line and "Bergen" in line for line in lines)
    # One memory: no namespace on each line, as before.
    assert main(["ask", "Where do I live?", "--namespace", "nina", "--format", "context"]) == 0
    assert " of namespace " not in capsys.readouterr().out


def test_library_calls_with_the_wrong_types_say_which_argument(dsn, graph_name, db):
    """add(namespace=5) reached the database ("text = smallint", with SQL); facts(None),
    facts(valid_at=5) and ask(5) were TypeErrors from deep inside."""
    from agefacts import Memory
    from agefacts.errors import UsageError

    with Memory(dsn, graph_name) as memory:
        memory.add(
            [{"role": "assistant", "content": "hi", "at": "2024-01-01T10:00:00Z"}], namespace="n", conversation="c"
        )
        cases = [
            (lambda: memory.add([{"role": "assistant", "content": "hi"}], namespace=5, conversation="c"), "namespace="),
            (
                lambda: memory.add([{"role": "assistant", "content": "hi"}], namespace="n", conversation=7),
                "conversation=",
            ),
            (lambda: memory.facts(None), "the entity"),
            (lambda: memory.facts("user", namespace="n", valid_at=5), "a time is ISO-8601 text"),
            (lambda: memory.facts("user", namespace=3), "the namespace"),
            (lambda: memory.ask(5), "the question is text"),
            (lambda: memory.history("user", 5, namespace="n"), "the predicate is text"),
        ]
        for call, said in cases:
            with pytest.raises(UsageError, match=said):
                call()


def test_a_file_where_a_folder_belongs_is_named_not_a_crash(tmp_path, monkeypatch, capsys):
    """`db start --data FILE` and AGEFACTS_HOME naming a file ended in exit 70 (FileExistsError,
    NotADirectoryError)."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    monkeypatch.setenv("AGEFACTS_HOME", str(tmp_path / "home"))
    assert main(["db", "start", "--data", str(afile), "--port", "5"]) == 1
    assert "the data folder" in capsys.readouterr().err
    monkeypatch.setenv("AGEFACTS_HOME", str(afile))
    for argv in (["db", "status"], ["facts", "user"]):
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert "is a file, not a folder: set AGEFACTS_HOME" in err and "internal error" not in err


def test_load_says_what_was_rejected_and_why(cli_env, capsys, tmp_path):
    """An unknown predicate, a quote not in the message, an undefined handle all loaded with
    exit 0 and "N rejected claims": the library had a sentence for each, the command line
    showed none."""
    from ..helpers import claim, conversation, user_turn

    bad = conversation(
        "bad",
        [
            user_turn(
                "I live in Lyon.",
                "2024-01-01T10:00:00Z",
                statements=[
                    claim("user", "resides_in", "I live in Lyon", value="Lyon"),
                    claim("user", "likes", "I adore Lyon", value="Lyon"),
                    claim("user", "lives_in", "I live in Lyon", obj="e9"),
                ],
            )
        ],
    )
    path = tmp_path / "bad.json"
    path.write_text(bad.model_dump_json(exclude_none=True))
    assert main(["load", str(path)]) == 0
    out = capsys.readouterr().out
    assert "rejected by reason: not_in_message 1, unknown_handle 1, unknown_predicate 1" in out
    assert main(["load", str(path), "--force", "--show-rejections"]) == 0
    out = capsys.readouterr().out
    assert "rejected bad turn 0 (statement, not_in_message): the quote 'I adore Lyon' is not in the message" in out
    assert "(statement, unknown_predicate): predicate 'resides_in' is not in the ontology's vocabulary" in out
    assert main(["load", str(path), "--force", "--format", "json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["rejected_reasons"] == {"not_in_message": 1, "unknown_handle": 1, "unknown_predicate": 1}
    assert {(r["conversation"], r["turn"], r["reason"]) for r in said["rejections"]} == {
        ("bad", 0, "not_in_message"),
        ("bad", 0, "unknown_handle"),
        ("bad", 0, "unknown_predicate"),
    }


def test_a_message_mapping_keeps_its_recording_and_its_speakers_name(dsn, graph_name, db):
    """The error for a memory with no model says to add turns carrying `recorded`; a mapping
    that carried one got the same error (only the unexported Turn kept it), and lost `name`."""
    from agefacts.memory import Memory

    from ..helpers import LIVES, ONTO

    with Memory(dsn, graph_name, ontology=ONTO) as memory:
        added = memory.add(
            [{"role": "user", "content": "I live in Porto.", "name": "Ana", "recorded": LIVES, "id": "chat-msg-1"}],
            namespace="ana",
            conversation="c1",
        )
        assert added.status == "loaded", added
        assert [(f.predicate, f.object) for f in memory.facts("user", namespace="ana")] == [("lives_in", "Porto")]
        (exported,) = memory.export("ana")
        assert exported.turns[0].name == "Ana" and exported.turns[0].recorded is not None


def test_a_conversation_file_may_use_a_chat_apis_role_and_content(cli_env, tmp_path, capsys):
    """The file format refused role/content, which Memory.add takes."""
    from ..helpers import LIVES

    conv = {
        "id": "chat",
        "namespace": "ana",
        "turns": [{"role": "user", "content": "I live in Porto.", "at": "2025-01-02T10:00:00Z", "recorded": LIVES}],
    }
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(conv))
    assert main(["load", str(path)]) == 0, capsys.readouterr()
    capsys.readouterr()
    assert main(["facts", "user", "--namespace", "ana", "--format", "json"]) == 0
    assert [r["object"] for r in json.loads(capsys.readouterr().out)] == ["Porto"]


def test_a_load_of_messages_with_no_extraction_says_what_they_give_and_what_facts_need(cli_env, tmp_path, capsys):
    """`agefacts load` of plain turns wrote 0 statements without a word of why."""
    conv = {
        "id": "plain",
        "namespace": "rui",
        "turns": [
            {"speaker": "user", "text": "I live in Porto.", "at": "2025-01-02T10:00:00Z"},
            {"speaker": "assistant", "text": "Nice.", "at": "2025-01-02T10:00:05Z"},
            {"speaker": "user", "text": "And I love fado.", "at": "2025-01-02T10:01:00Z"},
        ],
    }
    path = tmp_path / "plain.json"
    path.write_text(json.dumps(conv))
    assert main(["load", str(path)]) == 0
    out = capsys.readouterr().out
    assert "2 user message(s) carry no extraction: they are stored and `agefacts ask` finds them" in out, out
    assert "agefacts extract FILES --out DIR" in out
    assert main(["ask", "Where do I hear fado?", "--namespace", "rui", "--format", "json"]) == 0
    # The message that says it; then the turn it answers
    assert [m["text"] for m in json.loads(capsys.readouterr().out)["messages"]] == ["And I love fado.", "Nice."]
