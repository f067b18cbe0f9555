"""Preparing in worker processes: grounding, gating, consolidating and compiling are pure
Python and hold the interpreter lock, so one process prepares on one core whatever its threads.

Workers are started by a fork server that has imported agefacts and nothing of the caller's
(``spawn`` where there is no fork server): a caller's ``__main__`` is not imported again, and no
process that runs threads (a web application's, or the loader's own) is forked. Each worker
keeps the ontology it was started with and ignores Ctrl-C, which the loader handles: the
batch being written is finished and the workers are stopped by the pool. Work is handed out
and taken back in order, so what comes out does not depend on how many workers there are.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import multiprocessing.context
import os
import signal
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, TypeVar

from .errors import InputError
from .inputs import Raw, parse_text
from .ontology import Ontology

__all__ = ["available_cores", "compile_chunk", "default_workers", "ontology", "ordered", "start"]

_T = TypeVar("_T")
_R = TypeVar("_R")

_ontology: Ontology | None = None


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


def start(workers: int, onto: Ontology) -> ProcessPoolExecutor:
    """A pool of ``workers`` processes that each hold ``onto`` (see :func:`ontology`)."""
    context: multiprocessing.context.BaseContext
    if "forkserver" in multiprocessing.get_all_start_methods():
        server = _ForkServer()
        # Imported once by the fork server, so each worker starts with it already loaded.
        server.set_forkserver_preload(["agefacts.load"])
        context = server
    else:  # pragma: no cover - Windows
        context = _Spawn()
    return ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_init, initargs=(onto,))


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
    # every 700 of them took a quarter of the preparing (agefacts.load._interpreter_tuned).
    young, *older = gc.get_threshold()
    gc.set_threshold(max(young, 100_000), *older)


def ontology() -> Ontology:
    """The ontology this worker process was started with."""
    if _ontology is None:
        raise RuntimeError("not a worker process started by agefacts.workers.start")
    return _ontology


def ordered(
    pool: ProcessPoolExecutor,
    work: Callable[[Sequence[_T]], list[_R]],
    items: Iterable[_T],
    *,
    ahead: int,
    chunk: int = 64,
) -> Iterator[_R]:
    """``work`` applied to ``items`` in chunks by the pool's workers, the results yielded in
    the items' order; at most ``ahead`` chunks are in flight, so memory stays flat however
    many items come."""
    inflight: list[Future[list[_R]]] = []
    batch: list[_T] = []
    for item in items:
        batch.append(item)
        if len(batch) >= chunk:
            inflight.append(pool.submit(work, batch))
            batch = []
            if len(inflight) >= ahead:
                yield from inflight.pop(0).result()
    if batch:
        inflight.append(pool.submit(work, batch))
    for future in inflight:
        yield from future.result()


def compile_chunk(texts: Sequence[Raw]) -> list[tuple[str, str | InputError]]:
    """Each text read parsed (:func:`agefacts.inputs.parse_text`), and each conversation's
    Cypher (:func:`agefacts.compile.compile_conversation`) or why it has none, in a worker
    process: parsing is a third of compiling, too much to leave to the process that reads."""
    from .compile import compile_conversation

    onto = ontology()
    return [
        (source, item if isinstance(item, InputError) else compile_conversation(item, onto))
        for raw in texts
        for source, item in parse_text(raw)
    ]
