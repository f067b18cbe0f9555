"""Working over the servers of a placement (:mod:`agefacts.placement`): each call goes to the
server of its namespace, following the note a moved namespace left; a read of every
namespace asks every server at once and merges what they answer, in the order one server
would give; :func:`load_placed` loads each conversation into its namespace's server, all
servers at once; :func:`move` moves a namespace from one server to another.

A read that meets a namespace being moved reads it where it is (the server it is leaving
still holds it whole); a read of every namespace leaves out, on each server, the namespaces
that server notes as leaving or gone, so that a namespace is read once.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import os
import threading
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from . import ledger
from .db import Database, Table
from .embed import Embedder
from .errors import AgeFactsError, InputError, LoadInterrupted, NamespaceMoved, NotFound
from .load import Loader, read_told
from .models import Conversation
from .ontology import Ontology
from .placement import Placement, Server, read_placement
from .plans import Plan, drive, drive_async, one_read, run_plan, run_plan_async
from .reads import TimeArg, digest, facts_plan, history_plan
from .retrieve import (
    Answer,
    Found,
    Gathered,
    add_scopes,
    answer_gathered,
    check_question,
    gather_plan,
    search_depth,
    search_scope_plan,
)
from .summary import Outcome, Summary
from .timeline import fact_order

if TYPE_CHECKING:
    from .asyncdb import AsyncDatabase

__all__ = [
    "AsyncRouter",
    "Everywhere",
    "OnEach",
    "Router",
    "ask_everywhere",
    "close_all",
    "database_router",
    "facts_everywhere",
    "history_everywhere",
    "history_order",
    "home_server",
    "load_placed",
    "merge_gathered",
    "merge_rows",
    "move",
    "on_each",
    "on_each_async",
    "run_everywhere",
    "run_everywhere_async",
]

_M = TypeVar("_M")
_T = TypeVar("_T")
_Notes = dict[str, tuple[str, str]]  # namespace -> (server it went to, 'moving' or 'moved')


def history_order(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """The order of ``history`` rows of several namespaces, as one server lists them: by
    namespace (the entities named are taken in that order), then in the order one server
    lists them (:data:`agefacts.derive.HISTORY_ORDER`)."""
    start = row["valid_from"] or row["valid_until"] or row["recorded_at"]
    recorded = row["recorded_at"]
    return (row["namespace"], start is None, start or "", recorded is None, recorded or "", row["statement"])


def merge_rows(
    answers: Sequence[tuple[list[dict[str, Any]], _Notes]], order: Callable[[Mapping[str, Any]], Any]
) -> list[dict[str, Any]]:
    """Rows of several servers as one server would list them: each server's rows less those
    of the namespaces it notes as leaving or gone, in ``order``."""
    rows = [r for got, notes in answers for r in got if r["namespace"] not in notes]
    return sorted(rows, key=order)


def merge_gathered(parts: Sequence[tuple[Gathered, _Notes]], k: int) -> Gathered:
    """What several servers gathered for a question (each ``whole``, less the namespaces it
    notes as leaving or gone), as one server holding everything would have gathered it, to be
    fused once (:func:`agefacts.retrieve.answer_gathered`): the words' matches by their score
    (BM25, each server's over its own messages, each with its keyphrases), read as deep as one
    server reads; the facts' and their evidence messages whole. Fusing each server's own
    answer and sorting the union by fused score interleaved the servers' lists by rank, so
    the tenth message of one server came before the second of another."""
    entities: list[Any] = []
    rows: list[list[dict[str, Any]]] = []
    words: list[dict[str, Any]] = []
    found = Found()
    withdrawals: list[dict[str, Any]] = []
    why: dict[str, Any] = {"searched": [], "names": [], "messages": 0}
    nearest: list[list[dict[str, Any]]] = []
    for g, notes in parts:
        for e, r in zip(g.entities, g.rows, strict=False):
            if e.namespace not in notes:
                entities.append(e)
                rows.append([f for f in r if f["namespace"] not in notes])

        def kept(items: Iterable[dict[str, Any]], notes: _Notes = notes) -> list[dict[str, Any]]:
            return [m for m in items if m["namespace"] not in notes]

        words += kept(g.found.words)
        found.timed += kept(g.found.timed)
        found.texts.update((ident, m) for ident, m in g.found.texts.items() if ident[0] not in notes)
        nearest.append(kept(g.found.meaning))
        withdrawals += kept(g.withdrawals)
        if g.why is not None:
            why["searched"] = sorted(set(why["searched"]) | set(g.why["searched"] or []))
            why["names"] = sorted(set(why["names"]) | set(g.why["names"] or []))
            why["messages"] += g.why["messages"] or 0
    found.words = sorted(words, key=lambda m: (-m["score"], m["namespace"], m["conversation"], m["message"]))[
        : search_depth(k)
    ]
    # Nearest in meaning has no score to compare across servers: taken in turns, by rank.
    found.meaning = [m for level in itertools.zip_longest(*nearest) for m in level if m is not None][: search_depth(k)]
    first = parts[0][0] if parts else Gathered([], [], Found(), [], None)
    return Gathered(entities, rows, found, first.times, first.named, why, withdrawals)


# -- reads of every namespace, written once --------------------------------------------------------
@dataclass(frozen=True)
class OnEach:
    """A step of a read of every namespace of a placement: the plan ``plan`` makes (given the
    server's ontology, and whether it has an embedder) asked of every server at once; the
    answer is each server's result, with the notes of the namespaces that left it."""

    plan: Callable[[Ontology, bool], Plan[Any]]


# A read of every namespace: what it asks of each server (OnEach), then what it makes of the
# answers. The memories and the command line run the same ones (run_everywhere).
Everywhere = Generator[OnEach, list[tuple[Any, _Notes]], _T]


def facts_everywhere(entity: str, valid_at: TimeArg, known_at: TimeArg) -> Everywhere[Table]:
    """:func:`agefacts.reads.facts` of every namespace, on every server."""
    got = yield OnEach(lambda _ontology, _meaning: facts_plan(entity, None, True, valid_at, known_at))
    return _merged(got, fact_order)


def history_everywhere(entity: str, predicate: str) -> Everywhere[Table]:
    """:func:`agefacts.reads.history` of every namespace, on every server (each judging the
    predicate by its own ontology)."""
    got = yield OnEach(lambda ontology, _meaning: history_plan(entity, predicate, None, True, ontology))
    return _merged(got, history_order)


def ask_everywhere(
    question: str, ontology: Ontology, k: int, valid_at: TimeArg, known_at: TimeArg
) -> Everywhere[Answer]:
    """:func:`agefacts.retrieve.ask` of every namespace, on every server, answered as one
    server holding everything would: what each server's search counts, added up; each
    server's part gathered with the sums; merged and fused once."""
    check_question(question, None, k)
    scopes = yield OnEach(lambda on, _meaning: search_scope_plan(question, on, None))
    scope = add_scopes(s for s, _ in scopes)
    got = yield OnEach(
        lambda on, meaning: gather_plan(question, on, None, True, k, valid_at, known_at, meaning, True, scope)
    )
    return answer_gathered(question, ontology, merge_gathered(got, k), k, None)


def _merged(got: list[tuple[Table, _Notes]], order: Callable[[Mapping[str, Any]], Any]) -> Table:
    columns = got[0][0].columns if got else []
    rows = merge_rows([(t.dicts(), notes) for t, notes in got], order)
    return Table(columns, [tuple(r[c] for c in columns) for r in rows])


def run_everywhere(router: Router[_M], read: Everywhere[_T], answer: Callable[[_M, OnEach], Any]) -> _T:
    """Run a read of every namespace over ``router``'s servers: ``answer(member, step)``
    answers each step on one server (:func:`on_each`, with that member's database)."""
    return drive(read, lambda step: router.everywhere(lambda member: answer(member, step)))


async def run_everywhere_async(
    router: AsyncRouter[_M], read: Everywhere[_T], answer: Callable[[_M, OnEach], Awaitable[Any]]
) -> _T:
    """:func:`run_everywhere` for asyncio."""
    return await drive_async(read, lambda step: router.everywhere(lambda member: answer(member, step)))


def on_each(db: Database, step: OnEach, ontology: Ontology, embedder: Embedder | None) -> Any:
    """One server's answer to ``step``, in one read of its graph (with an embedder, one
    transaction per statement, as the endpoint's calls must not hold the database)."""
    with one_read(db, embedder):
        return run_plan(db, step.plan(ontology, embedder is not None), embedder)


async def on_each_async(db: AsyncDatabase, step: OnEach, ontology: Ontology, embedder: Embedder | None) -> Any:
    """:func:`on_each` on an asynchronous connection."""
    async with one_read(db, embedder):
        return await run_plan_async(db, step.plan(ontology, embedder is not None), embedder)


_Stamp = tuple[int, int, int] | None


def _stamp(placement: Placement) -> _Stamp:
    """What tells that a placement's file changed (its inode, size and time), or None."""
    if placement.path is None:
        return None
    try:
        st = os.stat(placement.path)
    except OSError:
        return None  # gone or unreadable for now: the placement read last holds
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _reread(placement: Placement, stamp: _Stamp) -> tuple[Placement, _Stamp] | None:
    """The placement again, and its stamp, when its file changed since ``stamp``; else None.
    A memory that lives long follows the file: a server taken out of it (once it holds
    nothing) takes no more writes from a memory opened before, and one added is asked."""
    now = _stamp(placement)
    if now is None or now == stamp:
        return None
    assert placement.path is not None
    return read_placement(placement.path), now


def _switch(router: Router[Any] | AsyncRouter[Any], placement: Placement, stamp: _Stamp) -> None:
    """A router on the placement its file now holds: where each namespace lives is asked
    again, and the members of servers it no longer names as before are left, to be closed."""
    before, router.placement, router._stamp = router.placement, placement, stamp
    router._went.clear()
    for name in [n for n in router._members if placement.servers.get(n) != before.servers.get(n)]:
        router._retired.append(router._members.pop(name))


class Router(Generic[_M]):
    """One member (a memory on one server) per server, opened when first needed; the server
    of each namespace."""

    def __init__(
        self,
        placement: Placement,
        open_member: Callable[[Server], _M],
        notes: Callable[[_M, str | None], _Notes],
        holds: Callable[[_M, str], str | None],
    ):
        self.placement = placement
        self._stamp = _stamp(placement)
        self._open = open_member
        self._notes = notes
        self._holds = holds
        self._members: dict[str, _M] = {}
        self._retired: list[_M] = []  # members of servers the file no longer names, to close
        self._went: dict[str, str] = {}  # namespaces found moved, and where to
        self._lock = threading.Lock()

    def follow(self) -> None:
        """Read the placement's file again if it changed: what was found of where each
        namespace lives is asked again, and the servers it no longer names are left."""
        changed = _reread(self.placement, self._stamp)
        if changed is not None:
            with self._lock:
                _switch(self, *changed)

    def member(self, name: str) -> _M:
        with self._lock:
            if name not in self._members:
                self._members[name] = self._open(self.placement.server(name))
            return self._members[name]

    def members(self) -> list[_M]:
        return [self.member(name) for name in sorted(self.placement.servers)]

    def opened(self) -> list[_M]:
        with self._lock:
            return [*self._members.values(), *self._retired]

    def _placed(self, namespace: str) -> str:
        return self._went.get(namespace) or self.home_of(namespace)

    def home_of(self, namespace: str) -> str:
        """The server a namespace lives on: the one it is pinned to; else, of the servers in
        the hash's order, the first that holds it (a server added to the placement ranks first
        for namespaces that live elsewhere), or the hash's first for a namespace none holds."""
        if namespace in self.placement.pinned or len(self.placement.servers) == 1:
            return self.placement.home(namespace).name
        ranked = self.placement.ranked(namespace)
        held = [self._held(n, namespace) for n in ranked]
        name = self._went[namespace] = _home(ranked, held)
        return name

    def _held(self, name: str, namespace: str) -> str | None:
        """What the server ``name`` holds of the namespace: nothing when it has no graph yet."""
        try:
            return self._holds(self.member(name), namespace)
        except NotFound:
            return None

    def server_of(self, namespace: str) -> str:
        """The name of the server the namespace is on: where the placement puts it, or where
        the note it left there (and on the next) sends it."""
        name = self._placed(namespace)
        for _ in range(len(self.placement.servers) + 1):
            note = self._notes(self.member(name), namespace).get(namespace)
            if note is None or note[1] != "moved":
                return name
            name = self._went[namespace] = note[0]
        raise _circle(namespace)

    def on(self, namespace: str, call: Callable[[_M], _T], *, write: bool) -> _T:
        """``call`` on the member of the namespace's server. A read first asks that server
        whether the namespace left it; a write learns it from the write's refusal. Either way
        the call goes on where it went (a write to a namespace being moved is refused)."""
        self.follow()
        name = self._placed(namespace) if write else self.server_of(namespace)
        for _ in range(len(self.placement.servers) + 1):
            try:
                return call(self.member(name))
            except NamespaceMoved as exc:
                if exc.moving:
                    raise
                name = self._went[namespace] = exc.server
        raise _circle(namespace)

    def everywhere(self, call: Callable[[_M], _T]) -> list[tuple[_T, _Notes]]:
        """``call`` on every server at once, each with the notes of the namespaces that left it.
        A server that holds nothing of what is asked (:class:`NotFound`: no such entity, or no
        graph yet) is passed over; when none holds it, the first server's answer is raised."""
        self.follow()
        names = sorted(self.placement.servers)

        def one(name: str) -> tuple[_T, _Notes] | NotFound:
            try:
                m = self.member(name)
                return call(m), self._notes(m, None)
            except NotFound as exc:
                return exc

        with ThreadPoolExecutor(max_workers=len(names)) as pool:
            return _answered(list(pool.map(one, names)))


class AsyncRouter(Generic[_M]):
    """:class:`Router` for asyncio."""

    def __init__(
        self,
        placement: Placement,
        open_member: Callable[[Server], Awaitable[_M]],
        notes: Callable[[_M, str | None], Awaitable[_Notes]],
        holds: Callable[[_M, str], Awaitable[str | None]],
    ):
        self.placement = placement
        self._stamp = _stamp(placement)
        self._open = open_member
        self._notes = notes
        self._holds = holds
        self._members: dict[str, _M] = {}
        self._retired: list[_M] = []
        self._went: dict[str, str] = {}
        self._lock = asyncio.Lock()

    async def follow(self) -> None:
        """See :meth:`Router.follow`."""
        changed = _reread(self.placement, self._stamp)
        if changed is not None:
            async with self._lock:
                _switch(self, *changed)

    async def member(self, name: str) -> _M:
        async with self._lock:
            if name not in self._members:
                self._members[name] = await self._open(self.placement.server(name))
            return self._members[name]

    def opened(self) -> list[_M]:
        return [*self._members.values(), *self._retired]

    async def _placed(self, namespace: str) -> str:
        return self._went.get(namespace) or await self.home_of(namespace)

    async def home_of(self, namespace: str) -> str:
        """See :meth:`Router.home_of`."""
        if namespace in self.placement.pinned or len(self.placement.servers) == 1:
            return self.placement.home(namespace).name
        ranked = self.placement.ranked(namespace)
        held = [await self._held(n, namespace) for n in ranked]
        name = self._went[namespace] = _home(ranked, held)
        return name

    async def _held(self, name: str, namespace: str) -> str | None:
        """See :meth:`Router._held`."""
        try:
            return await self._holds(await self.member(name), namespace)
        except NotFound:
            return None

    async def server_of(self, namespace: str) -> str:
        name = await self._placed(namespace)
        for _ in range(len(self.placement.servers) + 1):
            note = (await self._notes(await self.member(name), namespace)).get(namespace)
            if note is None or note[1] != "moved":
                return name
            name = self._went[namespace] = note[0]
        raise _circle(namespace)

    async def on(self, namespace: str, call: Callable[[_M], Awaitable[_T]], *, write: bool) -> _T:
        await self.follow()
        name = await self._placed(namespace) if write else await self.server_of(namespace)
        for _ in range(len(self.placement.servers) + 1):
            try:
                return await call(await self.member(name))
            except NamespaceMoved as exc:
                if exc.moving:
                    raise
                name = self._went[namespace] = exc.server
        raise _circle(namespace)

    async def everywhere(self, call: Callable[[_M], Awaitable[_T]]) -> list[tuple[_T, _Notes]]:
        """See :meth:`Router.everywhere`."""
        await self.follow()

        async def one(name: str) -> tuple[_T, _Notes] | NotFound:
            try:
                m = await self.member(name)
                return await call(m), await self._notes(m, None)
            except NotFound as exc:
                return exc

        return _answered(list(await asyncio.gather(*(one(name) for name in sorted(self.placement.servers)))))


def _home(ranked: list[str], held: list[str | None]) -> str:
    """Of servers in the hash's order and what each holds of a namespace: the one it is leaving
    (its writes are refused there until the move is done, where the copy a move is making
    would take them), else the first that holds it, else the hash's first."""
    pairs = list(zip(ranked, held, strict=True))
    leaving = [name for name, got in pairs if got == "moving"]
    return next(iter(leaving + [name for name, got in pairs if got is not None]), ranked[0])


def _answered(got: list[tuple[_T, _Notes] | NotFound]) -> list[tuple[_T, _Notes]]:
    """The servers' answers, those that held nothing of it passed over (the first one's
    refusal raised when every server's was one)."""
    answers = [g for g in got if not isinstance(g, NotFound)]
    if not answers and got:
        first = got[0]
        assert isinstance(first, NotFound)
        raise first
    return answers


def _circle(namespace: str) -> AgeFactsError:
    return AgeFactsError(
        f"namespace {namespace!r}: the servers' notes of where it moved lead round in a circle; "
        "`agefacts move` it again to the server that holds it"
    )


# -- databases of a placement, for the command line and a move ---------------------------------------
def database_router(placement: Placement, graph: str, *, create: bool = False) -> Router[Database]:
    """A router whose members are the servers' databases (connected when first needed)."""

    def open_db(server: Server) -> Database:
        return Database(server.dsn, graph, create=create, server=server.name).connect()

    return Router(placement, open_db, lambda db, ns: ledger.moves(db, None if ns is None else [ns]), ledger.holds)


def home_server(placement: Placement, graph: str, namespace: str) -> Server:
    """The server ``namespace`` lives on now, following the notes a moved one left: where a
    command that opens one database goes."""
    router = database_router(placement, graph)
    try:
        return placement.server(router.server_of(namespace))
    finally:
        close_all(router)


def close_all(router: Router[Database]) -> None:
    for db in router.opened():
        db.close()


def load_placed(
    placement: Placement,
    graph: str,
    paths: Iterable[str | Path],
    ontology: Ontology,
    *,
    force: bool = False,
    via: str = "bulk",
    progress: Callable[[int, str], None] | None = None,
    stop: Callable[[], bool] | None = None,
    batch_statements: int = 5000,
    tune_interpreter: bool = False,
    workers: int = 1,
) -> Summary:
    """Load every conversation under ``paths`` into the server of its namespace: the servers
    are written at once, one thread each; each conversation as :func:`agefacts.load_paths`
    would (whole or not at all), the outcomes in the order the conversations were read."""
    router = database_router(placement, graph, create=True)
    slots: list[Outcome | None] = []
    by_server: dict[str, list[tuple[int, str, Conversation]]] = {}
    server_of = functools.cache(router.server_of)  # asked of its server once per namespace
    try:
        for source, item in read_told(list(paths), progress):
            if isinstance(item, InputError):
                slots.append(Outcome(source, None, None, "failed", str(item)))
                continue
            name = server_of(item.namespace)
            by_server.setdefault(name, []).append((len(slots), source, item))
            slots.append(None)

        def one(name: str) -> list[tuple[int, Outcome]]:
            todo = by_server[name]
            loader = Loader(
                router.member(name),
                ontology,
                force=force,
                via=via,
                batch_statements=batch_statements,
                tune_interpreter=tune_interpreter,
                workers=workers,
            )
            got: list[tuple[int, Outcome]] = []
            try:
                for (i, _, _), outcome in zip(todo, loader.load_many(((s, c) for _, s, c in todo), stop), strict=False):
                    got.append((i, outcome))
            except KeyboardInterrupt:
                pass  # what is written is whole; the rest is left for the next run
            return got

        with ThreadPoolExecutor(max_workers=max(1, len(by_server))) as pool:
            for got in pool.map(one, sorted(by_server)):
                for i, outcome in got:
                    slots[i] = outcome
        summary = Summary()
        summary.outcomes = [o for o in slots if o is not None]
        interrupted = stop is not None and stop() and any(o is None for o in slots)
        if interrupted:
            raise LoadInterrupted(summary)
        return summary
    finally:
        close_all(router)


def move(
    placement: Placement,
    namespace: str,
    to: str,
    graph: str,
    *,
    progress: Callable[[str], None] = lambda step: None,
) -> Placement:
    """Move a namespace's memory to server ``to`` and return the placement that says so
    (its file rewritten). In steps, each safe to run again, so that a move interrupted
    anywhere is finished by running it again:

    1. the server it leaves notes the move: from then on it refuses writes to the namespace
       (waiting for those under way), with a sentence that says to send them again later;
    2. its conversations are exported and loaded into ``to`` (what ``to`` holds of the
       namespace and the server does not is forgotten there first);
    3. the namespace's digests on both servers are compared: a difference stops the move
       there, the writes still refused (moving it back to where it is cancels the move);
    4. the placement pins the namespace to ``to`` (unless a cancel ran meanwhile), and the
       server it left notes that it went (a process whose placement does not say so yet is
       sent on); from here ``to`` is where it lives, and a move run again copies nothing;
    5. it is forgotten on the server it left, once ``to`` holds every conversation it held.

    ``progress`` is told each step as it is done."""
    target = placement.server(to)
    router = database_router(placement, graph, create=True)
    try:
        home = router.home_of(namespace)
        source: str | None = home
        if home == to:
            # Where it is: a move away from here under way is cancelled (this server's own
            # note says so, whatever other servers' notes of earlier moves say); otherwise a
            # move here that switched the placement is finished.
            cancelled = _cancel(router, namespace, to)
            source = None if cancelled else _left_for(router, namespace, to)
            if source is None:
                if not cancelled and placement.home(namespace).name != to:
                    # Found there, not where the hash ranks it (a server added since): pinned, so
                    # that no reader has to look for it.
                    placement = placement.pin(namespace, to)
                progress(cancelled or f"namespace {namespace!r} is on server {to!r} already")
                return placement
        assert source is not None
        src, dst = router.member(source), router.member(target.name)
        ontology = ledger.graph_ontology_or_shipped(src)
        with src.transaction():
            ledger.lock_namespace(src, namespace)
            note = ledger.moves(src, [namespace]).get(namespace)
            # Switched already: the placement sends writes to ``to``, which holds all the
            # source held when the digests matched and may hold more since; nothing is copied.
            gone = (note is not None and note[1] == "moved") or home == to
            if not gone:
                ledger.note_move(src, namespace, to, "moving")
        progress(f"server {source!r} takes no writes to namespace {namespace!r} while it moves")
        if not gone:
            convs = ledger.export(src, namespace)
            there = set(ledger.loaded_ids(dst, namespace)) - {c.id for c in convs}
            if there:
                Loader(dst, ontology, moving=True).forget(namespace, sorted(there))
            failed = [
                o
                for o in Loader(dst, ontology, moving=True).load_many((f"{source}:{c.id}", c) for c in convs)
                if o.status == "failed"
            ]
            if failed:
                raise AgeFactsError(
                    f"moving namespace {namespace!r}: {len(failed)} conversation(s) could not be loaded on server "
                    f"{to!r} (first: {failed[0].conversation}: {failed[0].reason}); nothing is switched, and writes "
                    "stay refused: fix that and run the move again"
                )
            progress(f"{len(convs)} conversation(s) copied to server {to!r}")
            a, b = digest(src, namespace), digest(dst, namespace)
            if a != b:
                raise AgeFactsError(
                    f"moving namespace {namespace!r}: its graph on server {to!r} differs from server {source!r}'s "
                    f"(digests {b[:12]} and {a[:12]}); nothing is switched, and writes stay refused: run the move "
                    f"again, or move it to {source!r} to cancel"
                )
            progress(f"digests equal ({a[:12]})")
            with src.transaction():
                ledger.lock_namespace(src, namespace)
                if ledger.moves(src, [namespace]).get(namespace) != (to, "moving"):
                    raise AgeFactsError(
                        f"moving namespace {namespace!r}: the move was cancelled meanwhile (server {source!r} "
                        f"no longer notes it leaving for {to!r}); nothing is switched and it stays on {source!r}"
                    )
        placement = placement.pin(namespace, to)
        ledger.clear_move(dst, namespace)
        ledger.note_move(src, namespace, to, "moved")
        progress(f"the placement puts namespace {namespace!r} on server {to!r}")
        _copy_missing(src, dst, namespace, ontology, source, to)
        gone_ids = Loader(src, ontology, moving=True).forget(namespace)
        progress(f"{len(gone_ids)} conversation(s) forgotten on server {source!r}")
        return placement
    finally:
        close_all(router)


def _copy_missing(src: Database, dst: Database, namespace: str, ontology: Any, source: str, to: str) -> None:
    """Before the source forgets: each conversation it holds that the target lacks (something
    forgot the copy since the digests matched: a cancel run meanwhile) is copied again. What
    the target holds is never replaced, since writes go there once the placement switched."""
    held = set(ledger.loaded_ids(src, namespace))
    missing = held - set(ledger.loaded_ids(dst, namespace))
    if not missing:
        return
    convs = [c for c in ledger.export(src, namespace) if c.id in missing]
    for _ in Loader(dst, ontology, moving=True).load_many((f"{source}:{c.id}", c) for c in convs):
        pass  # a conversation that fails stays missing, and is named below
    still = held - set(ledger.loaded_ids(dst, namespace))
    if still:
        raise AgeFactsError(
            f"moving namespace {namespace!r}: server {to!r} lacks {len(still)} conversation(s) server {source!r} "
            f"holds (first: {sorted(still)[0]}), so nothing is forgotten on {source!r}: run the move again"
        )


def _left_for(router: Router[Database], namespace: str, to: str) -> str | None:
    """The server a namespace is leaving (or left) for ``to``, by the notes: a move that got
    as far as switching the placement, run again."""
    for name in sorted(router.placement.servers):
        if name != to and ledger.moves(router.member(name), [namespace]).get(namespace, ("", ""))[0] == to:
            return name
    return None


def _cancel(router: Router[Database], namespace: str, home: str) -> str | None:
    """A move of ``namespace`` away from ``home`` that did not switch, cancelled: its note
    cleared, its copy forgotten where it was going. None when there was none."""
    db = router.member(home)
    note = ledger.moves(db, [namespace]).get(namespace)
    if note is None or note[1] != "moving":
        return None
    other = router.member(note[0])
    Loader(other, ledger.graph_ontology_or_shipped(other), moving=True).forget(namespace)
    ledger.clear_move(db, namespace)
    return f"the move of namespace {namespace!r} to server {note[0]!r} is cancelled; it stays on {home!r}"
