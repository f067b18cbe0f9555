"""The embedded engine's life cycle, against real pglite-server processes."""

from __future__ import annotations

import json
import socket
import stat

import pytest

from agefacts.cli import main
from agefacts.db import Database
from agefacts.engine import Engine, socket_path
from agefacts.errors import EngineError

from ..helpers import EXAMPLES
from .conftest import free_port


@pytest.fixture
def own_engine(tmp_path):
    """An engine with its own home (state file, log), so these tests can start and stop it."""
    engine = Engine(home=tmp_path / "home")
    yield engine
    engine.stop()


def test_start_status_url_stop(own_engine, tmp_path, monkeypatch, capsys):
    port = free_port()
    state, started = own_engine.start(data=tmp_path / "data", port=port)
    assert started and state.port == port
    status = own_engine.status()
    assert status["running"] and status["accepting"] and status["pid"] == state.pid

    # The CLI reads the same state file, through AGEFACTS_HOME.
    monkeypatch.setenv("AGEFACTS_HOME", str(own_engine.home))
    assert main(["db", "url"]) == 0
    assert capsys.readouterr().out.strip() == state.dsn
    assert main(["db", "status", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["port"] == port

    assert main(["db", "stop"]) == 0
    assert "stopped" in capsys.readouterr().out
    assert own_engine.status() == {"running": False}
    assert main(["db", "status"]) == 3
    assert capsys.readouterr().out.strip() == "not running"
    # Stopping a stopped engine is not an error.
    assert main(["db", "stop"]) == 0
    assert "was not running" in capsys.readouterr().out


def test_start_twice_is_harmless(own_engine, tmp_path):
    port = free_port()
    first, started = own_engine.start(data=tmp_path / "data", port=port)
    second, started_again = own_engine.start(data=tmp_path / "data", port=port)
    assert started and not started_again
    assert second.pid == first.pid
    with pytest.raises(EngineError, match="already running"):
        own_engine.start(data=tmp_path / "other", port=port)


def test_stale_pid_is_detected_and_cleared(own_engine, tmp_path):
    own_engine.home.mkdir(parents=True)
    # A pid that cannot be running: beyond the kernel's pid limit.
    own_engine.state_file.write_text(json.dumps({"pid": 2**22 + 17, "port": 1, "data": "memory"}))
    assert own_engine.status() == {"running": False}
    assert not own_engine.state_file.exists()
    state, started = own_engine.start(data=tmp_path / "data", port=free_port())
    assert started and own_engine.status()["pid"] == state.pid


def test_port_in_use_is_explained(own_engine):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(EngineError, match=rf"port {port} .*in use.*--port"):
            own_engine.start(data="memory", port=port, tcp=True)
    assert own_engine.status() == {"running": False}


def test_the_engine_listens_on_a_socket_only_its_owner_can_reach(own_engine, tmp_path):
    """By default the engine, which serves every client as its superuser, listens on a Unix
    socket in a folder only its owner may enter, and on no TCP port; --tcp serves 127.0.0.1.
    A socket someone listens on is refused like a taken port; one a killed engine left is
    taken over."""
    port = free_port()
    state, _ = own_engine.start(data="memory", port=port)
    try:
        assert state.on_socket and state.host == str(own_engine.socket_dir.resolve())
        assert stat.S_IMODE(own_engine.socket_dir.stat().st_mode) == 0o700
        assert socket_path(state.host, port).is_socket()
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0  # nothing on TCP
        assert Database(state.dsn, "sock_graph").connect().execute("SELECT 1") == [(1,)]
        with pytest.raises(EngineError, match="another way to reach it"):
            own_engine.start(data="memory", port=port, tcp=True)
    finally:
        own_engine.stop()
    # A socket file left behind (nothing listens) is taken over; one that is listened on is not.
    left = socket_path(own_engine.socket_dir.resolve(), port)
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(left))  # bound, never listening: what a killed server leaves
    state, _ = own_engine.start(data="memory", port=port)
    own_engine.stop()
    other = socket.socket(socket.AF_UNIX)
    try:
        other.bind(str(left))
        other.listen()
        with pytest.raises(EngineError, match=r"socket .*in use by another program"):
            own_engine.start(data="memory", port=port)
    finally:
        other.close()
        left.unlink(missing_ok=True)
    state, _ = own_engine.start(data="memory", port=port, tcp=True)
    try:
        assert not state.on_socket and "host=127.0.0.1" in state.dsn
        assert Database(state.dsn, "tcp_graph").connect().execute("SELECT 1") == [(1,)]
    finally:
        own_engine.stop()


def test_missing_node_says_what_to_install(own_engine, tmp_path, monkeypatch, capsys):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(EngineError, match="Node.js 20 or newer and npm"):
        own_engine.start(data="memory", port=free_port())
    monkeypatch.setenv("AGEFACTS_HOME", str(own_engine.home))
    assert main(["db", "start", "--data", "memory", "--port", str(free_port())]) == 1
    err = capsys.readouterr().err
    assert "install them" in err and "--dsn" in err and err.count("\n") == 1


def test_data_persists_and_clients_reconnect_after_restart(own_engine, tmp_path):
    data, port = tmp_path / "data", free_port()
    state, _ = own_engine.start(data=data, port=port)
    db = Database(state.dsn, "restart_graph").connect()
    db.cypher("CREATE (:Person {k: 'p1', name: 'Ada'})")
    own_engine.stop()
    state, started = own_engine.start(data=data, port=port)
    assert started
    # The old connection died with the server; reconnecting finds the data still there.
    db.reconnect(retries=3)
    rows = db.cypher("MATCH (p:Person {k: 'p1'}) RETURN p.name").rows
    assert rows == [("Ada",)]
    db.close()


def test_copy_from_stdin_breaks_the_embedded_engine(own_engine, tmp_path):
    """Why agefacts never sends COPY to the embedded engine (rows travel as one JSON array
    parameter instead): the client gets a reply it cannot read, and the server stops
    accepting connections. Fails the day pglite-server handles COPY."""
    import psycopg

    state, _ = own_engine.start(data=tmp_path / "data", port=free_port())
    conn = psycopg.connect(state.dsn, autocommit=True, prepare_threshold=None)
    conn.execute("CREATE TABLE copy_probe (a int)")
    # The engine's answer is not the protocol psycopg expects: the client fails reading it.
    with pytest.raises((psycopg.Error, ValueError)):
        with conn.cursor() as cur, cur.copy("COPY copy_probe (a) FROM STDIN") as cp:
            cp.write_row((1,))
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(state.dsn, connect_timeout=2).execute("SELECT 1")  # libpq's least
    own_engine.stop(timeout=5)


def test_the_engine_a_command_starts_listens_on_the_port_asked_for(own_engine, tmp_path, monkeypatch, capsys):
    # demo (and every command that may start the engine) takes --port, and AGEFACTS_PORT.
    for var in ("AGEFACTS_DSN", "PGHOST", "PGPORT", "PGDATABASE", "PGUSER", "PGSERVICE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AGEFACTS_HOME", str(own_engine.home))
    port = free_port()
    monkeypatch.setenv("AGEFACTS_PORT", str(port))
    assert main(["demo", "--graph", "port_demo"]) == 0
    assert "25 loaded" in capsys.readouterr().out
    assert own_engine.state().port == port
    own_engine.stop()
    monkeypatch.delenv("AGEFACTS_PORT")
    other = free_port()
    assert main(["query", "RETURN 1", "--graph", "port_demo", "--port", str(other)]) == 0
    assert own_engine.state().port == other
    monkeypatch.setenv("AGEFACTS_PORT", "not-a-port")
    own_engine.stop()
    assert main(["digest", "--graph", "port_demo"]) == 1
    assert "AGEFACTS_PORT='not-a-port' is not a port number" in capsys.readouterr().err


# -- a process we did not start is never signalled; one engine per data folder -------------------------
def test_a_state_file_naming_another_process_is_never_signalled(own_engine, monkeypatch, capsys):
    import subprocess
    import sys

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        own_engine.home.mkdir(parents=True)
        monkeypatch.setenv("AGEFACTS_HOME", str(own_engine.home))
        # A pid used again by another program (no engine at all): the engine is certainly
        # gone, so its file goes; the program is never signalled.
        own_engine.state_file.write_text(json.dumps({"pid": other.pid, "port": free_port(), "data": "memory"}))
        assert own_engine.stop() is False
        assert other.poll() is None and not own_engine.state_file.exists()
        own_engine.state_file.write_text(json.dumps({"pid": other.pid, "port": free_port(), "data": "memory"}))
        assert main(["db", "status"]) == 3 and "not running" in capsys.readouterr().out
        assert other.poll() is None
        # Pids that name process groups or every process, and pids that are not numbers.
        for pid in (-1, 0, 1, -other.pid, "12x", 3.5, None):
            own_engine.state_file.write_text(json.dumps({"pid": pid, "port": 5, "data": "memory"}))
            assert main(["db", "status"]) == 3
            assert main(["db", "stop"]) == 0
            out, err = capsys.readouterr()
            assert "not running" in out and "Traceback" not in err
        own_engine.state_file.write_text("not json at all")
        assert main(["db", "status"]) == 3
        assert other.poll() is None  # alive through all of it
    finally:
        other.kill()
        other.wait()


def test_status_from_another_cache_keeps_the_engine_and_its_state_file(own_engine, tmp_path, monkeypatch, capsys):
    """`db status` with another AGEFACTS_CACHE judged the engine foreign and deleted its state
    file: from then on `db stop` said "was not running" while it served on."""
    port = free_port()
    state, _ = own_engine.start(data="memory", port=port)
    monkeypatch.setenv("AGEFACTS_HOME", str(own_engine.home))
    monkeypatch.setenv("AGEFACTS_CACHE", str(tmp_path / "another-cache"))
    assert main(["db", "status"]) == 0
    assert f"running: pid {state.pid}" in capsys.readouterr().out
    assert own_engine.state_file.exists()
    # A key a later agefacts adds to the file is passed over, not taken for a broken file
    # (which was removed, orphaning the engine it named).
    recorded = json.loads(own_engine.state_file.read_text())
    own_engine.state_file.write_text(json.dumps({**recorded, "added_later": [1, 2]}))
    assert main(["db", "status"]) == 0 and own_engine.state_file.exists()
    capsys.readouterr()
    assert main(["db", "stop"]) == 0 and "embedded engine stopped" in capsys.readouterr().out
    assert own_engine.status() == {"running": False}


def test_an_engine_that_cannot_be_confirmed_is_reported_with_its_pid_and_left_alone(tmp_path, monkeypatch, capsys):
    # An engine of another home, named by this home's state file with another port: it may be
    # an engine of ours, it is not confirmed as this one. Reported, never signalled, file kept.
    theirs = Engine(home=tmp_path / "theirs")
    state, _ = theirs.start(data="memory", port=free_port())
    try:
        mine = Engine(home=tmp_path / "mine")
        mine.home.mkdir()
        mine.state_file.write_text(json.dumps({"pid": state.pid, "port": free_port(), "data": "memory"}))
        monkeypatch.setenv("AGEFACTS_HOME", str(mine.home))
        assert main(["db", "status"]) == 3
        out = capsys.readouterr().out
        assert f"not confirmed: the engine's state file ({mine.state_file}) names pid {state.pid}" in out
        assert f"kill -INT {state.pid}" in out
        assert main(["db", "stop"]) == 1
        assert f"names pid {state.pid}" in capsys.readouterr().err
        with pytest.raises(EngineError, match=f"names pid {state.pid}"):
            mine.start(data="memory", port=free_port())
        assert mine.state_file.exists() and theirs.status()["accepting"]
    finally:
        theirs.stop()


def test_a_data_folder_is_served_by_one_engine_at_a_time(own_engine, tmp_path):
    data = tmp_path / "shared-data"
    state, _ = own_engine.start(data=data, port=free_port())
    second = Engine(home=tmp_path / "second-home")
    try:
        with pytest.raises(EngineError, match=f"already served by an engine \\(pid {state.pid}, port {state.port}"):
            second.start(data=data, port=free_port())
        assert second.state() is None
        own_engine.stop()
        # Once the first engine is gone, so is its lock.
        took, started = second.start(data=data, port=free_port())
        assert started and second.status()["accepting"]
    finally:
        second.stop()


def test_a_damaged_data_folder_is_explained_not_shown_as_a_stack(own_engine, tmp_path):
    data = tmp_path / "data"
    own_engine.start(data=data, port=free_port())
    own_engine.stop()
    for f in data.rglob("*"):
        if f.is_file() and f.stat().st_size > 0:
            f.write_bytes(b"\x00not a database" * 16)
    with pytest.raises(EngineError) as caught:
        own_engine.start(data=data, port=free_port(), timeout=60)
    said = str(caught.value)
    assert f"could not open its data folder {data.resolve()}" in said and "Move the folder aside" in said
    assert "at " not in said.split("log is")[0] and "Error:" not in said  # no JavaScript stack
    assert own_engine.state() is None


def test_a_load_the_data_folder_has_no_room_for_is_refused_before_anything_is_written(
    own_engine, tmp_path, monkeypatch, capsys
):
    """A disk that fills during a load leaves the embedded engine waiting forever (measured on
    a 60 MB disk: no output, then a PANIC when the client gave up; it started again only once
    space was freed, with nothing of the batch it was writing). So the room is asked for
    first. The fault is injected by asking for more spare room than any disk has."""
    from ..helpers import EXAMPLES

    state, _ = own_engine.start(data=tmp_path / "data", port=free_port())
    monkeypatch.setenv("AGEFACTS_HOME", str(own_engine.home))
    monkeypatch.setenv("AGEFACTS_MIN_FREE_MB", str(10**12))
    argv = ["load", str(EXAMPLES), "--dsn", state.dsn, "--graph", "roomy"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"data folder {state.data} has" in err and "nothing was loaded" in err and "Traceback" not in err
    monkeypatch.setenv("AGEFACTS_MIN_FREE_MB", "0")
    assert main(argv) == 0
    assert capsys.readouterr().out.startswith("conversations: 25 loaded, 0 skipped")


def test_a_new_data_folder_starts_as_a_copy_of_the_engines_template(own_engine, tmp_path):
    """The engine makes a new folder by running initdb in WebAssembly (5 s) and opens an
    existing one in about 1 s: a new, empty folder is seeded from a template the installed
    engine made once. A folder holding anything else is left to the engine."""
    template = own_engine.template()
    assert (template / "PG_VERSION").exists() and own_engine.template() == template

    def files() -> dict[str, tuple[int, int]]:
        return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in template.rglob("*") if p.is_file()}

    before = files()
    data = tmp_path / "new"
    state, _ = own_engine.start(data=data, port=free_port())
    assert (data / "PG_VERSION").read_text() == (template / "PG_VERSION").read_text()
    db = Database(state.dsn, "seeded").connect()
    db.cypher("CREATE (:Person {k: 'p1'})")
    assert db.cypher("MATCH (p:Person) RETURN p.k").rows == [("p1",)]
    db.close()
    own_engine.stop()
    assert files() == before  # the template is never written to
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "notes.txt").write_text("mine")
    own_engine._seed(odd)
    assert sorted(p.name for p in odd.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("first", [False, True], ids=["by-batches", "first-load"])
def test_a_disk_that_fills_during_a_load_ends_the_run_with_its_reason_and_nothing_partial(
    own_engine, tmp_path, monkeypatch, first
):
    """The fault is injected into the engine's own file writes: a Node preload
    (tests/enospc.js) fails every write under the data folder with ENOSPC once a flag file
    exists. PostgreSQL then refuses each write with SQLSTATE 53100 and the engine keeps
    serving; the load stops at the first such refusal (every later write would fail too),
    keeps what it committed, and names the full disk for the rest. A first load (a new graph,
    agefacts.firstload) is one transaction: the disk fills during its third batch, and none
    of it is kept."""
    from pathlib import Path

    from agefacts.corpus import generate
    from agefacts.firstload import FirstLoad
    from agefacts.load import Loader
    from agefacts.models import Conversation
    from agefacts.reads import digest
    from agefacts.summary import Summary

    from ..helpers import ONTO

    flag, data = tmp_path / "disk-is-full", tmp_path / "data"
    monkeypatch.setenv("NODE_OPTIONS", f"--require {Path(__file__).parents[1] / 'enospc.js'}")
    monkeypatch.setenv("AGEFACTS_TEST_ENOSPC_FLAG", str(flag))
    monkeypatch.setenv("AGEFACTS_TEST_ENOSPC_DIR", str(data))
    state, _ = own_engine.start(data=data, port=free_port())
    convs = [Conversation.model_validate(c) for c in generate(2_000)]
    db = Database(state.dsn, "filling").connect()
    outcomes = []
    batches: list[int] = []
    real = FirstLoad.write_batch

    def filling(self, batch):
        batches.append(1)
        if len(batches) == 3:
            flag.touch()
        return real(self, batch)

    monkeypatch.setattr(FirstLoad, "write_batch", filling)
    for o in Loader(db, ONTO, batch_conversations=40, first_load=first).load_many((c.id, c) for c in convs):
        outcomes.append(o)
        flag.touch()  # after the first batch has committed
    assert len(batches) == (3 if first else 0) and flag.exists()  # the fault happened where meant
    loaded = {o.conversation for o in outcomes if o.status == "loaded"}
    failed = [o for o in outcomes if o.status == "failed"]
    assert bool(loaded) is not first and failed and len(loaded) + len(failed) == len(convs)
    assert all("the disk that holds the database is full" in o.reason for o in failed), failed[0].reason
    assert all("run the same command again" in o.reason for o in failed)
    said = Summary(outcomes).text()
    assert said.count("FAILED") == 1 and "Traceback" not in said
    flag.unlink()
    # Nothing partial: the graph is a load of exactly the conversations that loaded.
    fresh = Database(state.dsn, "fresh").connect()
    list(Loader(fresh, ONTO).load_many((c.id, c) for c in convs if c.id in loaded))
    assert digest(db) == digest(fresh)
    # With room again, the same command loads the rest.
    again = list(Loader(db, ONTO).load_many((c.id, c) for c in convs))
    assert {o.conversation for o in again if o.status == "loaded"} == {c.id for c in convs} - loaded
    db.close()
    fresh.close()


def test_a_disk_that_fills_under_the_write_ahead_log_hangs_the_engine_and_a_restart_recovers(
    own_engine, tmp_path, monkeypatch
):
    """Pinned, not fixed: when the engine cannot write its write-ahead log (ENOSPC injected into
    pg_wal writes only, as on a disk that fills at a segment boundary), the statement never
    answers and the load waits (this fails the day the engine reports it). What the README
    says to do works: stop the engine, free space, start it, load again; nothing partial."""
    import subprocess
    import sys
    from pathlib import Path

    from agefacts.load import load_paths
    from agefacts.reads import digest

    from ..helpers import EXAMPLES, ONTO

    flag, data = tmp_path / "disk-is-full", tmp_path / "data"
    monkeypatch.setenv("NODE_OPTIONS", f"--require {Path(__file__).parents[1] / 'enospc.js'}")
    monkeypatch.setenv("AGEFACTS_TEST_ENOSPC_FLAG", str(flag))
    monkeypatch.setenv("AGEFACTS_TEST_ENOSPC_DIR", str(data))
    monkeypatch.setenv("AGEFACTS_TEST_ENOSPC_ONLY", "pg_wal")
    state, _ = own_engine.start(data=data, port=free_port())
    flag.touch()
    load = [sys.executable, "-m", "agefacts", "load", str(EXAMPLES), "--graph", "walled"]
    proc = subprocess.Popen([*load, "--dsn", state.dsn], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # The same load answers in about a second when the disk has room (the load below).
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=4)
    proc.kill()  # the load this test started
    proc.wait()
    own_engine.stop(timeout=1)  # a hung engine does not close cleanly: killed after a second
    flag.unlink()
    state, _ = own_engine.start(data=data, port=free_port())
    done = subprocess.run([*load, "--dsn", state.dsn], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "25 loaded" in done.stdout, done.stderr
    fresh = Database(state.dsn, "fresh_walled").connect()
    assert load_paths(fresh, [EXAMPLES], ONTO).count("loaded") == 25
    assert digest(Database(state.dsn, "walled").connect()) == digest(fresh)


def test_status_of_an_engine_that_runs_but_does_not_answer_is_not_success(own_engine, tmp_path, monkeypatch, capsys):
    """`db status` said "NOT accepting connections" and exited 0, so a script took the engine
    for usable. The engine is made to stop answering by pausing it (our own process)."""
    import os
    import signal

    state, _ = own_engine.start(data="memory", port=free_port())
    monkeypatch.setenv("AGEFACTS_HOME", str(own_engine.home))
    assert main(["db", "status"]) == 0
    capsys.readouterr()
    os.kill(state.pid, signal.SIGSTOP)
    try:
        assert main(["db", "status"]) == 4
        assert "NOT accepting connections" in capsys.readouterr().out
    finally:
        os.kill(state.pid, signal.SIGCONT)
    assert main(["db", "status"]) == 0
    assert main(["db", "stop"]) == 0


def test_ctrl_c_ends_a_long_query_and_leaves_the_engine_serving(own_engine, tmp_path):
    """Ctrl-C did not stop a long `agefacts query` (the client asks the engine to cancel and
    waits; the engine, busy on its one thread, never answers), and every other command was
    refused until the statement ended. Now the first Ctrl-C restarts this home's engine."""
    import os
    import signal
    import subprocess
    import sys
    import time

    port = free_port()
    before, _ = own_engine.start(data=tmp_path / "data", port=port)
    # The child finds its engine through this home; the rest of the caller's settings (where
    # the engine's packages are, AGEFACTS_CACHE) it keeps, as a user's shell would.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGEFACTS_", "PG")) or k == "AGEFACTS_CACHE"}
    env |= {"AGEFACTS_HOME": str(own_engine.home), "AGEFACTS_PORT": str(port), "AGEFACTS_GRAPH": "ctl"}
    cli = [sys.executable, "-m", "agefacts"]
    subprocess.run([*cli, "load", str(EXAMPLES)], env=env, check=True, capture_output=True)
    # Every vertex four times over: about half a minute on the embedded engine.
    slow = subprocess.Popen(
        [*cli, "query", "MATCH (a), (b), (c), (d) RETURN count(*)"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(3)
    assert slow.poll() is None  # still running: the interrupt below is what ends it
    slow.send_signal(signal.SIGINT)
    out, err = slow.communicate(timeout=60)
    assert slow.returncode == 130, err
    assert "restarted" in err and out == ""
    after = own_engine.state()
    assert after is not None and after.pid != before.pid and after.port == port
    quick = subprocess.run(
        [*cli, "query", "MATCH (c:Conversation) RETURN count(c)", "--format", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert quick.returncode == 0, quick.stderr
    assert json.loads(quick.stdout) == [{"count(c)": 25}]  # what was loaded stays


def test_a_command_connecting_while_the_engine_restarts_waits_for_it(own_engine, tmp_path, monkeypatch, capsys):
    """Ctrl-C on a long read restarts the embedded engine; a load connecting at that moment
    died with a three-line connection error. It waits for the engine to be back."""
    import threading
    import time

    port = free_port()
    own_engine.start(data=tmp_path / "data", port=port)
    monkeypatch.setenv("AGEFACTS_HOME", str(own_engine.home))
    monkeypatch.setenv("AGEFACTS_PORT", str(port))
    for var in ("AGEFACTS_DSN", "PGHOST", "PGPORT", "PGDATABASE", "PGUSER", "PGSERVICE"):
        monkeypatch.delenv(var, raising=False)
    # The restart's two halves, with the window between them held open: the command below
    # finds the engine gone while it connects.
    state = own_engine.state()
    own_engine.stop()
    restarted = threading.Timer(3.0, own_engine.start, kwargs={"data": state.data, "port": port})
    # resolve_dsn would start the engine itself when none runs: here the DSN was resolved just
    # before the stop, as by a command that was connecting when the restart began.
    monkeypatch.setattr("agefacts.db.resolve_dsn", lambda *a, **k: state.dsn)
    restarted.start()
    started = time.monotonic()
    try:
        code = main(["load", str(EXAMPLES / "nina-01.json"), "--graph", "restarting"])
    finally:
        restarted.join()
    out, err = capsys.readouterr()
    assert code == 0, err
    assert time.monotonic() - started >= 2.5  # it did meet the engine gone, and waited
    assert "1 loaded" in out
    # Not for ever, and not for a server: one that cannot be reached is said at once.
    db = Database(f"host=127.0.0.1 port={free_port()} user=postgres dbname=postgres", "x_none")
    began = time.monotonic()
    with pytest.raises(Exception, match="connection"):
        db.connect()
    assert time.monotonic() - began < 5


def test_status_of_an_engine_held_by_a_transaction_left_open_is_not_success(own_engine, monkeypatch, capsys):
    """The engine serves one client at a time from one session, and a client in a transaction
    keeps it: while one is left open (here held idle; a wedged engine never ends one) it still
    accepts connections, and `db status` said "accepting connections" and exited 0 although no
    command could run."""
    import threading

    import psycopg

    state, _ = own_engine.start(data="memory", port=free_port())
    monkeypatch.setenv("AGEFACTS_HOME", str(own_engine.home))
    assert main(["db", "status"]) == 0
    capsys.readouterr()
    started, done = threading.Event(), threading.Event()

    def hold() -> None:
        with psycopg.connect(state.dsn, autocommit=True) as conn, conn.transaction():
            conn.execute("SELECT 1")
            started.set()
            done.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert started.wait(10)
        assert main(["db", "status"]) == 4
        out = capsys.readouterr().out
        assert "accepting connections but answering no query" in out, out
        assert own_engine.status()["accepting"] and not own_engine.status()["answering"]
    finally:
        done.set()
        holder.join(20)
    assert main(["db", "status"]) == 0
    own_engine.stop()


@pytest.mark.parametrize(
    "statement",
    [
        "COPY (SELECT 1) TO PROGRAM 'cat'",
        "copy (select 1) to\nprogram 'cat'",
        "/* a comment */ COPY agefacts_probe FROM PROGRAM 'echo 1'",
        "SELECT 1; COPY (SELECT 2) TO PROGRAM $$cat$$",
    ],
)
@pytest.mark.parametrize("prepared", [False, True])
def test_a_copy_to_or_from_a_program_is_refused_and_the_engine_serves_on(own_engine, statement, prepared):
    """COPY ... TO PROGRAM waited forever for a program WebAssembly cannot start, and from then
    on the engine answered no client (db status: "accepting connections but answering no
    query") until it was stopped. It is refused with a sentence, as a query or prepared, and
    the engine answers the next query; text that only says those words runs."""
    import threading

    import psycopg

    state, _ = own_engine.start(data="memory", port=free_port())
    got: list[BaseException | str] = []

    def run() -> None:
        try:
            with psycopg.connect(state.dsn, autocommit=True, connect_timeout=5) as conn:
                conn.execute(statement, prepare=prepared)
            got.append("ran")
        except BaseException as exc:  # noqa: BLE001 - the thread reports what ended it
            got.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(30)  # a wedged engine never answers: stopping it (below) ends the thread
    try:
        assert got, "the engine did not answer the statement within 30 s"
        assert isinstance(got[0], psycopg.errors.InsufficientPrivilege), got
        assert "runs no program" in str(got[0])
        with psycopg.connect(state.dsn, autocommit=True, connect_timeout=5) as conn:
            assert conn.execute("SELECT 1").fetchall() == [(1,)]
            # (not prepared again: the one session every client shares keeps psycopg's first name)
            said = "SELECT 'COPY it TO PROGRAM' -- COPY to program"
            assert conn.execute(said).fetchall() == [("COPY it TO PROGRAM",)]
    finally:
        own_engine.stop(timeout=5)
