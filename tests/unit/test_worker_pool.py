"""The worker pool (agefacts.workers.Pool): whatever its processes do (die, stop, hang, fail),
every wait ends in bounded time and says why, and the pool's processes are all gone after
``close``. No engine is needed: the calls are the standard library's own functions."""

from __future__ import annotations

import operator
import os
import signal
import threading
import time

import pytest

from agefacts import workers
from agefacts.errors import WorkerLost

from ..helpers import ONTO


@pytest.fixture
def pool():
    made: list[workers.Pool] = []

    def make(n: int = 2, timeout: float = 60.0) -> workers.Pool:
        made.append(workers.Pool(n, ONTO, timeout=timeout))
        return made[-1]

    yield make
    for p in made:
        p.close(wait=False)
        assert not any(proc.is_alive() for proc in p.processes), "a worker process outlived its pool"


def _bounded(seconds: float, fn, *args):
    """``fn(*args)`` in a thread, failing the test (not hanging it) if it takes longer."""
    got: dict[str, object] = {}

    def run() -> None:
        try:
            got["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            got["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"{fn} still waiting after {seconds} s"
    if "error" in got:
        raise got["error"]  # type: ignore[misc]
    return got.get("value")


def test_calls_come_back_in_order_and_their_errors_are_raised(pool):
    p = pool(2)
    tasks = [p.submit(operator.mul, i, 3) for i in range(20)]
    assert [t.result() for t in tasks] == [i * 3 for i in range(20)]
    with pytest.raises(ValueError, match="invalid literal"):
        p.submit(int, "x").result()
    assert p.alive == 2  # an error in a call is not a lost worker


def test_a_killed_worker_fails_its_calls_at_once_and_the_others_go_on(pool):
    p = pool(2)
    first, second = p.processes
    sleeping = p.submit(time.sleep, 30)
    assert p.submit(os.getpid).result() == second.pid  # round robin: the second took this
    os.kill(first.pid, signal.SIGKILL)
    started = time.monotonic()
    with pytest.raises(WorkerLost, match="ended by SIGKILL"):
        _bounded(20, sleeping.result)
    assert time.monotonic() - started < 20
    assert p.alive == 1
    assert p.submit(operator.add, 1, 2).result() == 3
    _bounded(20, p.close)


def test_a_stopped_worker_is_taken_for_hung_killed_and_its_calls_fail(pool):
    p = pool(1, timeout=2.0)
    (proc,) = p.processes
    os.kill(proc.pid, signal.SIGSTOP)
    task = p.submit(operator.add, 1, 2)
    with pytest.raises(WorkerLost, match="no answer within 2 s"):
        _bounded(30, task.result)
    proc.join(5)
    assert not proc.is_alive() and proc.exitcode == -signal.SIGKILL
    with pytest.raises(WorkerLost, match="every worker process has ended"):
        p.submit(operator.add, 1, 2)


def test_a_worker_killed_while_a_large_call_is_sent_to_it_ends_nothing_in_a_hang(pool):
    # The hang of ProcessPoolExecutor: its feeder thread blocked writing to a dead worker's
    # pipe, and its shutdown waited on that thread for ever.
    p = pool(1)
    (proc,) = p.processes
    busy = p.submit(time.sleep, 30)
    big = p.submit(len, b"x" * (64 << 20))  # blocks in the pipe: the worker is busy sleeping
    (worker,) = p._workers
    deadline = time.monotonic() + 20
    while not worker.outbox.empty():  # the sender has taken it, and is writing it to the pipe
        assert time.monotonic() < deadline, "the call was never taken to be sent"
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    for task in (busy, big):
        with pytest.raises(WorkerLost):
            _bounded(20, task.result)
    _bounded(20, p.close)


def test_close_ends_a_worker_that_will_not_end(pool):
    p = pool(2)
    p.submit(time.sleep, 600)
    started = time.monotonic()
    _bounded(30, p.close, True, 1.0)
    assert time.monotonic() - started < 15
    assert not any(proc.is_alive() for proc in p.processes)


def test_ordered_does_a_lost_workers_chunks_here(pool):
    p = pool(2)
    got = []
    items = list(range(40))

    def here(chunk):
        return [("here", i) for i in chunk]

    for n, value in enumerate(workers.ordered(p, _tagged, items, ahead=4, chunk=5, here=here)):
        got.append(value)
        if n == 6:
            for proc in p.processes:
                os.kill(proc.pid, signal.SIGKILL)
    assert [v[1] for v in got] == items  # in order, none lost, none twice
    assert {v[0] for v in got} == {"worker", "here"}


def _tagged(chunk):
    time.sleep(0.3)  # slow enough that chunks are still in flight when the workers die
    return [("worker", i) for i in chunk]
