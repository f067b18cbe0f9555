"""The suite checks for its own leftovers: every process started during a run carries a mark in
its environment (``TEST_RUN_OF_AGEFACTS``), and one still alive when the run ends (an engine a test
forgot to stop, a worker nobody joined) fails the run, named, and is ended: it is the suite's
own, so ending it signals nothing the suite did not start. Used as a pytest plugin by the
suite's conftest, and by its own test (``-p tests.leftovers``)."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from pathlib import Path

import pytest

# Not AGEFACTS_*: tests that give a child a clean agefacts environment drop those.
MARK = "TEST_RUN_OF_AGEFACTS"
# Seconds for processes that are ending (workers, engines stopping) to be gone.
GRACE = float(os.environ.get("TEST_LEFTOVERS_GRACE", "20"))


# The standard library's helpers of a process that used worker processes: they end with it.
_HELPERS = ("from multiprocessing.forkserver import main", "from multiprocessing.resource_tracker import main")


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the run's first process; its workers inherit it
        os.environ[MARK] = uuid.uuid4().hex
    # SIGTERM (`timeout`, a CI that gives up) ended pytest at once, and the engines its
    # fixtures started ran on: it stops the run as Ctrl-C does, fixtures torn down and this
    # check run.
    signal.signal(signal.SIGTERM, _interrupt)
    _watch_for_a_lost_sigterm()


_TAKEN = threading.Event()  # the SIGTERM's KeyboardInterrupt was raised


def _interrupt(signum: int, frame: object) -> None:
    # Once: a SIGTERM sent again (by the watcher, or by whoever ends the run) does not cut
    # short the teardown the first one began.
    if _TAKEN.is_set():
        return
    _TAKEN.set()
    raise KeyboardInterrupt(f"ended by signal {signum}")


def _watch_for_a_lost_sigterm() -> None:
    """CPython runs a signal's Python handler between bytecodes: a SIGTERM that lands after
    the interpreter's last look and before a lock's wait blocks is handled when the wait ends,
    never for a wait without end, and the run waits for CI's SIGKILL with its engines running.
    The signal still reaches the wakeup fd at once; a thread reading it sends SIGTERM again to
    the main thread, whose wait that one interrupts, until the handler has run."""
    if threading.current_thread() is not threading.main_thread():
        return
    read, write = os.pipe()
    os.set_blocking(write, False)
    try:
        signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    except ValueError:  # pragma: no cover - not the main thread of the main interpreter
        os.close(read)
        os.close(write)
        return
    main = threading.main_thread().ident
    assert main is not None

    def watch() -> None:
        while True:
            if signal.SIGTERM not in os.read(read, 512) or _TAKEN.is_set():
                continue
            for _ in range(60):  # bounded: a minute, as CI's grace before SIGKILL
                if _TAKEN.wait(1.0):
                    break
                signal.pthread_kill(main, signal.SIGTERM)

    threading.Thread(target=watch, name="leftovers-sigterm", daemon=True).start()


def _ancestors() -> set[int]:
    out, pid = set(), os.getpid()
    while pid > 1:
        out.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return out


def marked(run: str) -> dict[int, str]:
    """The live processes carrying this run's mark (but this one and its ancestors), with their
    command lines."""
    needle = f"{MARK}={run}".encode()
    mine = _ancestors()
    out: dict[int, str] = {}
    for proc in Path("/proc").glob("[0-9]*"):
        pid = int(proc.name)
        if pid in mine:
            continue
        try:
            if needle not in (proc / "environ").read_bytes().split(b"\0"):
                continue
            state, parent = (proc / "stat").read_text().rsplit(")", 1)[1].split()[:2]
            if state == "Z":
                continue  # exited, waiting for its parent to read its status
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace").strip()
            if int(parent) in mine and any(helper in cmd for helper in _HELPERS):
                continue
            out[pid] = cmd
        except OSError:
            continue
    return out


@pytest.hookimpl(trylast=True)  # after pytest-xdist has ended its workers
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    run = os.environ.get(MARK)
    if hasattr(session.config, "workerinput") or not run or not Path("/proc").is_dir():
        return
    deadline = time.monotonic() + GRACE
    left = marked(run)
    if not left:
        # A process caught in its exec shows no environment for a moment: looked at again.
        time.sleep(0.5)
        left = marked(run)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = marked(run)
    if not left:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = [f"the test run left {len(left)} process(es) running; they are ended now:"]
    lines += [f"  pid {pid}: {cmd[:300]}" for pid, cmd in sorted(left.items())]
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if reporter is not None:
        reporter.write_line("\n".join(lines), red=True)
    else:  # pragma: no cover - run without a terminal
        print("\n".join(lines))
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
