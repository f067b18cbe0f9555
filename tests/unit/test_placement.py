"""Placement files: read and checked, a namespace's server stable in every process, adding a
server moving only what it takes, a pin written into the file with the rest of it kept."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agefacts.errors import UsageError
from agefacts.placement import Placement, Server, read_placement

TWO = """# where each person's memory lives
[servers.a]
dsn = "host=db-a dbname=agefacts"   # the first

[servers.b]
dsn = "host=db-b dbname=agefacts"
"""


def test_a_placement_file_is_read_and_a_bad_one_is_named_with_its_fix(tmp_path):
    path = tmp_path / "placement.toml"
    path.write_text(TWO + '\n[namespaces]\nann = "b"\n')
    p = read_placement(path)
    assert sorted(p.servers) == ["a", "b"] and p.pinned == {"ann": "b"} and p.home("ann").name == "b"
    bad = {
        "no such file": None,
        "is not TOML": "[servers.a\n",
        "needs a dsn": "[servers.a]\nhost = 'x'\n",
        "pinned to server 'c'": TWO + '[namespaces]\nann = "c"\n',
        "unknown table 'server'": "[server.a]\ndsn = 'x'\n",
        "at least one server": "[namespaces]\n",
    }
    for said, text in bad.items():
        f = tmp_path / f"bad{len(said)}.toml"
        if text is not None:
            f.write_text(text)
        with pytest.raises(UsageError, match=said) as err:
            read_placement(f)
        assert str(f) in str(err.value)


def _homes(p: Placement, names: list[str]) -> dict[str, str]:
    return {n: p.home(n).name for n in names}


def test_a_namespace_lives_on_the_same_server_in_every_process_and_both_servers_are_used(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text(TWO)
    names = [f"person-{i}" for i in range(200)]
    here = _homes(read_placement(path), names)
    assert 60 < sum(1 for s in here.values() if s == "a") < 140
    code = (
        "import json, sys; from agefacts.placement import read_placement; "
        f"p = read_placement({str(path)!r}); print(json.dumps({{n: p.home(n).name for n in {names!r}}}))"
    )
    for seed in ("1", "2"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        assert eval(out) == here


def test_adding_a_server_moves_only_the_namespaces_it_takes():
    two = Placement({"a": Server("a", "x"), "b": Server("b", "y")})
    three = Placement({**two.servers, "c": Server("c", "z")})
    names = [f"n{i}" for i in range(300)]
    before, after = _homes(two, names), _homes(three, names)
    moved = [n for n in names if before[n] != after[n]]
    assert all(after[n] == "c" for n in moved) and 60 < len(moved) < 140


def test_a_pin_is_written_into_the_file_with_the_rest_of_it_kept(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text(TWO)
    p = read_placement(path).pin("ann", "a")
    assert p.pinned == {"ann": "a"}
    assert read_placement(path).pinned == {"ann": "a"}
    text = path.read_text()
    assert text.startswith("# where each person's memory lives") and "# the first" in text
    read_placement(path).pin("ann", "b")
    read_placement(path).pin("zoë", "a")
    assert read_placement(path).pinned == {"ann": "b", "zoë": "a"}
    assert path.read_text().count("ann") == 1
    with pytest.raises(UsageError, match="no server 'c'"):
        read_placement(path).pin("ann", "c")


@given(
    st.text(min_size=1, max_size=12).filter(
        lambda t: "\x00" not in t and not any(0xD800 <= ord(c) <= 0xDFFF for c in t)
    )
)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_namespace_pinned_leaves_a_file_every_command_reads(tmp_path_factory, namespace):
    """A namespace holding U+007F, or U+2028 followed by any later pin, left a placement file
    that was not TOML, and every command on it exited 2."""
    path = tmp_path_factory.mktemp("p") / "p.toml"
    path.write_text(TWO)
    read_placement(path).pin(namespace, "a")
    read_placement(path).pin("later", "b")  # a pin after it reads and rewrites the file
    assert read_placement(path).pinned == {namespace: "a", "later": "b"}


def test_toml_strings_escape_what_toml_refuses_and_what_splits_lines():
    import tomllib

    from agefacts.placement import toml_string

    for text in ["a\x7fb", "x\u2028y\u2029", 'q"\\', "\t\n\r", "\x85"]:
        quoted = toml_string(text)
        assert "\n" not in quoted and len(quoted.splitlines()) == 1
        assert tomllib.loads(f"k = {quoted}")["k"] == text


def test_a_memory_on_a_placement_is_a_memory_that_opens_nothing_until_asked_and_has_no_one_database(tmp_path):
    """Memory(placement=...) is the placed memory (the one that routes): still a Memory, it
    connects to no server until a call needs one, and says it has no one database. A
    subclass of Memory reads one database, and says so when given a placement."""
    import asyncio

    from agefacts.db import Database
    from agefacts.memory import AsyncMemory, Memory

    path = tmp_path / "placement.toml"
    path.write_text('[servers.a]\ndsn = "host=nowhere.invalid"\n\n[servers.b]\ndsn = "host=nowhere.invalid port=2"\n')
    memory = Memory(placement=path)
    assert isinstance(memory, Memory) and type(memory) is not Memory
    with pytest.raises(UsageError, match="placed on several servers"):
        memory.db  # noqa: B018
    with pytest.raises(UsageError, match="needs namespace="):
        memory.forget(None)  # type: ignore[arg-type]
    memory.close()

    async def on_async() -> AsyncMemory:
        async with AsyncMemory(placement=path) as placed:
            with pytest.raises(UsageError, match="reads one namespace"):
                await placed.facts("user")
            return placed

    assert isinstance(asyncio.run(on_async()), AsyncMemory)

    class Mine(Memory):
        pass

    with pytest.raises(UsageError, match="a subclass of Memory reads one database"):
        Mine(placement=path)
    with pytest.raises(UsageError, match="a dsn or a database .one database., or a placement"):
        Memory("host=nowhere.invalid", placement=path)
    # A database given is one database too: never read beside a placement (nor beside
    # $AGEFACTS_PLACEMENT, which a memory given a database does not read).
    with pytest.raises(UsageError, match="a dsn or a database .one database., or a placement"):
        Memory(database=Database("host=nowhere.invalid"), placement=path)
