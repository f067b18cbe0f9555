"""Every code block of the README and docs/ is run, or says which test runs it, or why none
can (a model server, Docker, a bench of minutes): `<!-- example: run by FILE::TEST -->` or
`<!-- example: not run: REASON -->` just before the block. Unmarked blocks are run here:
shell blocks command by command against the shipped examples, output blocks whose lines start
with `$ agefacts` compared with what the command prints, JSON blocks parsed; Python blocks
that use the library are run by tests/integration/test_cli.py."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from agefacts.cli import main
from agefacts.load import load_paths
from agefacts.models import Conversation

from ..helpers import EXAMPLES, ONTO

TOP = Path(__file__).parents[2]
PAGES = [TOP / "README.md", *sorted((TOP / "docs").glob("*.md"))]
ACTIVATE = ["source", ".venv/bin/activate"]
BLOCK = re.compile(r"(?:<!-- example: (?P<note>.*?) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)```", re.S)


def _blocks() -> list[tuple[str, str, str, str | None]]:
    return [(p.name, m["lang"], m["body"], m["note"]) for p in PAGES for m in BLOCK.finditer(p.read_text())]


def _commands(body: str) -> list[list[str]]:
    """The `agefacts` command lines of a shell block, as arguments (comments dropped)."""
    out = []
    for line in body.splitlines():
        words = shlex.split(line, comments=True)
        if words == ACTIVATE:
            continue  # the shell's own step; test_the_readme_tour_runs_in_a_fresh_shell takes it
        if words:
            assert words[0] == "agefacts", f"not an agefacts command: {line!r} (mark the block)"
            # A shell takes \$ inside double quotes as $; shlex keeps the backslash.
            out.append([w.replace("\\$", "$") for w in words[1:]])
    return out


def test_every_block_is_marked_run_or_runnable():
    for page, lang, body, note in _blocks():
        where = f"{page}: block starting {body.strip()[:50]!r}"
        if note is not None:
            if note.startswith("run by "):
                target = note[len("run by ") :].split()[0]
                path, _, name = target.partition("::")
                assert (TOP / path).exists(), where
                assert not name or f"def {name}(" in (TOP / path).read_text(), f"{where}: no test {name}"
            else:
                assert note.startswith("not run: ") and len(note) > len("not run: ") + 5, where
        elif lang == "python":
            assert "from agefacts import" in body, f"{where}: run by test_cli only when it uses the library"
        elif lang == "json":
            for line in [body] if body.lstrip().startswith("{\n") or body.count("\n") > 1 else body.splitlines():
                json.loads(line)
        elif lang == "sh":
            assert _commands(body), where
        else:
            assert lang == "" and body.lstrip().startswith("$ agefacts"), f"{where}: unmarked {lang or 'output'} block"


def test_the_shell_and_output_blocks_run_as_written(cli_env, db, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # `show ... --out tom.html` writes here
    load_paths(db, [EXAMPLES], ONTO)
    capsys.readouterr()
    ran = 0
    for page, lang, body, note in _blocks():
        if note is not None:
            continue
        if lang == "sh":
            for argv in _commands(body):
                assert main(argv) == 0, (page, argv, capsys.readouterr().err)
                ran += 1
        elif lang == "":
            # "$ agefacts ..." then what it prints, up to the next command.
            for command, shown in re.findall(r"^\$ (agefacts [^\n]*)\n(.*?)(?=^\$ |\Z)", body, re.S | re.M):
                capsys.readouterr()
                assert main(shlex.split(command)[1:]) == 0, (page, command)
                printed = capsys.readouterr().out
                assert shown.strip() == printed.strip(), (page, command, printed)
                ran += 1
    assert ran >= 15  # the README's, querying's and time's commands


def test_the_input_pages_conversation_is_one():
    (body,) = [b for page, lang, b, _ in _blocks() if page == "input.md" and lang == "json"]
    conv = Conversation.model_validate_json(body)
    assert conv.turns[0].recorded is not None and conv.turns[0].recorded.statements


def test_the_mcp_client_configuration_in_the_docs_passes_the_database_and_parses():
    from agefacts.cli import build_parser

    (body,) = [b for page, lang, b, _ in _blocks() if page == "memory.md" and lang == "json" and "mcpServers" in b]
    server = json.loads(body)["mcpServers"]["memory"]
    assert server["command"] == "agefacts"
    args = build_parser().parse_args(server["args"])
    assert args.server_only and args.func.__name__ == "_cmd_mcp"
    # The host passes the server no environment of the user's: the database comes in env.
    assert "AGEFACTS_DSN" in server["env"]


def test_the_readme_tour_runs_in_a_fresh_shell(cli_env, db, tmp_path):
    """After `make demo` the README typed bare `agefacts ...`, which a new shell did not find
    ("command not found"): its blocks say how to put the command on PATH, and are typed here
    into a fresh bash whose PATH has no agefacts on it."""
    import os
    import shutil
    import subprocess
    import sys

    load_paths(db, [EXAMPLES], ONTO)
    venv = Path(sys.prefix)
    assert (TOP / ".venv").resolve() == venv.resolve(), "run from the repository's .venv, as make test does"
    path = os.pathsep.join(
        p for p in os.environ["PATH"].split(os.pathsep) if Path(p).resolve() != (venv / "bin").resolve()
    )
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PATH")} | {"PATH": path}
    assert shutil.which("agefacts", path=path) is None  # a fresh shell: not on PATH
    typed = 0
    for page, lang, body, note in _blocks():
        if page != "README.md" or lang != "sh" or note is not None:
            continue
        lines = [line for line in body.splitlines() if line.strip()]
        assert shlex.split(lines[0], comments=True) == ACTIVATE, (
            f"README block {lines[0]!r}: start it with the activation"
        )
        run = subprocess.run(
            ["bash", "--noprofile", "--norc", "-e", "-c", body],
            cwd=TOP,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode == 0, (body, run.stderr)
        typed += 1
    assert typed >= 1


def test_the_hand_written_statements_in_extract_md_load(cli_env, db, tmp_path, capsys):
    (body,) = [b for page, lang, b, _ in _blocks() if page == "extract.md" and lang == "json"]
    path = tmp_path / "moving-day.json"
    path.write_text(body)
    assert main(["load", str(path)]) == 0
    out = capsys.readouterr().out
    assert "1 loaded" in out and "0 rejected claims" in out, out
    assert main(["facts", "user", "--namespace", "ann", "--valid-at", "2025-07-01", "--format", "json"]) == 0
    got = {(r["predicate"], r["object"], r["valid_from"]) for r in json.loads(capsys.readouterr().out)}
    assert ("lives_in", "Porto", "2025-05") in got and ("sibling_of", "Ines", None) in got
