"""An error reaches a person as one sentence that names what failed: not libpq's lines, not a
PL/pgSQL function's context, not a host:port where the person named a server."""

from __future__ import annotations

import json

import pytest

from agefacts.cli import main
from agefacts.db import Database
from agefacts.errors import DatabaseError

from ..helpers import EXAMPLES as EXAMPLES_DIR
from .conftest import free_port


def test_a_server_that_cannot_be_reached_is_one_line_naming_host_and_port():
    port = free_port()
    db = Database(f"host=127.0.0.1 port={port} user=postgres dbname=postgres", "x_none")
    with pytest.raises(DatabaseError) as caught:
        db.connect()
    text = str(caught.value)
    assert "\n" not in text and f'"127.0.0.1", port {port} failed: Connection refused' in text, text


def test_an_error_raised_inside_a_database_function_is_one_line_without_its_context(db):
    with pytest.raises(DatabaseError) as caught:
        db.execute("DO $$ BEGIN RAISE EXCEPTION 'a refusal' USING DETAIL = 'what it was about', HINT = 'h'; END $$")
    text = str(caught.value)
    assert "\n" not in text, text
    assert "a refusal; what it was about" in text and "PL/pgSQL" not in text and "CONTEXT" not in text


def test_a_placement_server_that_is_down_is_named_by_its_name(tmp_path, dsn, capsys):
    placement = tmp_path / "placement.toml"
    down = f"host=127.0.0.1 port={free_port()} user=postgres dbname=postgres"
    placement.write_text(f"[servers.up]\ndsn = {json.dumps(dsn)}\n\n[servers.east]\ndsn = {json.dumps(down)}\n")
    code = main(["facts", "user", "--placement", str(placement), "--server", "east", "--graph", "g_down"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1, err  # one line
    assert "server 'east' of the placement cannot be reached (127.0.0.1:" in err, err


def test_the_command_a_missing_entity_error_suggests_runs_and_lists_the_entities(cli_env, db, capsys):
    """It suggested `agefacts query --name entities`, which failed on its own ("needs text")."""
    import re
    import shlex

    from agefacts.load import load_paths

    from ..helpers import EXAMPLES, ONTO

    load_paths(db, [EXAMPLES / "nina-01.json"], ONTO)
    for namespace in (["--namespace", "nina"], []):
        capsys.readouterr()
        assert main(["facts", "Nobody At All", *namespace]) == 1
        err = capsys.readouterr().err
        suggested = re.search(r"`(agefacts query [^`]*)` lists them", err)
        assert suggested, err
        assert main(shlex.split(suggested[1])[1:]) == 0
        out = capsys.readouterr().out
        assert "user" in out and "Lyon" in out, out


def test_the_rejections_hint_names_a_command_that_shows_them(cli_env, db, capsys):
    """The demo's hint `agefacts load --show-rejections` printed nothing: no files, and
    without --force a load of what is there already skips it."""
    assert main(["load", str(EXAMPLES_DIR)]) == 0
    out = capsys.readouterr().out
    assert "(`agefacts load` of the same files with --force --show-rejections says each one, and why)" in out
    assert main(["load", str(EXAMPLES_DIR), "--force", "--show-rejections"]) == 0
    shown = [line for line in capsys.readouterr().out.splitlines() if line.startswith("rejected ") and " turn " in line]
    assert len(shown) == 11, shown  # each refused claim of the shipped examples, with its reason
