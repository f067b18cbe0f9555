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


def test_the_readmes_library_example_runs_as_written(cli_env, graph_name, capsys):
    """The README's Python blocks that use the library, run as they are written (on this
    test's graph rather than "facts"); what they print is what the comments say."""
    import re
    from pathlib import Path

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "from agefacts import" in b]
    assert blocks
    for block in blocks:
        exec(compile(block.replace('"facts")', f'"{graph_name}")'), "README.md", "exec"), {})
        out = capsys.readouterr().out
        for said in re.findall(r"print\(.*\)\s+# (.+)", block):
            assert said.strip() in out, (said, out)
