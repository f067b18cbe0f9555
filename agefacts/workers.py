"""Preparing in worker processes: grounding, gating, consolidating and compiling are pure
Python and hold the interpreter lock, so one process prepares on one core whatever its threads.
Once a load has nothing left to prepare, its workers read time too (the fact versions of its
last writes: :func:`agefacts.bulk.read_versions_far`).

Workers are started by a fork server that has imported agefacts and nothing of the caller's
(``spawn`` where there is no fork server): a caller's ``__main__`` is not imported again, and no
process that runs threads (a web application's, or the loader's own) is forked. Each worker
keeps the ontology it was started with and ignores Ctrl-C, which the loader handles: the
batch being written is finished and the workers are stopped by the pool. Work is handed out
and taken back in order, so what comes out does not depend on how many workers there are.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import logging
import multiprocessing
import multiprocessing.connection
import multiprocessing.context
import multiprocessing.process
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar, cast

from .errors import InputError, WorkerLost
from .inputs import Raw, parse_text
from .ontology import Ontology

__all__ = [
    "DEFAULT_TIMEOUT",
    "Pool",
    "Task",
    "available_cores",
    "compile_chunk",
    "default_workers",
    "ontology",
    "ordered",
    "start",
]

_T = TypeVar("_T")
_R = TypeVar("_R")

_ontology: Ontology | None = None
_log = logging.getLogger(__name__)

# A batch of 5,000 statements is prepared in about a second; a worker that has not answered in
# two minutes is stopped or hung, and its work is done elsewhere.
DEFAULT_TIMEOUT = 120.0


def available_cores() -> int:
    """The cores this process may run on (its affinity, where the system says it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def default_workers() -> int:
    """The preparing processes a load uses unless told: one per core it may use, at most 4
    (each holds the batch it prepares, and the batches it has made wait to be written)."""
    return max(1, min(available_cores(), 4))


def _context() -> _ForkServer | _Spawn:
    if "forkserver" in multiprocessing.get_all_start_methods():
        server = _ForkServer()
        # Imported once by the fork server, so each worker starts with it already loaded.
        server.set_forkserver_preload(["agefacts.load"])
        return server
    return _Spawn()  # pragma: no cover - Windows


def start(workers: int, onto: Ontology, *, timeout: float = DEFAULT_TIMEOUT) -> Pool:
    """A pool of ``workers`` processes that each hold ``onto`` (see :func:`ontology`)."""
    return Pool(workers, onto, timeout=timeout)


class Task(Generic[_R]):
    """One call handed to a worker process; :meth:`result` waits a bounded time for it."""

    def __init__(self, pool: Pool, worker: _Worker) -> None:
        self._pool = pool
        self._worker = worker
        self._done = threading.Event()
        self._value: Any = None
        self._error: BaseException | None = None

    def _settle(self, value: Any = None, error: BaseException | None = None) -> None:
        if not self._done.is_set():
            self._value, self._error = value, error
            self._done.set()

    def result(self) -> _R:
        """The call's result, or its exception raised again; :class:`WorkerLost` when its
        worker ended, or gave no answer within the pool's timeout (that worker is then
        killed, so nothing it holds is waited for again)."""
        if not self._done.wait(self._pool.timeout):
            self._pool._lose(self._worker, f"it gave no answer within {self._pool.timeout:g} s")
        if not self._done.wait(5.0):  # pragma: no cover - settled by _lose or the receiver at once
            raise WorkerLost("a worker process's answer was lost")
        if self._error is not None:
            raise self._error
        return cast(_R, self._value)


class _Worker:
    """One worker process, the pipe its calls go down and the pipe its answers come up, and
    the two threads that do the sending and the receiving: a send to a busy worker waits
    until it reads, and a receive until it answers, so neither is done by a thread that
    must be able to stop waiting."""

    def __init__(self, pool: Pool, context: Any, onto: Ontology) -> None:
        self.pool = pool
        calls_in, self.calls = multiprocessing.Pipe(duplex=False)
        self.answers, answers_out = multiprocessing.Pipe(duplex=False)
        self.process = context.Process(target=_serve, args=(calls_in, answers_out, onto), daemon=True)
        self.process.start()
        # The worker's ends are the worker's alone: with this process holding none, a worker
        # that dies breaks both pipes, and a send or receive here ends at once.
        calls_in.close()
        answers_out.close()
        self.outbox: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...]] | None] = queue.SimpleQueue()
        self.waiting: collections.deque[Task[Any]] = collections.deque()
        self.lost: str | None = None
        self.lock = threading.Lock()
        self.sender = threading.Thread(target=self._send, name="agefacts-worker-send", daemon=True)
        self.receiver = threading.Thread(target=self._receive, name="agefacts-worker-receive", daemon=True)
        self.sender.start()
        self.receiver.start()

    def _send(self) -> None:
        # Each thread closes its own end, when it is done with it: a connection closed under a
        # thread that is using it fails there with no meaning.
        try:
            while True:
                item = self.outbox.get()
                if item is None:
                    return
                try:
                    self.calls.send(item)
                except (OSError, ValueError):  # the worker is gone (or killed by the pool)
                    if self.lost is None:
                        self.process.join(2.0)
                        self.pool._lose(self, _ended(self.process.exitcode))
                    return
        finally:
            self.calls.close()

    def _receive(self) -> None:
        try:
            while True:
                try:
                    ok, value = self.answers.recv()
                except (EOFError, OSError):
                    if self.lost is None:
                        self.process.join(2.0)  # its pipe closes as it exits: its code follows
                        self.pool._lose(self, _ended(self.process.exitcode))
                    return
                except Exception as exc:  # an answer that cannot be unpickled
                    ok, value = False, WorkerLost(f"its answer could not be read ({exc})")
                with self.lock:
                    task = self.waiting.popleft() if self.waiting else None
                if task is not None:
                    task._settle(value if ok else None, None if ok else value)
        finally:
            self.answers.close()


class Pool:
    """Worker processes of our own, fed through pipes of our own. Everything that waits here
    waits a bounded time: a worker that dies, is stopped or hangs is detected (by its pipe, or
    by a call that gets no answer within ``timeout`` seconds), killed, and the calls it held
    fail with :class:`WorkerLost`; :meth:`close` ends every process, killing those that do not
    end when asked. (``concurrent.futures.ProcessPoolExecutor`` could wait for ever in its
    shutdown on a feeder thread blocked writing to a dead worker's pipe.)"""

    def __init__(self, workers: int, onto: Ontology, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.timeout = timeout
        self._lock = threading.Lock()
        self._next = 0
        self._closed = False
        context = _context()
        self._workers: list[_Worker] = []
        try:
            for _ in range(workers):
                self._workers.append(_Worker(self, context, onto))
        except BaseException:
            self.close(wait=False)
            raise

    @property
    def processes(self) -> list[multiprocessing.process.BaseProcess]:
        """The worker processes (for tests that end one)."""
        return [w.process for w in self._workers]

    @property
    def alive(self) -> int:
        """How many workers are still taking calls."""
        return sum(1 for w in self._workers if w.lost is None)

    def submit(self, fn: Callable[..., _R], *args: Any) -> Task[_R]:
        """Hand ``fn(*args)`` to a worker (``fn`` a module-level function, ``args`` picklable);
        :class:`WorkerLost` at once when none is left."""
        with self._lock:
            if self._closed:
                raise WorkerLost("the pool is closed")
            live = [w for w in self._workers if w.lost is None]
            if not live:
                raise WorkerLost("every worker process has ended")
            worker = live[self._next % len(live)]
            self._next += 1
        task: Task[_R] = Task(self, worker)
        with worker.lock:
            if worker.lost is not None:
                task._settle(error=WorkerLost(f"a worker process was lost: {worker.lost}"))
                return task
            worker.waiting.append(task)
        worker.outbox.put((fn, args))
        return task

    def _lose(self, worker: _Worker, why: str) -> None:
        """``worker`` is done for: killed (it may be stopped or hung, not only dead), and every
        call it held fails."""
        with worker.lock:
            first = worker.lost is None
            if first:
                worker.lost = why
            waiting = list(worker.waiting)
            worker.waiting.clear()
        if first:
            _kill(worker.process)  # its pipes break: both threads end
            worker.outbox.put(None)
        for task in waiting:
            task._settle(error=WorkerLost(f"a worker process was lost: {why}"))

    def close(self, wait: bool = True, grace: float = 10.0) -> None:
        """End every worker: with ``wait``, each is asked to finish what it holds and stop, and
        killed if it has not within ``grace`` seconds; without, killed at once."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        deadline = time.monotonic() + (grace if wait else 0.0)
        for w in self._workers:
            if w.lost is None:
                w.outbox.put(None)  # the sender stops; the worker sees its pipe close
        for w in self._workers:
            if w.lost is None:
                w.sender.join(max(0.0, deadline - time.monotonic()))
                w.process.join(max(0.0, deadline - time.monotonic()))
            if w.process.is_alive():
                self._lose(w, "it was still running when the pool closed")
            else:
                with w.lock:
                    w.lost = w.lost or "the pool closed"
                    waiting = list(w.waiting)
                    w.waiting.clear()
                for task in waiting:
                    task._settle(error=WorkerLost("the pool closed"))
        for w in self._workers:
            w.sender.join(5.0)
            w.receiver.join(5.0)

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, kind: object, *_: object) -> None:
        self.close(wait=kind is None)


def _ended(code: int | None) -> str:
    if code is None:
        return "it closed its pipe"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"it was ended by {signal.Signals(-code).name}"
    return f"it exited with code {code}"


def _kill(process: multiprocessing.process.BaseProcess) -> None:
    with contextlib.suppress(OSError, ValueError, AttributeError):
        process.kill()
    with contextlib.suppress(OSError, ValueError, AssertionError):
        process.join(5.0)


def _serve(
    calls: multiprocessing.connection.Connection, answers: multiprocessing.connection.Connection, onto: Ontology
) -> None:
    """A worker's whole life: calls in, answers out, until the pipe closes."""
    _init(onto)
    while True:
        try:
            item = calls.recv()
        except (EOFError, OSError):
            return
        fn, args = item
        try:
            answer: tuple[bool, Any] = (True, fn(*args))
        except Exception as exc:
            answer = (False, exc)
        try:
            answers.send(answer)
        except (OSError, ValueError):
            return
        except Exception as exc:  # an exception or result that cannot be pickled
            answers.send((False, WorkerLost(f"its answer could not be sent: {type(exc).__name__}: {exc}")))


@contextlib.contextmanager
def _main_unnamed() -> Iterator[None]:
    """The caller's ``__main__`` without the file or module it was run from, while a worker is
    started: multiprocessing would otherwise run that file again in the worker (as
    ``__mp_main__``), which is a script's whole work when it has no ``if __name__ ==
    "__main__"`` guard. A worker needs nothing of it: it runs agefacts' functions only."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    saved: dict[str, Any] = {name: main.__dict__[name] for name in ("__file__", "__spec__") if name in main.__dict__}
    main.__dict__.pop("__file__", None)
    main.__spec__ = None
    try:
        yield
    finally:
        main.__dict__.update(saved)
        if "__spec__" not in saved:
            del main.__spec__


class _Process(multiprocessing.context.ForkServerProcess):
    @staticmethod
    def _Popen(process_obj: Any) -> Any:  # noqa: N802 - multiprocessing's name
        with _main_unnamed():
            return multiprocessing.context.ForkServerProcess._Popen(process_obj)


class _ForkServer(multiprocessing.context.ForkServerContext):
    Process = _Process


class _SpawnProcess(multiprocessing.context.SpawnProcess):  # pragma: no cover - Windows
    @staticmethod
    def _Popen(process_obj: Any) -> Any:  # noqa: N802 - multiprocessing's name
        with _main_unnamed():
            return multiprocessing.context.SpawnProcess._Popen(process_obj)


class _Spawn(multiprocessing.context.SpawnContext):  # pragma: no cover - Windows
    Process = _SpawnProcess


def _init(onto: Ontology) -> None:
    global _ontology
    _ontology = onto
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A worker only prepares, which allocates millions of short-lived objects: collecting
    # every 700 of them took a quarter of the preparing (agefacts.preparing.interpreter_tuned).
    young, *older = gc.get_threshold()
    gc.set_threshold(max(young, 100_000), *older)


def ontology() -> Ontology:
    """The ontology this worker process was started with."""
    if _ontology is None:
        raise RuntimeError("not a worker process started by agefacts.workers.start")
    return _ontology


def ordered(
    pool: Pool,
    work: Callable[[Sequence[_T]], list[_R]],
    items: Iterable[_T],
    *,
    ahead: int,
    chunk: int = 64,
    here: Callable[[Sequence[_T]], list[_R]] | None = None,
) -> Iterator[_R]:
    """``work`` applied to ``items`` in chunks by the pool's workers, the results yielded in
    the items' order; at most ``ahead`` chunks are in flight, so memory stays flat however
    many items come. A chunk whose worker is lost is done by ``here`` in this process (or
    the loss is raised, without it)."""
    inflight: list[tuple[Sequence[_T], Task[list[_R]] | None]] = []

    def send(batch: Sequence[_T]) -> None:
        try:
            inflight.append((batch, pool.submit(work, batch)))
        except WorkerLost:
            if here is None:
                raise
            inflight.append((batch, None))

    def take() -> list[_R]:
        batch, task = inflight.pop(0)
        if task is not None:
            try:
                return task.result()
            except WorkerLost as exc:
                if here is None:
                    raise
                _log.warning("a worker process ended (%s); its work is done here instead", exc)
        assert here is not None
        return here(batch)

    batch: list[_T] = []
    for item in items:
        batch.append(item)
        if len(batch) >= chunk:
            send(batch)
            batch = []
            if len(inflight) >= ahead:
                yield from take()
    if batch:
        send(batch)
    while inflight:
        yield from take()


def compile_chunk(texts: Sequence[Raw], onto: Ontology | None = None) -> list[tuple[str, str | InputError]]:
    """Each text read parsed (:func:`agefacts.inputs.parse_text`), and each conversation's
    Cypher (:func:`agefacts.compile.compile_conversation`) or why it has none, in a worker
    process: parsing is a third of compiling, too much to leave to the process that reads."""
    from .compile import compile_conversation

    onto = onto or ontology()
    return [
        (source, item if isinstance(item, InputError) else compile_conversation(item, onto))
        for raw in texts
        for source, item in parse_text(raw)
    ]
