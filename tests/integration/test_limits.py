"""Unbounded input meets a limit, said in a sentence that names it and how to raise it: a file
that never ends, a message of many megabytes, a question of megabytes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from agefacts.cli import main
from agefacts.errors import UsageError
from agefacts.memory import Memory

from ..helpers import EXAMPLES, ONTO

GOOD = json.loads((EXAMPLES / "nina-01.json").read_text())


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_a_file_that_never_ends_is_refused_at_the_limit_and_the_rest_loads(cli_env, tmp_path, suffix):
    endless = tmp_path / f"zero{suffix}"
    endless.symlink_to("/dev/zero")
    good = tmp_path / "good.json"
    good.write_text(json.dumps(GOOD))
    env = {**os.environ, "AGEFACTS_MAX_INPUT_MB": "2"}
    run = subprocess.run(
        [sys.executable, "-m", "agefacts", "load", str(endless), str(good)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,  # read until memory ran out, before
    )
    assert run.returncode == 1, run.stderr
    what = "line" if suffix == ".jsonl" else "file"
    assert f"{endless}{':1' if what == 'line' else ''}: the {what} is larger than 2 MB" in run.stdout, run.stdout
    assert "set AGEFACTS_MAX_INPUT_MB to raise the limit" in run.stdout
    assert "conversations: 1 loaded" in run.stdout and "Traceback" not in run.stderr


def test_a_limit_that_is_not_a_number_is_named(cli_env, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AGEFACTS_MAX_INPUT_MB", "lots")
    good = tmp_path / "good.json"
    good.write_text(json.dumps(GOOD))
    assert main(["load", str(good)]) == 2
    assert "AGEFACTS_MAX_INPUT_MB='lots' is not a whole number of MB of at least 1" in capsys.readouterr().err


def test_a_message_over_the_limit_is_refused_by_name_in_a_file_and_in_an_add(
    cli_env, dsn, graph_name, tmp_path, capsys
):
    big = "I live in Lyon. " + "x" * 100_000
    conv = {**GOOD, "turns": [{**GOOD["turns"][0], "text": big, "recorded": None}]}
    path = tmp_path / "big.json"
    path.write_text(json.dumps(conv))
    assert main(["load", str(path)]) == 1
    out = capsys.readouterr().out
    assert "turns.0.text: the message is 100,016 characters, more than the 100,000 agefacts reads" in out, out
    assert "AGEFACTS_MAX_MESSAGE_CHARS" in out
    with Memory(dsn, graph_name, ontology=ONTO) as memory:
        with pytest.raises(Exception, match="the message is 100,016 characters") as caught:
            memory.add([{"role": "user", "content": big}], namespace="n", conversation="c")
        assert "\n" not in str(caught.value)
        assert memory.conversations("n") == []  # nothing half-written


def test_a_message_under_a_raised_limit_loads(cli_env, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AGEFACTS_MAX_MESSAGE_CHARS", "200000")
    conv = {
        **GOOD,
        "turns": [*GOOD["turns"], {"speaker": "assistant", "text": "y" * 150_000, "at": GOOD["turns"][-1]["at"]}],
    }
    path = tmp_path / "long.json"
    path.write_text(json.dumps(conv))
    assert main(["load", str(path)]) == 0, capsys.readouterr()


def test_a_question_over_the_limit_is_refused_in_one_sentence(cli_env, capsys, dsn, graph_name):
    question = "Where do I live? " * 2_000  # 34,000 characters
    assert main(["ask", question, "--namespace", "nina"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the question is 34,000 characters, more than the 4,000" in err, err
    assert "AGEFACTS_MAX_QUESTION_CHARS" in err
    with Memory(dsn, graph_name, ontology=ONTO) as memory, pytest.raises(UsageError, match="AGEFACTS_MAX_QUESTION"):
        memory.ask(question, namespace="nina")
