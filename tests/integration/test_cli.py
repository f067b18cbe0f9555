"""The command line, run in-process against the test engine."""

from __future__ import annotations

import json

from agefacts.cli import main


def test_query_prints_a_table(cli_env, capsys):
    assert main(["query", "RETURN 1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].strip() == "1" and out[2].strip() == "1" and out[-1] == "(1 row)"


def test_query_json_is_an_array_keyed_by_column(cli_env, capsys):
    assert main(["query", "CREATE (:Person {k: 'a', name: 'Ada'})"]) == 0
    capsys.readouterr()
    assert main(["query", "MATCH (n) RETURN count(n)", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"count(n)": 1}]
    assert main(["query", "MATCH (n) RETURN n.name AS name, n.k", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"name": "Ada", "n.k": "a"}]


def test_query_parameters_are_never_interpolated(cli_env, capsys):
    evil = "x'}) DETACH DELETE n //$$"
    assert main(["query", "RETURN $v AS v", "--param", f"v={evil}", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"v": evil}]


def test_usage_errors_exit_2(cli_env, capsys):
    assert main(["query"]) == 2
    assert main(["query", "RETURN 1", "--param", "no-equals"]) == 2


def test_a_bad_query_exits_1_with_the_servers_reason(cli_env, capsys):
    assert main(["query", "MATCH (n RETURN n"]) == 1
    assert "syntax error" in capsys.readouterr().err


def test_the_readmes_library_example_runs_as_written(cli_env, graph_name, capsys, server):
    """The Python blocks of the README and docs/ that use the library, run as they are written
    (on this test's graph rather than "facts", and with a local model endpoint that answers
    the documented message); what they print is what the comments say."""
    import json
    import re
    from pathlib import Path

    from ..llm_server import completion

    porto = {
        "entities": [{"handle": "e1", "type": "Place", "mention": "Porto", "resolution": "resolved", "name": "Porto"}],
        "statements": [
            {"subject": "user", "predicate": "lives_in", "object": "e1", "quote": "I live in Porto"}
            | {"polarity": "asserted", "tense": "current"}
        ],
        "followups": [],
    }
    url, script = server({"I live in Porto.": [("json", 200, completion(json.dumps(porto)))]})

    top = Path(__file__).parents[2]
    pages = [top / "README.md", *sorted((top / "docs").glob("*.md"))]
    blocks = [
        b
        for page in pages
        for b in re.findall(r"```python\n(.*?)```", page.read_text(), re.S)
        if "from agefacts import" in b
    ]
    assert len(blocks) >= 4
    for block in blocks:
        code = block.replace('"facts")', f'"{graph_name}")').replace('"http://127.0.0.1:8080/v1"', repr(url))
        exec(compile(code, "README.md", "exec"), {})
        out = capsys.readouterr().out
        for said in re.findall(r"print\(.*\)\s+# (.+)", block):
            assert said.strip() in out, (said, out)
    assert len(script.requests) == 1


def test_reading_a_graph_that_does_not_exist_says_so_and_creates_nothing(cli_env, dsn, capsys):
    from agefacts.cli import main

    for argv in (["facts", "user"], ["digest"], ["history", "user", "lives_in"], ["query", "RETURN 1"]):
        assert main([*argv, "--graph", "nosuchgraph"]) == 1, argv
        err = capsys.readouterr().err
        assert "graph 'nosuchgraph' does not exist" in err and "Traceback" not in err, err
    assert not _graph_exists(dsn, "nosuchgraph")


def _graph_exists(dsn: str, name: str) -> bool:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM ag_catalog.ag_graph WHERE name = %s", (name,)).fetchone()[0] == 1


def test_what_a_query_lacks_is_named_instead_of_answering_nothing(cli_env, capsys):
    from agefacts.cli import main

    cases = [
        (
            ["history", "user", "lives_inn", "--namespace", "nina"],
            ["'lives_inn' is not in the ontology", "did you mean lives_in"],
        ),
        (
            ["query", "--name", "fact_statements"],
            ["query 'fact_statements' needs entity, known_at", "--param entity=..."],
        ),
        (["query", "MATCH (n) WHERE n.k = $x RETURN n.k"], ["uses $x but no value was given", "--param x=..."]),
    ]
    for argv, said in cases:
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert all(s in err for s in said) and "Traceback" not in err, (argv, err)
    # A parameter the header says may be null can be left out; a '$' inside a string is text.
    assert main(["query", "--name", "placeholders"]) == 0
    assert main(["query", "RETURN '$x costs' AS price"]) == 0
    assert "$x costs" in capsys.readouterr().out


def test_every_failure_is_one_sentence_and_an_exit_status(cli_env, tmp_path, capsys):
    from agefacts.cli import main

    cases = [
        (["query", "RETURN 1", "--dsn", "garbage dsn"], 1, "connection string is not valid"),
        (["facts", "a\udcff"], 2, "entity 'a\\udcff' is not UTF-8 text"),
        (["query", "RETURN $x AS x", "--param", 'x="\\ud800"'], 2, "lone surrogate"),
        (["show", "Tom", "--out", str(tmp_path)], 2, "is a folder"),
        (["show", "Tom", "--out", str(tmp_path / "no" / "such" / "x.html")], 2, "does not exist"),
    ]
    for argv, status, said in cases:
        assert main(argv) == status, argv
        err = capsys.readouterr().err
        assert said in err and "Traceback" not in err, (argv, err)
    assert not (tmp_path / "no").exists()


def test_a_reader_that_stops_reading_ends_the_output_quietly(cli_env):
    import os
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "agefacts", "query", "UNWIND range(1, 20000) AS i RETURN i"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=os.environ.copy(),
    )
    assert proc.stdout is not None and proc.stdout.readline()
    proc.stdout.close()  # as `| head -1` does
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and b"Traceback" not in err and b"BrokenPipe" not in err, err


def test_an_interrupted_load_says_what_it_loaded_and_a_rerun_loads_the_rest(cli_env, dsn, graph_name, tmp_path):
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    from agefacts.corpus import generate
    from agefacts.db import Database

    # 6,000 statements in batches of 1,000 (100 conversations): interrupted once the first is
    # in, the load has four batches to go, whatever the engine's speed.
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(c) + "\n" for c in generate(6_000)))
    # A graph that holds something already, so this is no first load (agefacts.firstload,
    # one transaction, whose Ctrl-C test_first_load holds): batches land one by one.
    from agefacts.load import Loader

    from ..helpers import ONTO, likes

    with Database(dsn, graph_name).connect() as held:
        Loader(held, ONTO).load(likes("before", "tea", "2024-01-01T10:00:00Z"))
    counted = "SELECT count(*) FROM agefacts.ingest_log WHERE graph = %s AND conversation <> 'before'"
    proc = subprocess.Popen(
        [sys.executable, "-m", "agefacts", "load", str(corpus), "--batch-statements", "1000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=os.environ.copy(),
        text=True,
    )
    db = Database(dsn, graph_name).connect()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # interrupt once some batches are in
        (n,) = db.execute(counted, (graph_name,))[0]
        if n >= 100:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err, err
    (logged,) = db.execute(counted, (graph_name,))[0]
    # The first Ctrl-C lets the batch being written finish (rather than the client waiting
    # 5 s for the engine to answer a cancel request it never answers).
    assert "stopping after the batch being written" in err
    assert f"interrupted: {logged} conversation(s) were loaded" in err and 0 < logged < 600, err
    assert logged % 100 == 0  # whole batches
    assert out.startswith(f"conversations: {logged} loaded"), out
    rerun = subprocess.run(
        [sys.executable, "-m", "agefacts", "load", str(corpus)], capture_output=True, text=True, env=os.environ.copy()
    )
    assert rerun.returncode == 0 and rerun.stdout.startswith(f"conversations: {600 - logged} loaded, {logged} skipped")
    db.close()


def test_a_server_chosen_by_pg_variables_is_named_when_it_cannot_be_reached(monkeypatch, capsys):
    from agefacts.cli import main

    from .conftest import free_port

    monkeypatch.delenv("AGEFACTS_DSN", raising=False)
    monkeypatch.setenv("PGHOST", "127.0.0.1")
    monkeypatch.setenv("PGPORT", str(free_port()))  # nothing listens there
    monkeypatch.setenv("PGCONNECT_TIMEOUT", "3")
    assert main(["query", "RETURN 1"]) == 1
    err = capsys.readouterr().err
    assert "chosen by PGHOST=127.0.0.1, PGPORT=" in err and "unset them to use the embedded engine" in err, err


def test_loading_a_folder_without_conversation_files_fails_naming_it(cli_env, tmp_path, capsys):
    from agefacts.cli import main

    (tmp_path / "exports").mkdir()
    (tmp_path / "exports" / "chat.txt").write_text("user: hello")
    assert main(["load", str(tmp_path / "exports")]) == 1
    out = capsys.readouterr().out
    assert "0 loaded" in out and "1 failed" in out, out
    assert f"{tmp_path / 'exports'}: the folder holds no .json, .jsonl or .ndjson files" in out, out
