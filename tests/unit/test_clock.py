"""The bench's CPU by stage (agefacts.clock): each stage counts its own seconds, once."""

import os
import socket
import threading
import time

from agefacts.clock import STAGES, StageClock, listening_process, process_cpu, stage


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_stage_inside_another_counts_its_own_seconds_and_the_outer_one_the_rest():
    clock = StageClock()
    with clock.stage("fact versions"):
        _burn(0.03)
        with clock.stage("reading of time"):
            _burn(0.06)
    spent = clock.spent()
    inner, outer = spent["reading of time"]["client_s"], spent["fact versions"]["client_s"]
    assert inner is not None and outer is not None
    assert 0.06 <= inner < 0.09
    assert 0.03 <= outer < 0.06  # without the inner stage's 0.06


def test_stages_come_in_the_order_a_load_meets_them_and_others_after():
    clock = StageClock()
    for name in ("statistics", "my own", "hash", "rows"):
        clock.add(name, 0.0)
    assert list(clock.spent()) == ["hash", "rows", "statistics", "my own"]
    assert STAGES.index("hash") < STAGES.index("rows") < STAGES.index("statistics")


def test_a_thread_that_never_talks_to_the_server_counts_no_server_seconds():
    # This process stands in for the server: it is busy while the preparing thread runs.
    clock = StageClock(server=os.getpid())
    preparing = clock.client_only()

    def prepare() -> None:
        with preparing.stage("compile"):
            _burn(0.03)

    t = threading.Thread(target=prepare)
    with clock.stage("rows"):
        t.start()
        _burn(0.05)
        t.join()
    spent = clock.spent()
    assert spent["compile"]["server_s"] is None and spent["compile"]["client_s"] >= 0.03
    # The server's seconds are counted where the loading thread spent them (ticks of 10 ms).
    assert spent["rows"]["server_s"] is not None and spent["rows"]["server_s"] >= 0.05
    assert 0.05 <= spent["rows"]["client_s"] < 0.08  # this thread's own, not the other's


def test_a_worker_process_seconds_are_counted_and_said_to_be_elsewhere():
    clock = StageClock()
    with stage(clock.client_only(), "hash"):
        _burn(0.01)
    clock.add_all({"compile": 0.5, "assemble": 0.25})
    spent = clock.spent()
    assert spent["compile"]["client_s"] == 0.5 and spent["assemble"]["client_s"] == 0.25
    assert clock.elsewhere == 0.75


def test_without_a_clock_a_stage_is_nothing_and_an_unreadable_process_is_none():
    with stage(None, "rows"):
        pass
    assert process_cpu(None) is None
    pid_max = int(open("/proc/sys/kernel/pid_max").read())
    assert process_cpu(pid_max + 1) is None  # no such process
    mine = process_cpu(os.getpid())
    assert mine is not None and mine > 0


def test_the_process_listening_where_a_dsn_points_is_found_by_its_socket_or_port(tmp_path):
    """What `eval recall` and `bench` read the engine's CPU from: the process listening on the
    DSN's port, or on its socket in the folder the DSN's host names (the embedded engine)."""
    with socket.socket() as tcp, socket.socket(socket.AF_UNIX) as unix:
        tcp.bind(("127.0.0.1", 0))
        port = tcp.getsockname()[1]
        # Bound and not yet listening is nobody's server.
        assert listening_process("127.0.0.1", port) is None
        tcp.listen()
        assert listening_process("127.0.0.1", port) == os.getpid()
        unix.bind(str(tmp_path / ".s.PGSQL.5999"))
        unix.listen()
        assert listening_process(str(tmp_path), 5999) == os.getpid()
        # Another folder's socket, or the port's number where a socket is asked for, is not it.
        assert listening_process(str(tmp_path / "other"), 5999) is None
        assert listening_process(str(tmp_path), port) is None
    assert listening_process("127.0.0.1", port) is None
