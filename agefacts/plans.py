"""A read written once, for both kinds of connection: a plan.

A plan is a generator that yields what it needs of the database (a :class:`Named` query,
:data:`STALE_GRAPH`, or the messages :class:`Nearest` a question in meaning) and is sent the
answer; what it returns is the read's result. Everything
between two round trips (checking the arguments, choosing the next query, putting rows
together) is the plan's own code, so it is written once: :func:`run_plan` answers a plan on a
:class:`~agefacts.db.Database`, :func:`run_plan_async` on an
:class:`~agefacts.asyncdb.AsyncDatabase`, and the two runners are the only twins
(``tests/unit/test_twins.py`` holds them to one text). Plans compose with ``yield from``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from .db import Database
from .embed import Embedder, nearest_messages, nearest_messages_async
from .errors import UsageError
from .named import run_named, run_named_async

if TYPE_CHECKING:
    from .asyncdb import AsyncDatabase

__all__ = [
    "STALE_GRAPH",
    "Named",
    "Nearest",
    "Need",
    "Plan",
    "StaleGraph",
    "drive",
    "drive_async",
    "one_read",
    "run_plan",
    "run_plan_async",
]


@dataclass(frozen=True)
class Named:
    """Run the named query ``name`` with ``params``; the answer is its
    :class:`~agefacts.db.Table`."""

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StaleGraph:
    """The answer is the graph's name when it holds keys of the form an earlier agefacts wrote
    (:meth:`~agefacts.db.Database.keys_stale`), else None: what a read that found nothing
    says, since the keys it looked for are not the graph's."""


STALE_GRAPH = StaleGraph()


@dataclass(frozen=True)
class Nearest:
    """The keys of the ``n`` messages of ``namespace`` nearest ``question`` in meaning, by the
    runner's embedder (:func:`agefacts.embed.nearest_messages`)."""

    namespace: str | None
    question: str
    n: int


Need = Named | StaleGraph | Nearest
_T = TypeVar("_T")
_N = TypeVar("_N")
Plan = Generator[Need, Any, _T]


def run_plan(db: Database, plan: Plan[_T], embedder: Embedder | None = None) -> _T:
    """Answer each need of ``plan`` on ``db`` (and ``embedder``), in order, and return what
    the plan returns."""
    return drive(plan, lambda need: _answer(db, need, embedder))


async def run_plan_async(db: AsyncDatabase, plan: Plan[_T], embedder: Embedder | None = None) -> _T:
    """:func:`run_plan` on an asynchronous connection."""
    return await drive_async(plan, lambda need: _answer_async(db, need, embedder))


def drive(steps: Generator[_N, Any, _T], answer: Callable[[_N], Any]) -> _T:
    """Send each step ``steps`` yields its ``answer``, and return what it returns: how a plan,
    or a read of a placement's servers (:func:`agefacts.placed.run_everywhere`), is run."""
    got: Any = None
    while True:
        try:
            step = steps.send(got)
        except StopIteration as done:
            result: _T = done.value
            return result
        got = answer(step)


async def drive_async(steps: Generator[_N, Any, _T], answer: Callable[[_N], Awaitable[Any]]) -> _T:
    """:func:`drive` with answers awaited."""
    got: Any = None
    while True:
        try:
            step = steps.send(got)
        except StopIteration as done:
            result: _T = done.value
            return result
        got = await answer(step)


def _answer(db: Database, need: Need, embedder: Embedder | None) -> Any:
    if isinstance(need, Named):
        return run_named(db, need.name, need.params)
    if isinstance(need, Nearest):
        return nearest_messages(db, _embedder(embedder), need.namespace, need.question, need.n)
    return db.graph if db.keys_stale() else None


async def _answer_async(db: AsyncDatabase, need: Need, embedder: Embedder | None) -> Any:
    if isinstance(need, Named):
        return await run_named_async(db, need.name, need.params)
    if isinstance(need, Nearest):
        return await nearest_messages_async(db, _embedder(embedder), need.namespace, need.question, need.n)
    return db.graph if await db.keys_stale() else None


def one_read(db: Database | AsyncDatabase, embedder: Embedder | None) -> Any:
    """What a plan of several statements runs in: one read of the graph
    (:meth:`agefacts.db.Database.reading`), so that what it finds and what it says was taken
    back are of one moment; with an ``embedder``, one transaction per statement, as its calls
    to the endpoint must not hold the database and the vectors it makes are written. A
    context manager for ``with`` on a :class:`~agefacts.db.Database`, ``async with`` on an
    :class:`~agefacts.asyncdb.AsyncDatabase`."""
    return contextlib.nullcontext() if embedder is not None else db.reading()


def _embedder(embedder: Embedder | None) -> Embedder:
    if embedder is None:
        raise UsageError("this read searches by meaning: give it an embedder (embedder=Embedder(url, model))")
    return embedder
