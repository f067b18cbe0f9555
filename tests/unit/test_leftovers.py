"""The suite fails when a test leaves a process running (tests/leftovers.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


def _pytest_with_the_check(folder: Path) -> subprocess.CompletedProcess[str]:
    """pytest on ``folder``'s tests with the leftovers check, in a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.leftovers", "-q", "-p", "no:cacheprovider", str(folder)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TEST_LEFTOVERS_GRACE": "2"},
    )


@pytest.mark.slow
def test_a_run_that_leaves_a_process_running_fails_and_names_it(tmp_path):
    (tmp_path / "test_leaves.py").write_text(
        textwrap.dedent(
            """
            import subprocess, sys

            def test_starts_and_forgets():
                # In a session of its own, as the embedded engine is started: not a child
                # that pytest would take down with it.
                p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
                # Running (past its exec) before the run ends, as a leftover always is.
                while b"sleep" not in open(f"/proc/{p.pid}/cmdline", "rb").read():
                    pass
            """
        )
    )
    run = _pytest_with_the_check(tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 passed" in run.stdout  # the test itself passed: the run fails for what it left
    assert "the test run left 1 process(es) running; they are ended now:" in run.stdout
    assert "time.sleep(600)" in run.stdout
    pid = int(run.stdout.split("  pid ")[1].split(":")[0])
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[1][:3]


@pytest.mark.slow
def test_a_run_that_leaves_nothing_passes(tmp_path):
    (tmp_path / "test_clean.py").write_text("def test_nothing():\n    pass\n")
    run = _pytest_with_the_check(tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.slow
def test_a_test_that_hangs_fails_in_bounded_time_with_the_stack_that_hung(tmp_path):
    # The suite's own settings (pyproject.toml), with the limit shortened for this test.
    (tmp_path / "test_hangs.py").write_text(
        textwrap.dedent(
            """
            import threading

            def test_waits_for_ever():
                never = threading.Event()
                never.wait()
            """
        )
    )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "-o", "timeout=3", "-q"]
        + ["-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Timeout" in run.stdout, run.stdout
    assert "never.wait()" in run.stdout  # where it hung


@pytest.mark.slow
def _pytest_with_a_pipe(tmp_path: Path, says: int) -> subprocess.Popen[str]:
    """pytest with this plugin on the tests in ``tmp_path``, which may write to ``says``."""
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "tests.leftovers", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "TEST_LEFTOVERS_GRACE": "2"},
        pass_fds=(says,),
    )


def test_a_run_ended_by_sigterm_still_ends_what_it_started(tmp_path):
    """`timeout` and CI end a run with SIGTERM: it ended pytest at once, and the embedded
    engines its fixtures had started ran on (one was found 50 minutes later). The run now stops
    as on Ctrl-C: fixtures are torn down and the leftovers check runs."""
    import select
    import signal

    # The test in the child says through a pipe that it waits, and that it was interrupted:
    # no clock to poll. This end of the pipe stays open, so a read waits rather than ending.
    said, says = os.pipe()
    (tmp_path / "test_ended.py").write_text(
        textwrap.dedent(
            f"""
            import os, subprocess, sys, threading
            import pytest

            @pytest.fixture(scope="session")
            def daemon():
                # In a session of its own, as the embedded engine is started.
                p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
                yield p
                p.kill()

            def test_waits(daemon):
                try:
                    os.write({says}, f"{{daemon.pid}}\\n".encode())
                    threading.Event().wait()
                except KeyboardInterrupt:
                    os.write({says}, b"interrupted\\n")
                    raise
            """
        )
    )

    def heard(seconds: float) -> str:
        ready, _, _ = select.select([said], [], [], seconds)
        return os.read(said, 64).decode() if ready else ""

    run = _pytest_with_a_pipe(tmp_path, says)
    try:
        first = heard(60)
        assert first, "the test never started"
        pid = int(first.split()[0])
        # One SIGTERM, sent just as the child starts to wait: where CPython can take it late
        # (see the next test), the plugin sends it again to the main thread.
        run.send_signal(signal.SIGTERM)
        said_so = "interrupted" in first or "interrupted" in heard(60)
        assert said_so, "SIGTERM never interrupted the test"
        out, _ = run.communicate(timeout=60)
    finally:
        run.kill()
        os.close(said)
        os.close(says)
    gone = not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[1][:3]
    if not gone:
        os.kill(pid, signal.SIGKILL)
    assert gone, out
    assert run.returncode != 0, out


def test_a_sigterm_handled_late_by_the_interpreter_still_ends_the_run(tmp_path):
    """The SIGTERM CPython loses for a while: its flag set just before the main thread blocks
    in a wait, which no signal then wakes (reproduced here with ``_thread.interrupt_main``,
    which sets the flag as the signal does, and wakes nothing). One SIGTERM ended such a run
    only when the wait ended, never for a wait without end; the plugin's watcher sends it
    again to the main thread, and the run stops as on Ctrl-C."""
    import select

    said, says = os.pipe()
    (tmp_path / "test_lost.py").write_text(
        textwrap.dedent(
            f"""
            import _thread, os, signal, threading

            def test_waits():
                def lose_it():
                    os.write({says}, b"flagged\\n")
                    _thread.interrupt_main(signal.SIGTERM)

                try:
                    threading.Timer(0.5, lose_it).start()
                    threading.Event().wait()
                except KeyboardInterrupt as exc:
                    os.write({says}, f"interrupted: {{exc}}\\n".encode())
                    raise
            """
        )
    )
    run = _pytest_with_a_pipe(tmp_path, says)
    heard = ""
    try:
        while "interrupted" not in heard:
            ready, _, _ = select.select([said], [], [], 60)
            assert ready, f"the run was not interrupted within 60 s of the flag: {heard!r}"
            heard += os.read(said, 256).decode()
        out, _ = run.communicate(timeout=60)
    finally:
        run.kill()
        os.close(said)
        os.close(says)
    assert heard.startswith("flagged") and "interrupted: ended by signal 15" in heard, heard
    assert run.returncode != 0, out
