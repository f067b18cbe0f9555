"""Memory for an assistant: one call adds what was said, one call recalls what is known.

``Memory`` (and ``AsyncMemory``, the same calls for asyncio) sits on the pipeline rather than
beside it: ``add`` extends a conversation with new messages, asks the model only for the user
turns that have no recorded extraction yet (through the same extractor and the same
recorded-file format), then grounds, gates and loads the conversation as ``agefacts load``
would, replacing its earlier version (or, when the messages only extend a conversation this
memory wrote last, writes what they add: :mod:`agefacts.append`). The ingest log keeps the conversation as loaded, so the
next ``add`` extends it and ``export`` writes it out to be loaded elsewhere. Reads return
typed results (:mod:`agefacts.results`): ``datetime`` and ``date`` values, not text. What an
add does with its messages, apart from the connections it holds, is :mod:`agefacts.adding`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from typing import Any, TypeVar

from . import adding, ledger
from .adding import Message, extended
from .asyncdb import AsyncDatabase
from .correction import correction
from .db import DEFAULT_GRAPH, Database, resolve_dsn
from .embed import Embedder
from .errors import ConversationMoved, UsageError, need_text
from .extract import DEFAULT_CONTEXT_TURNS, pending_turns
from .load import Loader
from .model_client import LLMClient
from .models import Conversation, Turn
from .named import run_named, run_named_async
from .ontology import Ontology, default_ontology
from .placed import (
    AsyncRouter,
    OnEach,
    Router,
    ask_everywhere,
    facts_everywhere,
    history_everywhere,
    on_each,
    on_each_async,
    run_everywhere,
    run_everywhere_async,
)
from .placement import Placement, Server, placement_from
from .reads import TimeArg, facts, facts_async, history, history_async
from .replica import AsyncReplicaReads, ReplicaReads, wal_position
from .results import Added, HistoryEntry, Known, MemoryFact, Recall, Remembered
from .retrieve import ask, ask_async

__all__ = ["AsyncMemory", "Memory"]

_log = logging.getLogger("agefacts.memory")
_R = TypeVar("_R")


def _run(work: Coroutine[Any, Any, _R]) -> _R:
    """Run ``work`` in an event loop of its own, as asyncio.run does, but without handling
    Ctrl-C: asyncio.run looks up the SIGINT handler once the task is done, and Python 3.11
    then formats the task with its result (the whole conversation) as text: 67 ms of an add
    to a conversation of 1,000 turns, growing with its length."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(work)
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


# -- a memory placed on several servers ------------------------------------------------------------
_NO_ONE_DATABASE = (
    "this memory is placed on several servers (a placement), each with a database of its own; "
    "open one server's memory by its dsn to reach its database"
)


def _placement(
    dsn: str | None, placement: Placement | str | os.PathLike[str] | None, database: Database | None
) -> Placement | None:
    """The placement a memory is opened on: the one given, else ``$AGEFACTS_PLACEMENT`` when
    neither a dsn nor a database is given; None for one database."""
    if sum(x is not None for x in (dsn, placement, database)) > 1:
        raise UsageError(
            "give a memory a dsn or a database (one database), or a placement (several servers): one of them"
        )
    return placement_from(placement) if dsn is None and database is None else None


def _placed_namespace(namespace: str | None) -> str:
    if namespace is None:
        raise UsageError("a memory placed on several servers needs namespace= (whose memory): it says which server")
    return namespace


def _across(namespace: str | None, all_namespaces: bool) -> bool:
    """Whether a read of a placed memory asks every server (``all_namespaces``) or one (a
    namespace given is read alone, as on one database)."""
    if namespace is not None:
        return False
    if all_namespaces:
        return True
    raise UsageError(
        "a memory placed on several servers reads one namespace (namespace=) or every one "
        "(all_namespaces=True), which asks every server"
    )


def _new(cls: type, base: type, placed_cls: type, dsn: str | None, options: dict[str, Any]) -> Any:
    """A new ``cls``, or over a placement (read here once) the placed memory ``placed_cls``:
    the one place a memory routes."""
    placed = _placement(dsn, options.get("placement"), options.get("database"))
    if placed is None:
        return object.__new__(cls)
    if cls is not base:
        raise UsageError(f"a subclass of {base.__name__} reads one database: give it a dsn, not a placement")
    memory: Any = object.__new__(placed_cls)
    memory._placement_read = placed
    return memory


class Memory:
    """An assistant's memory in one graph: ``add`` what was said, ``ask``/``facts``/
    ``history`` what is known, ``forget`` and ``export`` a namespace's conversations.

    ``dsn`` is a PostgreSQL with AGE (default: ``$AGEFACTS_DSN``, then the embedded engine,
    started if needed); ``ontology`` gates and judges facts (default: the one the graph was
    last loaded with, else the shipped one); ``llm`` extracts the user turns that have no recording;
    ``tune_interpreter`` lets a load change the process's thread switch interval and garbage
    collector threshold while it runs (faster for a process that only loads; off, a memory
    leaves its host's interpreter alone); ``embedder`` adds the messages nearest a question in
    meaning to what ``ask`` finds (:mod:`agefacts.embed`; without one, words are searched);
    ``placement`` (a :class:`~agefacts.placement.Placement` or its file; without a ``dsn``,
    ``$AGEFACTS_PLACEMENT`` when set) spreads namespaces over several servers, each call going
    to its namespace's (:mod:`agefacts.placed`); ``replica`` is a streaming replica's dsn that
    reads go to once it holds this memory's own writes (:mod:`agefacts.replica`);
    ``database`` is a :class:`~agefacts.db.Database` to use instead of a dsn (connected here
    unless it is; the memory closes it); ``create=False`` opens an existing graph only (one
    that does not exist is an error that says so, as a memory that only reads wants). Use it
    as a context manager, or call :meth:`close`."""

    # What a write says where this memory has no one database of its own.
    _NOT_OPEN = _NO_ONE_DATABASE

    def __new__(cls, dsn: str | None = None, graph: str = DEFAULT_GRAPH, **options: Any) -> Memory:
        memory: Memory = _new(cls, Memory, _PlacedMemory, dsn, options)
        return memory

    def __init__(
        self,
        dsn: str | None = None,
        graph: str = DEFAULT_GRAPH,
        *,
        ontology: Ontology | None = None,
        llm: LLMClient | None = None,
        via: str = "bulk",
        context_turns: int = DEFAULT_CONTEXT_TURNS,
        tune_interpreter: bool = False,
        embedder: Embedder | None = None,
        placement: Placement | str | os.PathLike[str] | None = None,
        replica: str | None = None,
        database: Database | None = None,
        create: bool = True,
    ):
        self.llm = llm
        self.context_turns = context_turns
        self._via = via
        self.tune_interpreter = tune_interpreter
        self.embedder = embedder
        # One write at a time, as AsyncMemory's: a correction reads what it takes back and
        # writes in one step, which another thread's write must not come between.
        self._writing = threading.Lock()
        self._tails = adding.Tails()
        self._unwritten = adding.Unwritten()
        if database is None:
            database = Database(resolve_dsn(dsn), graph, create=create)
        _ = database.conn  # connected here, unless it was
        self._db: Database | None = database
        self._reads: ReplicaReads | None = None
        if replica is not None:
            self._reads = ReplicaReads(self._db, replica, database.graph)
        self._ontology = ontology

    @property
    def ontology(self) -> Ontology:
        """What gates and judges facts: the one given, else the one the graph was loaded with
        (or the shipped one), read when first needed (``facts`` does not need it)."""
        if self._ontology is None:
            self._ontology = ledger.graph_ontology_or_shipped(self.db)
        return self._ontology

    @ontology.setter
    def ontology(self, ontology: Ontology) -> None:
        self._ontology = ontology

    def _reading(self) -> Database:
        """Where a read goes: the replica once it holds this memory's writes, else here."""
        return self._reads.db() if self._reads is not None else self.db

    def _wrote(self, result: _R) -> _R:
        if self._reads is not None and self._db is not None:
            self._reads.wrote(wal_position(self._db))
        return result

    def _on_each(self, step: OnEach) -> Any:
        """This server's answer to a read of every namespace (on a placement's member)."""
        return on_each(self._reading(), step, self.ontology, self.embedder)

    @property
    def db(self) -> Database:
        """The database (a memory placed on several servers has one per server)."""
        if self._db is None:
            raise UsageError(_NO_ONE_DATABASE)
        return self._db

    def _writer(self) -> tuple[Database, Loader]:
        # A loader per write: a loader refuses one conversation met twice with other content,
        # which is what successive adds to one conversation are.
        if self._db is None:
            raise UsageError(self._NOT_OPEN)
        return self._db, Loader(self._db, self.ontology, via=self._via, tune_interpreter=self.tune_interpreter)

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._reads is not None:
            self._reads.close()
        if self._db is not None:
            self._db.close()

    def add(
        self,
        messages: Conversation | Sequence[Message],
        *,
        namespace: str | None = None,
        conversation: str | None = None,
        title: str | None = None,
    ) -> Added:
        """Add a conversation, or new messages of one (``namespace`` and ``conversation``
        say which), extract the user turns not yet recorded, and load it: in one call."""
        ns = messages.namespace if isinstance(messages, Conversation) else namespace
        cid = messages.id if isinstance(messages, Conversation) else conversation
        need_text(ns, "namespace= (whose memory)", optional=True)
        need_text(cid, "conversation= (which conversation)", optional=True)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise UsageError("Memory.add was called inside a running event loop; use AsyncMemory there")
        paid = self._unwritten.of((ns, cid))
        asked = 0
        raced: int | None = None
        start = adding.appendable(self._tails, self.ontology, messages, ns, cid, title) if self._via == "bulk" else None
        if start is not None:
            tail, conv = start
            before = adding.with_paid(conv, paid)
            conv, asked, errors = self._extract(before, paid)
            adding.remember_paid(self.db, before, conv, paid)
            done = adding.appended(self._tails, self._writer()[1], tail, conv, asked, errors)
            if done is not None:
                adding.forget_paid(self.db, conv, paid)
                self._unwritten.written((ns, cid))
                return self._wrote(done)
            raced = len(tail.conv.turns)
        # Built on the version read; when another writer loads one first, built again on that.
        for _ in range(adding.ADD_TRIES):
            stored, based_on = adding.stored_version(self.db, ns, cid, paid)
            before = adding.with_paid(extended(stored, messages, namespace, conversation, title, raced), paid)
            raced = len(stored.turns) if stored is not None else 0
            conv, n, errors = self._extract(before, paid)
            adding.remember_paid(self.db, before, conv, paid)
            asked += n
            try:
                added = adding.load_whole(self._writer()[1], conv, asked, errors, based_on)
            except ConversationMoved:
                continue
            self._tails.keep((conv.namespace, conv.id), conv)
            adding.forget_paid(self.db, conv, paid)
            self._unwritten.written((ns, cid))
            return self._wrote(added)
        raise adding.kept_changing(ns, cid)

    def _extract(self, conv: Conversation, paid: adding.Paid | None = None) -> tuple[Conversation, int, list[str]]:
        if pending_turns(conv) == 0:
            return conv, 0, []  # an event loop for nothing costs more than the rest of a short add
        if (again := adding.asked_already(conv, paid)) is not None:
            return conv, 0, again
        return _run(
            adding.extract_pending(
                self.llm,
                conv,
                self.ontology,
                self.context_turns,
                keep=lambda _, turn: adding.keep_paid(self.db, conv, [turn], paid) if paid is not None else None,
            )
        )

    def facts(
        self,
        entity: str = "user",
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        valid_at: TimeArg = None,
        known_at: TimeArg = None,
    ) -> list[MemoryFact]:
        """The facts about an entity (default: the namespace's owner), valid at ``valid_at``
        as known at ``known_at`` (both default to now)."""
        rows = facts(
            self._reading(),
            entity,
            namespace=namespace,
            all_namespaces=all_namespaces,
            valid_at=valid_at,
            known_at=known_at,
        )
        return [MemoryFact.from_row(r) for r in rows.dicts()]

    def history(
        self, entity: str, predicate: str, *, namespace: str | None = None, all_namespaces: bool = False
    ) -> list[HistoryEntry]:
        """An entity's values for one predicate over time, superseded and ended ones included."""
        rows = history(
            self._reading(),
            entity,
            predicate,
            namespace=namespace,
            all_namespaces=all_namespaces,
            ontology=self.ontology,
        )
        return [HistoryEntry.from_row(r) for r in rows.dicts()]

    def ask(
        self,
        question: str,
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        k: int = 10,
        valid_at: TimeArg = None,
        known_at: TimeArg = None,
    ) -> Recall:
        """The facts a question is about, ranked, with citations (see :mod:`agefacts.retrieve`)."""
        answer = ask(
            self._reading(),
            question,
            self.ontology,
            namespace=namespace,
            all_namespaces=all_namespaces,
            k=k,
            valid_at=valid_at,
            known_at=known_at,
            embedder=self.embedder,
        )
        return Recall.from_answer(answer)

    def correct(
        self,
        entity: str,
        predicate: str,
        said: str,
        *,
        namespace: str,
        by: str,
        instead: str | None = None,
        reason: str | None = None,
        at: TimeArg = None,
    ) -> Added:
        """Take one fact back (see :func:`correction`): ``memory.correct("user", "allergic_to",
        "peanuts", namespace="mei", by="assistant", instead="tree nuts")``. Forget the
        conversation it returns to undo it."""
        db, loader = self._writer()

        def work() -> Added:
            conv = correction(
                db, entity, predicate, said, namespace=namespace, by=by, instead=instead, reason=reason, at=at
            )
            return adding.load_correction(loader, conv)

        with self._writing:
            return self._wrote(work())

    def forget(self, namespace: str, conversations: Iterable[str] | str | None = None) -> list[str]:
        """Remove what the namespace's conversations (those named, or all) wrote; returns
        the ids forgotten."""
        _, loader = self._writer()
        wanted = adding.conversation_ids(conversations)
        self._tails.drop(namespace, wanted)
        with self._writing:
            return self._wrote(loader.forget(namespace, wanted))

    def export(self, namespace: str, conversations: Iterable[str] | str | None = None) -> list[Conversation]:
        """The namespace's conversations as loaded, with their recordings: loading them into
        an empty graph gives the same graph."""
        db, _ = self._writer()
        wanted = adding.conversation_ids(conversations)
        with self._writing:
            return ledger.export(db, namespace, wanted)

    def conversations(self, namespace: str) -> list[Remembered]:
        """The namespace's conversations in memory: each one's id (what ``forget`` takes),
        when it was loaded, and how many statements it gave."""
        need_text(namespace, "namespace= (whose memory)")
        rows = run_named(self._reading(), "conversations", {"namespace": namespace})
        return [Remembered.from_row(r) for r in rows.dicts()]

    def entities(self, namespace: str) -> list[Known]:
        """Who and what the namespace's memory knows: each entity's name (or role), type and
        the words it was mentioned by; ``facts`` says what is known about one."""
        need_text(namespace, "namespace= (whose memory)")
        return Known.listed(run_named(self._reading(), "entities_of", {"namespace": namespace}).dicts())


class AsyncMemory:
    """:class:`Memory` for asyncio: ``async with AsyncMemory(...) as memory``. Reads run on
    psycopg's asynchronous connection and the model is asked through httpx's asynchronous
    client; the write (the load of a conversation, and forget) runs the loader on a
    connection of its own in a worker thread, one write at a time, since the load is one
    transaction of many statements that the loader already overlaps with its own work."""

    _NOT_OPEN = "the memory is not open: use `async with AsyncMemory(...) as memory`"

    def __new__(cls, dsn: str | None = None, graph: str = DEFAULT_GRAPH, **options: Any) -> AsyncMemory:
        memory: AsyncMemory = _new(cls, AsyncMemory, _AsyncPlacedMemory, dsn, options)
        return memory

    def __init__(
        self,
        dsn: str | None = None,
        graph: str = DEFAULT_GRAPH,
        *,
        ontology: Ontology | None = None,
        llm: LLMClient | None = None,
        via: str = "bulk",
        context_turns: int = DEFAULT_CONTEXT_TURNS,
        tune_interpreter: bool = False,
        embedder: Embedder | None = None,
        placement: Placement | str | os.PathLike[str] | None = None,
        replica: str | None = None,
        create: bool = True,
    ):
        self._given_ontology = ontology
        self.ontology = ontology or default_ontology()  # until open() reads the graph's own
        self.llm = llm
        self.context_turns = context_turns
        self.tune_interpreter = tune_interpreter
        self.embedder = embedder
        self._dsn = dsn
        self._graph = graph
        self._create = create
        self._via = via
        self._db: Database | None = None
        self._adb: AsyncDatabase | None = None
        self._writing = asyncio.Lock()
        self._tails = adding.Tails()
        self._unwritten = adding.Unwritten()
        self._replica = replica
        self._reads: AsyncReplicaReads | None = None

    async def __aenter__(self) -> AsyncMemory:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> AsyncMemory:
        """Connect: the writer's connection sets up the graph if it is missing, then the
        reader's opens (on a placement, each server's when first needed)."""

        def writer() -> tuple[str, Database]:
            dsn = resolve_dsn(self._dsn)
            return dsn, Database(dsn, self._graph, create=self._create).connect()

        dsn, db = await asyncio.to_thread(writer)
        self._db = db
        if self._given_ontology is None:
            self.ontology = await asyncio.to_thread(ledger.graph_ontology_or_shipped, db)
        self._adb = await AsyncDatabase(dsn, self._graph).connect()
        if self._replica is not None:
            self._reads = AsyncReplicaReads(self._adb, self._replica, self._graph)
        return self

    async def close(self) -> None:
        if self._reads is not None:
            await self._reads.close()
            self._reads = None
        if self._adb is not None:
            await self._adb.close()
        if self._db is not None:
            await asyncio.to_thread(self._db.close)
        self._adb = self._db = None

    def _reader(self) -> AsyncDatabase:
        if self._adb is None:
            raise UsageError("the memory is not open: use `async with AsyncMemory(...) as memory`")
        return self._adb

    async def _reading(self) -> AsyncDatabase:
        """Where a read goes: the replica once it holds this memory's writes, else the primary."""
        return await self._reads.db() if self._reads is not None else self._reader()

    async def _wrote(self, result: _R) -> _R:
        if self._reads is not None and self._db is not None:
            self._reads.wrote(await asyncio.to_thread(wal_position, self._db))
        return result

    async def _on_each(self, step: OnEach) -> Any:
        """See :meth:`Memory._on_each`."""
        return await on_each_async(await self._reading(), step, self.ontology, self.embedder)

    def _writer(self) -> tuple[Database, Loader]:
        # A loader per write: a loader refuses one conversation met twice with other content,
        # which is what successive adds to one conversation are.
        if self._db is None:
            raise UsageError(self._NOT_OPEN)
        return self._db, Loader(self._db, self.ontology, via=self._via, tune_interpreter=self.tune_interpreter)

    def _keeper(self, conv: Conversation, paid: adding.Paid) -> Callable[[int, Turn], Awaitable[None]]:
        """Keeps each turn the model answers (:func:`adding.keep_paid`), on the writer's connection,
        one add at a time, off the event loop."""

        async def keep(_: int, turn: Turn) -> None:
            async with self._writing:
                await asyncio.to_thread(adding.keep_paid, self._writer()[0], conv, [turn], paid)

        return keep

    async def add(
        self,
        messages: Conversation | Sequence[Message],
        *,
        namespace: str | None = None,
        conversation: str | None = None,
        title: str | None = None,
    ) -> Added:
        """See :meth:`Memory.add`."""
        ns = messages.namespace if isinstance(messages, Conversation) else namespace
        cid = messages.id if isinstance(messages, Conversation) else conversation
        need_text(ns, "namespace= (whose memory)", optional=True)
        need_text(cid, "conversation= (which conversation)", optional=True)
        db, _ = self._writer()
        paid = self._unwritten.of((ns, cid))
        asked = 0
        raced: int | None = None
        if self._via == "bulk":
            # No connection is used: the tail is made (once, for a chat first met) off the loop.
            start = await asyncio.to_thread(adding.appendable, self._tails, self.ontology, messages, ns, cid, title)
            if start is not None:
                tail, conv = start
                before = adding.with_paid(conv, paid)
                conv, asked, errors = await adding.extract_pending(
                    self.llm, before, self.ontology, self.context_turns, paid, self._keeper(before, paid)
                )
                async with self._writing:
                    await asyncio.to_thread(adding.remember_paid, db, before, conv, paid)
                    done = await asyncio.to_thread(
                        adding.appended, self._tails, self._writer()[1], tail, conv, asked, errors
                    )
                    if done is not None:
                        await asyncio.to_thread(adding.forget_paid, db, conv, paid)
                if done is not None:
                    self._unwritten.written((ns, cid))
                    return await self._wrote(done)
                raced = len(tail.conv.turns)
        for _ in range(adding.ADD_TRIES):
            # The writer's one connection serves one add at a time; the model is asked outside
            # the lock, so adds to different conversations wait for it side by side (and one
            # that another add overtook is built again on what that add loaded).
            async with self._writing:
                stored, based_on = await asyncio.to_thread(adding.stored_version, db, ns, cid, paid)
            before = adding.with_paid(extended(stored, messages, namespace, conversation, title, raced), paid)
            raced = len(stored.turns) if stored is not None else 0
            conv, n, errors = await adding.extract_pending(
                self.llm, before, self.ontology, self.context_turns, paid, self._keeper(before, paid)
            )
            asked += n
            try:
                async with self._writing:
                    await asyncio.to_thread(adding.remember_paid, db, before, conv, paid)
                    added = await asyncio.to_thread(adding.load_whole, self._writer()[1], conv, asked, errors, based_on)
                    await asyncio.to_thread(adding.forget_paid, db, conv, paid)
            except ConversationMoved:
                continue
            self._tails.keep((conv.namespace, conv.id), conv)
            self._unwritten.written((ns, cid))
            return await self._wrote(added)
        raise adding.kept_changing(ns, cid)

    async def facts(
        self,
        entity: str = "user",
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        valid_at: TimeArg = None,
        known_at: TimeArg = None,
    ) -> list[MemoryFact]:
        """See :meth:`Memory.facts`."""
        rows = await facts_async(
            await self._reading(),
            entity,
            namespace=namespace,
            all_namespaces=all_namespaces,
            valid_at=valid_at,
            known_at=known_at,
        )
        return [MemoryFact.from_row(r) for r in rows.dicts()]

    async def history(
        self, entity: str, predicate: str, *, namespace: str | None = None, all_namespaces: bool = False
    ) -> list[HistoryEntry]:
        """See :meth:`Memory.history`."""
        rows = await history_async(
            await self._reading(),
            entity,
            predicate,
            namespace=namespace,
            all_namespaces=all_namespaces,
            ontology=self.ontology,
        )
        return [HistoryEntry.from_row(r) for r in rows.dicts()]

    async def ask(
        self,
        question: str,
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        k: int = 10,
        valid_at: TimeArg = None,
        known_at: TimeArg = None,
    ) -> Recall:
        """See :meth:`Memory.ask`."""
        answer = await ask_async(
            await self._reading(),
            question,
            self.ontology,
            namespace=namespace,
            all_namespaces=all_namespaces,
            k=k,
            valid_at=valid_at,
            known_at=known_at,
            embedder=self.embedder,
        )
        return Recall.from_answer(answer)

    async def correct(
        self,
        entity: str,
        predicate: str,
        said: str,
        *,
        namespace: str,
        by: str,
        instead: str | None = None,
        reason: str | None = None,
        at: TimeArg = None,
    ) -> Added:
        """See :meth:`Memory.correct`."""
        db, loader = self._writer()

        def work() -> Added:
            conv = correction(
                db, entity, predicate, said, namespace=namespace, by=by, instead=instead, reason=reason, at=at
            )
            return adding.load_correction(loader, conv)

        async with self._writing:
            return await self._wrote(await asyncio.to_thread(work))

    async def forget(self, namespace: str, conversations: Iterable[str] | str | None = None) -> list[str]:
        """See :meth:`Memory.forget`."""
        _, loader = self._writer()
        wanted = adding.conversation_ids(conversations)
        self._tails.drop(namespace, wanted)
        async with self._writing:
            return await self._wrote(await asyncio.to_thread(loader.forget, namespace, wanted))

    async def export(self, namespace: str, conversations: Iterable[str] | str | None = None) -> list[Conversation]:
        """See :meth:`Memory.export`."""
        db, _ = self._writer()
        wanted = adding.conversation_ids(conversations)
        async with self._writing:
            return await asyncio.to_thread(ledger.export, db, namespace, wanted)

    async def conversations(self, namespace: str) -> list[Remembered]:
        """See :meth:`Memory.conversations`."""
        need_text(namespace, "namespace= (whose memory)")
        rows = await run_named_async(await self._reading(), "conversations", {"namespace": namespace})
        return [Remembered.from_row(r) for r in rows.dicts()]

    async def entities(self, namespace: str) -> list[Known]:
        """See :meth:`Memory.entities`."""
        need_text(namespace, "namespace= (whose memory)")
        return Known.listed(
            (await run_named_async(await self._reading(), "entities_of", {"namespace": namespace})).dicts()
        )


class _PlacedMemory(Memory):
    """:class:`Memory` over a placement's servers (``Memory(placement=...)``): each call goes
    to the memory of its namespace's server, a read of every namespace to every server at once
    (:mod:`agefacts.placed`). The one place a memory routes."""

    _placement_read: Placement

    def __init__(
        self,
        dsn: str | None = None,
        graph: str = DEFAULT_GRAPH,
        *,
        ontology: Ontology | None = None,
        llm: LLMClient | None = None,
        via: str = "bulk",
        context_turns: int = DEFAULT_CONTEXT_TURNS,
        tune_interpreter: bool = False,
        embedder: Embedder | None = None,
        placement: Placement | str | os.PathLike[str] | None = None,
        replica: str | None = None,
        database: Database | None = None,
        create: bool = True,
    ):
        placed = self._placement_read  # read by __new__
        if replica is not None:
            raise UsageError("on a placement, each server names its replica (replica = ... beside its dsn)")
        self.llm = llm
        self.context_turns = context_turns
        self._via = via
        self.tune_interpreter = tune_interpreter
        self.embedder = embedder
        self.ontology = ontology or default_ontology()
        self._db = None
        self._reads = None

        def member(server: Server) -> Memory:
            return Memory(
                database=Database(server.dsn, graph, create=create, server=server.name),
                ontology=ontology,
                llm=llm,
                via=via,
                context_turns=context_turns,
                tune_interpreter=tune_interpreter,
                embedder=embedder,
                replica=server.replica,
            )

        self._router: Router[Memory] = Router(
            placed,
            member,
            lambda m, ns: ledger.moves(m.db, None if ns is None else [ns]),
            lambda m, ns: ledger.holds(m.db, ns),
        )

    def close(self) -> None:
        for m in self._router.opened():
            m.close()

    def add(
        self,
        messages: Conversation | Sequence[Message],
        *,
        namespace: str | None = None,
        conversation: str | None = None,
        title: str | None = None,
    ) -> Added:
        ns = messages.namespace if isinstance(messages, Conversation) else namespace
        need_text(ns, "namespace= (whose memory)", optional=True)
        return self._router.on(
            _placed_namespace(ns),
            lambda m: m.add(messages, namespace=namespace, conversation=conversation, title=title),
            write=True,
        )

    def facts(
        self,
        entity: str = "user",
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        valid_at: TimeArg = None,
        known_at: TimeArg = None,
    ) -> list[MemoryFact]:
        if _across(namespace, all_namespaces):
            read = facts_everywhere(entity, valid_at, known_at)
            return [MemoryFact.from_row(r) for r in run_everywhere(self._router, read, Memory._on_each).dicts()]
        return self._router.on(
            str(namespace),
            lambda m: m.facts(entity, namespace=namespace, valid_at=valid_at, known_at=known_at),
            write=False,
        )

    def history(
        self, entity: str, predicate: str, *, namespace: str | None = None, all_namespaces: bool = False
    ) -> list[HistoryEntry]:
        if _across(namespace, all_namespaces):
            read = history_everywhere(entity, predicate)
            return [HistoryEntry.from_row(r) for r in run_everywhere(self._router, read, Memory._on_each).dicts()]
        return self._router.on(str(namespace), lambda m: m.history(entity, predicate, namespace=namespace), write=False)

    def ask(
        self,
        question: str,
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        k: int = 10,
        valid_at: TimeArg = None,
        known_at: TimeArg = None,
    ) -> Recall:
        if _across(namespace, all_namespaces):
            read = ask_everywhere(question, self.ontology, k, valid_at, known_at)
            return Recall.from_answer(run_everywhere(self._router, read, Memory._on_each))
        return self._router.on(
            str(namespace),
            lambda m: m.ask(question, namespace=namespace, k=k, valid_at=valid_at, known_at=known_at),
            write=False,
        )

    def correct(
        self,
        entity: str,
        predicate: str,
        said: str,
        *,
        namespace: str,
        by: str,
        instead: str | None = None,
        reason: str | None = None,
        at: TimeArg = None,
    ) -> Added:
        return self._router.on(
            _placed_namespace(namespace),
            lambda m: m.correct(
                entity, predicate, said, namespace=namespace, by=by, instead=instead, reason=reason, at=at
            ),
            write=True,
        )

    def forget(self, namespace: str, conversations: Iterable[str] | str | None = None) -> list[str]:
        return self._router.on(_placed_namespace(namespace), lambda m: m.forget(namespace, conversations), write=True)

    def export(self, namespace: str, conversations: Iterable[str] | str | None = None) -> list[Conversation]:
        return self._router.on(_placed_namespace(namespace), lambda m: m.export(namespace, conversations), write=False)

    def conversations(self, namespace: str) -> list[Remembered]:
        need_text(namespace, "namespace= (whose memory)")
        return self._router.on(namespace, lambda m: m.conversations(namespace), write=False)

    def entities(self, namespace: str) -> list[Known]:
        need_text(namespace, "namespace= (whose memory)")
        return self._router.on(namespace, lambda m: m.entities(namespace), write=False)


class _AsyncPlacedMemory(AsyncMemory):
    """:class:`AsyncMemory` over a placement's servers (see :class:`_PlacedMemory`)."""

    _placement_read: Placement

    def __init__(
        self,
        dsn: str | None = None,
        graph: str = DEFAULT_GRAPH,
        *,
        ontology: Ontology | None = None,
        llm: LLMClient | None = None,
        via: str = "bulk",
        context_turns: int = DEFAULT_CONTEXT_TURNS,
        tune_interpreter: bool = False,
        embedder: Embedder | None = None,
        placement: Placement | str | os.PathLike[str] | None = None,
        replica: str | None = None,
        create: bool = True,
    ):
        placed = self._placement_read  # read by __new__
        if replica is not None:
            raise UsageError("on a placement, each server names its replica (replica = ... beside its dsn)")
        self.llm = llm
        self.context_turns = context_turns
        self._via = via
        self.tune_interpreter = tune_interpreter
        self.embedder = embedder
        self.ontology = ontology or default_ontology()
        self._db = None
        self._adb = None
        self._reads = None

        async def member(server: Server) -> AsyncMemory:
            return await AsyncMemory(
                server.dsn,
                graph,
                ontology=ontology,
                llm=llm,
                via=via,
                context_turns=context_turns,
                tune_interpreter=tune_interpreter,
                embedder=embedder,
                replica=server.replica,
                create=create,
            ).open()

        async def notes(m: AsyncMemory, ns: str | None) -> dict[str, tuple[str, str]]:
            return await asyncio.to_thread(ledger.moves, m._writer()[0], None if ns is None else [ns])

        async def holds(m: AsyncMemory, ns: str) -> str | None:
            return await asyncio.to_thread(ledger.holds, m._writer()[0], ns)

        self._router: AsyncRouter[AsyncMemory] = AsyncRouter(placed, member, notes, holds)

    async def open(self) -> AsyncMemory:
        return self  # each server's memory opens when first needed

    async def close(self) -> None:
        for m in self._router.opened():
            await m.close()

    async def add(
        self,
        messages: Conversation | Sequence[Message],
        *,
        namespace: str | None = None,
        conversation: str | None = None,
        title: str | None = None,
    ) -> Added:
        ns = messages.namespace if isinstance(messages, Conversation) else namespace
        need_text(ns, "namespace= (whose memory)", optional=True)
        return await self._router.on(
            _placed_namespace(ns),
            lambda m: m.add(messages, namespace=namespace, conversation=conversation, title=title),
            write=True,
        )

    async def facts(
        self,
        entity: str = "user",
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        valid_at: TimeArg = None,
        known_at: TimeArg = None,
    ) -> list[MemoryFact]:
        if _across(namespace, all_namespaces):
            read = facts_everywhere(entity, valid_at, known_at)
            return [
                MemoryFact.from_row(r)
                for r in (await run_everywhere_async(self._router, read, AsyncMemory._on_each)).dicts()
            ]
        return await self._router.on(
            str(namespace),
            lambda m: m.facts(entity, namespace=namespace, valid_at=valid_at, known_at=known_at),
            write=False,
        )

    async def history(
        self, entity: str, predicate: str, *, namespace: str | None = None, all_namespaces: bool = False
    ) -> list[HistoryEntry]:
        if _across(namespace, all_namespaces):
            read = history_everywhere(entity, predicate)
            return [
                HistoryEntry.from_row(r)
                for r in (await run_everywhere_async(self._router, read, AsyncMemory._on_each)).dicts()
            ]
        return await self._router.on(
            str(namespace), lambda m: m.history(entity, predicate, namespace=namespace), write=False
        )

    async def ask(
        self,
        question: str,
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        k: int = 10,
        valid_at: TimeArg = None,
        known_at: TimeArg = None,
    ) -> Recall:
        if _across(namespace, all_namespaces):
            read = ask_everywhere(question, self.ontology, k, valid_at, known_at)
            return Recall.from_answer(await run_everywhere_async(self._router, read, AsyncMemory._on_each))
        return await self._router.on(
            str(namespace),
            lambda m: m.ask(question, namespace=namespace, k=k, valid_at=valid_at, known_at=known_at),
            write=False,
        )

    async def correct(
        self,
        entity: str,
        predicate: str,
        said: str,
        *,
        namespace: str,
        by: str,
        instead: str | None = None,
        reason: str | None = None,
        at: TimeArg = None,
    ) -> Added:
        return await self._router.on(
            _placed_namespace(namespace),
            lambda m: m.correct(
                entity, predicate, said, namespace=namespace, by=by, instead=instead, reason=reason, at=at
            ),
            write=True,
        )

    async def forget(self, namespace: str, conversations: Iterable[str] | str | None = None) -> list[str]:
        return await self._router.on(
            _placed_namespace(namespace), lambda m: m.forget(namespace, conversations), write=True
        )

    async def export(self, namespace: str, conversations: Iterable[str] | str | None = None) -> list[Conversation]:
        return await self._router.on(
            _placed_namespace(namespace), lambda m: m.export(namespace, conversations), write=False
        )

    async def conversations(self, namespace: str) -> list[Remembered]:
        need_text(namespace, "namespace= (whose memory)")
        return await self._router.on(namespace, lambda m: m.conversations(namespace), write=False)

    async def entities(self, namespace: str) -> list[Known]:
        need_text(namespace, "namespace= (whose memory)")
        return await self._router.on(namespace, lambda m: m.entities(namespace), write=False)
