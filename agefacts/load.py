"""Loading conversations into a graph.

Each conversation is one transaction: all of it or none of it. An ingest log (SQL, beside the
graph) records each conversation's content hash, counts and load time; a conversation whose
content was already loaded unchanged is skipped, and ``force`` loads it again. A conversation
whose content changed replaces what its earlier version wrote. Follow-ups go to the SQL
question queue. A conversation that fails is reported with its source and reason, and the
others still load.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import random
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from . import ledger
from .clock import StageClock, stage
from .compile import Plan, executable, plan, to_cypher
from .consolidate import result_of
from .db import Database
from .derive import entity_recompute, statement_recompute
from .errors import (
    AgeFactsError,
    ConversationMoved,
    DatabaseError,
    InputError,
    LoadInterrupted,
    NamespaceMoved,
    QueryError,
    UsageError,
)
from .inputs import input_size, read_conversations
from .keys import conversation_key, edge_key, user_key
from .models import Conversation
from .ontology import Ontology
from .preparing import Prepared, Preparing, Ready, Seen, batches, prepare_one
from .summary import Outcome, Summary

if TYPE_CHECKING:
    from .bulk import Batch, BulkWriter, ReadElsewhere
    from .firstload import FirstLoad
    from .retract import Stale

__all__ = ["VIA", "Loader", "load_paths", "read_told", "terminal_progress"]

VIA = ("bulk", "cypher")
_log = logging.getLogger("agefacts.load")


class _Abandoned(Exception):
    """Thrown into a first load's open transaction to roll it back."""


@dataclass
class _First:
    """An open first load: its transaction, its writer, and the batches it wrote (prepared
    entries, assembled rows, outcome slots), reported once it commits."""

    stack: contextlib.ExitStack[Any]
    load: FirstLoad
    held: list[tuple[list[Outcome | Prepared], Batch | None, list[Outcome | None]]] = field(default_factory=list)
    namespaces: set[str] = field(default_factory=set)  # each locked until the commit


class _PriorMoved(Exception):
    """Another loader changed what the ingest log holds for a conversation between our read
    and our write: it is prepared again against what is there now."""


_UNSET: Any = object()


_T = TypeVar("_T")


class Loader:
    """Loads conversations into ``db``'s graph.

    ``via="bulk"`` (the default) writes batches of conversations set-wise into the label
    tables (:mod:`agefacts.bulk`); ``via="cypher"`` executes the compiled Cypher line by line,
    the reference path. Both write the same graph, and both replace a changed conversation the
    same way: set-wise retraction of what its old version wrote, then the new version, then
    the recomputation of what the change touched. A batch (about ``batch_statements``
    statements; 5000 measured fastest, 19% faster than 1000 at 30k statements) is one
    transaction; if it fails, its conversations are retried one transaction each, so a
    conversation is always loaded entirely or not at all and one bad conversation cannot take
    others with it.

    Whether a conversation is new, unchanged or changed is decided against the ingest log,
    and checked again under a per-conversation lock inside the transaction that writes: a
    loader that finds another got there first prepares the conversation again, so loaders
    racing different versions of one conversation end with one of them, whole.
    """

    def __init__(
        self,
        db: Database,
        ontology: Ontology,
        *,
        force: bool = False,
        via: str = "bulk",
        batch_statements: int = 5000,
        batch_conversations: int = 1000,
        retries: int = 5,
        tune_interpreter: bool = False,
        moving: bool = False,
        workers: int = 1,
        worker_timeout: float | None = None,
        clock: StageClock | None = None,
        first_load: bool = True,
    ):
        if via not in VIA:
            raise ValueError(f"via must be one of {VIA}, not {via!r}")
        if batch_statements < 1 or batch_conversations < 1:
            raise ValueError("batch_statements and batch_conversations must be at least 1")
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.db = db
        self.ontology = ontology
        self.force = force
        self.via = via
        self.batch_statements = batch_statements
        self.batch_conversations = batch_conversations
        # Process-wide settings (the thread switch interval, the garbage collector's threshold)
        # changed while loads run: for a process that loads and does little else.
        self.tune_interpreter = tune_interpreter
        # Processes that prepare batches (grounding, gating, compiling) from a load's second
        # batch on; 1: a thread of this process prepares them.
        self.workers = workers
        # Seconds a worker process may take to answer for one batch before it is taken for
        # hung, killed, and the batch prepared here (None: agefacts.workers.DEFAULT_TIMEOUT).
        self.worker_timeout = worker_timeout
        # The loader of a move (agefacts.placement): it writes a namespace that is leaving.
        self.moving = moving
        # Where the CPU goes, by stage (agefacts bench); None: not counted.
        self.clock = clock
        self.retries = retries
        self._writer: BulkWriter | None = None
        # Why no more can be loaded in this run, once that is so: the connection is gone for
        # good, or the disk that holds the database is full (every later write would fail).
        self._lost: str | None = None
        self._seen: dict[tuple[str, str], Seen] = {}
        self._based_on: dict[tuple[str, str], str | None] = {}
        self.fallbacks: list[str] = []  # why a batch was written one conversation at a time
        # On a server, rows whose keys are new go in by COPY (agefacts.bulk); False writes
        # every row by the upsert, as on the embedded engine (the tests compare the two).
        self.copy_new = True
        # A load into a graph that holds none of agefacts' labels yet goes by the first-load
        # path (agefacts.firstload): one transaction, rows written before the indexes are
        # built. False: the ordinary path (the tests compare the two). On the embedded engine,
        # whose one session serves every client, other clients wait for it to commit.
        self.first_load = first_load
        # Rows a first load writes before it commits and goes on by the ordinary path: it keeps
        # every batch until then, to write them again by the ordinary path should it fail
        # (300,000 statements, about 1.5 million rows, grew the loading process by 2.1 GB).
        self.first_load_rows = 1_000_000
        # Namespaces it writes before it commits: it holds a lock on each until then, and a
        # server's lock table holds some thousands (max_locks_per_transaction, 64, times
        # max_connections, 100, by default).
        self.first_load_namespaces = 2_000
        self._first: _First | None = None
        self._first_tried = False
        self.first_loads = 0  # first loads committed (each a transaction of many batches)
        self._ontology_kept = False

    # -- the public calls ---------------------------------------------------------------------
    def load(self, conv: Conversation, source: str = "<conversation>", *, based_on: str | None = _UNSET) -> Outcome:
        """Load one conversation (see :meth:`load_many`). ``based_on`` is the content hash of
        the version it was made from (None: none was loaded), for a conversation built on
        what the graph held, as :meth:`agefacts.Memory.add` builds one: if another version
        is loaded meanwhile, :class:`ConversationMoved` is raised and nothing is written,
        where a plain load would replace that version with this one."""
        ident = (conv.namespace, conv.id)
        if based_on is not _UNSET:
            self._based_on[ident] = based_on
        try:
            (out,) = list(self.load_many([(source, conv)]))
        finally:
            self._based_on.pop(ident, None)
        return out

    def append(
        self,
        conv: Conversation,
        part: Plan,
        content_hash: str,
        *,
        based_on: str,
        first: int,
        turns: Sequence[str],
        mentions: Sequence[str] = (),
        source: str = "<conversation>",
    ) -> Outcome:
        """Write what the turns of ``conv`` from ``first`` on (``turns``: their JSON) add to
        the conversation loaded as ``based_on`` (``part``: see :func:`agefacts.append.append`):
        its mentions of ``mentions`` are written anew, the rest is added, and the ingest log
        keeps the new turns beside the document it holds. As for
        :meth:`load`, :class:`ConversationMoved` is raised and nothing is written if
        another version was loaded meanwhile."""
        if self.via != "bulk":
            raise UsageError("appending writes through the bulk path; load the whole conversation instead")
        from .bulk import assemble

        e = Prepared.of(source, conv, content_hash, based_on, part, "")
        ck = conversation_key(conv.namespace, conv.id)
        batch = assemble([part])

        self._keep_ontology()

        def work() -> None:
            self.db.ensure_labels(vertex=batch.vertex_labels, edge=batch.edge_labels)
            with self.db.transaction():
                self._check([e])
                writer = self._writer_for()
                writer.drop_edges("MENTIONED_IN", [edge_key("MENTIONED_IN", k, ck) for k in sorted(mentions)])
                writer.write_batch(batch)
                ledger.record_appended(self.db, e.loaded(), first, turns)

        try:
            self._attempt(work)
        except _PriorMoved:
            raise ConversationMoved(
                f"conversation {conv.id!r} of namespace {conv.namespace!r} was loaded by another "
                "writer after the version this one was built on was read"
            ) from None
        self.db.refresh_statistics()
        return e.outcome()

    def _keep_ontology(self) -> None:
        """Reads judge facts by the ontology the graph was loaded with (ledger): kept once a
        loader."""
        if not self._ontology_kept:
            self._attempt(lambda: ledger.record_ontology(self.db, self.ontology))
            self._ontology_kept = True

    def load_many(
        self, items: Iterable[tuple[str, Conversation | InputError]], stop: Callable[[], bool] | None = None
    ) -> Iterator[Outcome]:
        """Load conversations as they come, in batches; yields one outcome per item, in order.

        While one batch is written, the next is ground, gated and compiled in a worker
        thread, so the database's work and Python's overlap instead of adding up. When
        ``stop()`` turns true, the batch being written is finished and the load ends there
        with ``KeyboardInterrupt``."""
        self.db.check_keys()
        run_seen: set[tuple[str, str]] = set()
        inflight: list[tuple[Callable[[], Ready], list[Outcome | None]]] = []
        # The Cypher path writes from the plans themselves, which stay where they are made.
        workers = self.workers if self.via == "bulk" else 1
        try:
            yield from self._load_many(items, stop, run_seen, inflight, workers)
        except BaseException:
            self._abandon_first()  # nothing of it was reported loaded
            raise
        if not self._lost:
            with stage(self.clock, "statistics"):
                self.db.refresh_statistics()

    def _load_many(
        self,
        items: Iterable[tuple[str, Conversation | InputError]],
        stop: Callable[[], bool] | None,
        run_seen: set[tuple[str, str]],
        inflight: list[tuple[Callable[[], Ready], list[Outcome | None]]],
        workers: int,
    ) -> Iterator[Outcome]:
        with Preparing(
            self.ontology, workers, self.tune_interpreter, self.worker_timeout, self.clock
        ).running() as preparing:
            for batch, pending in self._batches(items):
                if stop is not None and stop():
                    break
                idents = {(c.namespace, c.id) for _, c in batch}
                if idents & run_seen:
                    # A conversation of an earlier batch again: those batches must land first,
                    # so that this one is compared with them (the workers wait meanwhile).
                    while inflight:
                        yield from self._finish(*inflight.pop(0))
                    yield from self._close_first(preparing.read_elsewhere() if self._first else None)
                run_seen |= idents
                if batch:
                    self._keep_ontology()
                earlier = {i: self._seen[i] for i in idents if i in self._seen}
                prior = self._prior_hashes(sorted(idents)) if batch else {}
                for ident in idents & self._based_on.keys():
                    # Compared with the version it was built on, not with what is there now.
                    base = self._based_on[ident]
                    if base is None:
                        prior.pop(ident, None)
                    else:
                        prior[ident] = base
                inflight.append((preparing.submit(self.force, batch, prior, self.via, earlier), pending))
                while len(inflight) > preparing.ahead:
                    yield from self._finish(*inflight.pop(0))
            while inflight:
                # The last batch: the worker processes have nothing left to prepare, and read its
                # time (an incremental load's reading is most of its client's work), as they do
                # at a first load's end.
                last = preparing.read_elsewhere() if len(inflight) == 1 else None
                yield from self._finish(*inflight.pop(0), last)
            yield from self._close_first(preparing.read_elsewhere() if self._first else None)
            if stop is not None and stop():
                raise KeyboardInterrupt

    # -- batches ------------------------------------------------------------------------------
    def _batches(
        self, items: Iterable[tuple[str, Conversation | InputError]]
    ) -> Iterator[tuple[list[tuple[str, Conversation]], list[Outcome | None]]]:
        return batches(items, self.batch_statements, self.batch_conversations)

    def _finish(
        self, ready: Callable[[], Ready], pending: list[Outcome | None], read_elsewhere: ReadElsewhere | None = None
    ) -> Iterator[Outcome]:
        """Write a prepared batch (by the first-load path while one is open); its fact versions
        are read by ``read_elsewhere`` when given (:attr:`BulkWriter.read_elsewhere`)."""
        prepared, assembled, hashes = ready()
        for e in prepared:
            ident = e.ident if isinstance(e, Prepared) else (e.namespace or "", e.conversation or "")
            # The first place each conversation was met in this run, with its content (also for
            # one skipped as unchanged, so a second identical copy is skipped too).
            self._seen.setdefault(ident, Seen(e.source, hashes.get(ident)))
        if self._first_open(prepared, assembled):
            assert self._first is not None
            from .firstload import _NotFirstLoad

            try:
                self._first_write(prepared, assembled)
                self._first.held.append((prepared, assembled, pending))
                if (
                    self._first.load.rows >= self.first_load_rows
                    or len(self._first.namespaces) >= self.first_load_namespaces
                ):
                    yield from self._close_first()
                return
            except (AgeFactsError, _PriorMoved, _NotFirstLoad) as exc:
                yield from self._first_failed(exc)
        yield from self._slots(pending, self._write(prepared, assembled, read_elsewhere))

    @staticmethod
    def _slots(pending: list[Outcome | None], written: list[Outcome]) -> Iterator[Outcome]:
        results = iter(written)
        for slot in pending:
            yield slot if slot is not None else next(results)

    # -- a first load (agefacts.firstload) -----------------------------------------------------
    def _first_open(self, prepared: list[Outcome | Prepared], assembled: Batch | None) -> bool:
        """Whether this batch goes by the first-load path: it does while one is open, and one
        opens at the first batch to write when the graph holds none of agefacts' labels."""
        if self._first is not None:
            return True
        if self._first_tried or assembled is None or self._lost or not any(isinstance(e, Prepared) for e in prepared):
            return False
        self._first_tried = True  # once per loader: after it, the graph has labels
        if not (self.first_load and self.via == "bulk" and self.copy_new) or self._based_on:
            return False
        from .firstload import FirstLoad

        try:
            if self.db.labels():
                return False
            stack = contextlib.ExitStack()
            stack.enter_context(self.db.transaction())
        except DatabaseError as exc:
            _log.info("no first load (%s); the ordinary path loads", exc)
            return False
        self._writer = None  # label ids read inside this transaction are gone if it rolls back
        self._first = _First(stack, FirstLoad(self._writer_for()))
        return True

    def _first_write(self, prepared: list[Outcome | Prepared], assembled: Batch | None) -> None:
        assert self._first is not None
        entries = [e for e in prepared if isinstance(e, Prepared)]
        if not entries or assembled is None:
            return
        if any(e.replaces for e in entries):
            from .firstload import _NotFirstLoad

            raise _NotFirstLoad("a conversation replaces one the ingest log holds")
        with stage(self.clock, "lock and check"):
            self._check(entries, each=False)  # the namespaces alone (ledger.lock)
        self._first.namespaces.update(e.conv.namespace for e in entries)
        self._first.load.write_batch(assembled)
        with stage(self.clock, "ingest log"):
            self._record([e.loaded() for e in entries])

    def _close_first(self, read_elsewhere: ReadElsewhere | None = None) -> Iterator[Outcome]:
        """Finish and commit the open first load, and report its conversations; should that
        fail, write them again by the ordinary path."""
        first = self._first
        if first is None:
            return
        from .firstload import _NotFirstLoad

        try:
            first.load.finish(read_elsewhere)
            committing = None if self.clock is None else self.clock.mark()
            self._first = None
            first.stack.close()  # the commit
            self.first_loads += 1
            if self.clock is not None and committing is not None:
                self.clock.since("commit", committing)
        except (AgeFactsError, _NotFirstLoad) as exc:
            self._first = first
            yield from self._first_failed(exc)
            return
        for prepared, _, pending in first.held:
            yield from self._slots(pending, [e if isinstance(e, Outcome) else e.outcome() for e in prepared])

    def _first_failed(self, exc: BaseException) -> Iterator[Outcome]:
        """Roll the first load back and write its batches by the ordinary path."""
        assert self._first is not None
        held = self._first.held
        why = str(exc) or type(exc).__name__
        self.fallbacks.append(f"first load: {why}")
        _log.info("the first load was rolled back (%s); its %d batches go by the ordinary path", why, len(held))
        self._abandon_first()
        for prepared, assembled, pending in held:
            yield from self._slots(pending, self._write(prepared, assembled))

    def _abandon_first(self) -> None:
        first, self._first = self._first, None
        if first is None:
            return
        self._writer = None
        try:
            first.stack.__exit__(_Abandoned, _Abandoned(), None)  # the rollback
        except Exception as exc:  # a connection already lost: the server rolled it back
            _log.info("rolling the first load back: %s", exc)

    def _attempt(self, work: Callable[[], _T]) -> _T:
        """Run one unit of idempotent work (a whole transaction), retrying what a retry can
        resolve, a bounded number of times: a unique key or deadlock conflict with a
        concurrent writer (after a short random backoff), and a dropped connection (after
        reconnecting). Loading is idempotent, so work that may or may not have committed
        before the connection dropped is safe to run again."""
        for attempt in range(self.retries + 1):
            try:
                return work()
            except DatabaseError as exc:
                if exc.disk_full:
                    first_line = str(exc).splitlines()[0]
                    self._lost = f"the disk that holds the database is full ({first_line}): free space there first"
                    raise
                if attempt >= self.retries or not (exc.retryable or exc.connection_lost):
                    raise
                if exc.connection_lost:
                    try:
                        self.db.reconnect(retries=self.retries)
                    except DatabaseError as gone:
                        self._lost = f"the database connection was lost ({gone})"
                        raise
                    self._writer = None
                else:
                    time.sleep(0.02 * (2**attempt) * (0.5 + random.random()))
        raise AssertionError("unreachable")  # pragma: no cover

    def _lost_outcome(self, source: str, conv: Conversation) -> Outcome:
        return Outcome(
            source,
            conv.id,
            conv.namespace,
            "failed",
            f"not loaded: {self._lost}; run the same command again to load the rest (what was loaded is skipped)",
        )

    def _prior_hashes(self, idents: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
        if self._lost:
            return {}
        try:
            with stage(self.clock, "ledger look-up"):
                hashes: dict[tuple[str, str], str] = self._attempt(lambda: ledger.prior_hashes(self.db, idents))
            return hashes
        except DatabaseError:
            if self._lost:
                return {}
            raise

    def _write(
        self, prepared: list[Outcome | Prepared], assembled: Batch | None, read_elsewhere: ReadElsewhere | None = None
    ) -> list[Outcome]:
        outcomes: list[Outcome | None] = [e if isinstance(e, Outcome) else None for e in prepared]
        todo = [(i, e) for i, e in enumerate(prepared) if isinstance(e, Prepared)]
        if self._lost:
            for i, e in todo:
                outcomes[i] = self._lost_outcome(e.source, e.conv)
            todo = []
        if todo and assembled is not None:
            entries = [e for _, e in todo]

            def batch() -> None:
                clock = self.clock
                with stage(clock, "labels"):
                    self.db.ensure_labels(vertex=assembled.vertex_labels, edge=assembled.edge_labels)
                with self.db.transaction():
                    with stage(clock, "lock and check"):
                        self._check(entries)
                    writer = self._writer_for()
                    with stage(clock, "retract"):
                        stale = writer.retract([conversation_key(*e.ident) for e in entries if e.replaces])
                    writer.read_elsewhere = read_elsewhere
                    try:
                        writer.write_batch(assembled, stale)
                    finally:
                        writer.read_elsewhere = None
                    with stage(clock, "ingest log"):
                        self._record([e.loaded() for e in entries])
                    committing = None if clock is None else clock.mark()
                if clock is not None and committing is not None:
                    clock.since("commit", committing)

            try:
                self._attempt(batch)
                for i, e in todo:
                    outcomes[i] = e.outcome()
                todo = []
            except (AgeFactsError, _PriorMoved) as exc:
                # Rolled back whole; each conversation again on its own, below.
                why = str(exc) or "another loader changed one of the batch's conversations"
                self.fallbacks.append(why)
                _log.info("a batch of %d conversations failed as one (%s); loading them one by one", len(entries), why)
        for i, e in todo:
            outcomes[i] = self._lost_outcome(e.source, e.conv) if self._lost else self._one(e)
        return [o for o in outcomes if o is not None]

    def _check(self, entries: list[Prepared], each: bool = True) -> None:
        now = ledger.lock(self.db, [e.ident for e in entries], moves=not self.moving, each=each)
        if any(now.get(e.ident) != e.prior for e in entries):
            raise _PriorMoved()

    def _one(self, entry: Prepared) -> Outcome:
        """One conversation in one transaction; prepared again when another loader moved
        what it is compared with."""
        current: Outcome | Prepared = entry
        for _ in range(self.retries + 1):
            if isinstance(current, Outcome):
                return current
            e = current
            try:
                self._attempt(functools.partial(self._write_one, e))
            except _PriorMoved:
                if e.ident in self._based_on:
                    raise ConversationMoved(
                        f"conversation {e.conv.id!r} of namespace {e.conv.namespace!r} was loaded by another "
                        "writer after the version this one was built on was read"
                    ) from None
                prior = self._prior_hashes([e.ident])
                current = prepare_one(self.ontology, self.force, e.source, e.conv, prior)
                continue
            except NamespaceMoved as exc:
                if e.ident in self._based_on:
                    raise  # a memory's add: it follows the namespace to its server
                return Outcome(e.source, e.conv.id, e.conv.namespace, "failed", str(exc))
            except AgeFactsError as exc:
                if self._lost:
                    return self._lost_outcome(e.source, e.conv)
                return Outcome(e.source, e.conv.id, e.conv.namespace, "failed", str(exc))
            return e.outcome()
        return Outcome(
            entry.source,
            entry.conv.id,
            entry.conv.namespace,
            "failed",
            "other loaders kept changing this conversation while it was being loaded; run the command again",
        )

    def _write_one(self, e: Prepared) -> None:
        p = e.plan or plan(e.conv, result_of(e.conv, self.ontology), self.ontology)
        self.db.ensure_labels(vertex=p.vertex_labels, edge=p.edge_labels)
        with self.db.transaction():
            with stage(self.clock, "lock and check"):
                self._check([e])
            writer = self._writer_for()
            with stage(self.clock, "retract"):
                stale = writer.retract([conversation_key(*e.ident)]) if e.replaces else None
            if self.via == "bulk":
                from .bulk import assemble

                writer.write_batch(assemble([p]), stale)
            else:
                writer.check_keys((v.label, v.k, v.props.get("namespace")) for v in p.vertices)
                for line in executable(to_cypher(p)):
                    self.db.cypher_raw(line)
                if stale:
                    self._recompute_cypher(writer.settle(stale))
                # Fact versions are the one rule Cypher cannot state (agefacts derive runs it
                # after compiled Cypher run by hand): here as on the bulk path.
                named = set(p.entities) | (stale.entities if stale else set())
                writer.refresh_versions(set(p.chains) | (stale.groups if stale else set()) | writer.chains_about(named))
            with stage(self.clock, "ingest log"):
                self._record([e.loaded()])

    def _recompute_cypher(self, left: Stale) -> None:
        """The Cypher path's recomputation of what a replaced conversation touched: the
        compiled Cypher's own rules, as a graph written by hand would run them."""
        for label, k in sorted(left.entities):
            for line in entity_recompute(label, k):
                self.db.cypher_raw(line)
        for sk in sorted(left.statements):
            self.db.cypher_raw(statement_recompute(sk))

    def derive(self, namespace: str | None = None, *, chunk: int = 2000) -> int:
        """Recompute every fact version of the graph (of one namespace) from the statements
        it holds, in one transaction: a graph written by hand (the compiled Cypher) or by an
        earlier agefacts then answers in Cypher as ``facts`` does. Loads do this for what
        they touch. What an earlier agefacts stored of write-time supersession
        (``SUPERSEDES`` edges, a statement's inferred ``valid_until``, ``superseded_at`` and
        ``valid_start``), which could disagree with the versions, is removed first. Returns
        how many chains were read."""
        self.db.check_keys()

        def work() -> int:
            with self.db.transaction():
                writer = self._writer_for()
                writer.drop_succession(namespace)
                chains = sorted(writer.every_chain(namespace))
                for i in range(0, len(chains), chunk):
                    writer.refresh_versions(set(chains[i : i + chunk]))
                return len(chains)

        try:
            return self._attempt(work)
        except DatabaseError as exc:
            raise self.db.refused(exc) from exc

    def forget(self, namespace: str, conversations: Sequence[str] | None = None) -> list[str]:
        """Remove what the namespace's conversations (those named, or all) wrote, as replacing
        each with nothing would: their messages, evidence and mentions go, statements and
        entities left with none go, and what they touched is recomputed from what remains.
        Their ingest-log and question rows go too. One transaction; returns the ids forgotten."""
        self.db.check_keys()
        try:
            return self._forget(namespace, conversations)
        except DatabaseError as exc:
            # A role that may only read is told what forgetting needs, not which table refused.
            raise self.db.refused(exc) from exc

    def _forget(self, namespace: str, conversations: Sequence[str] | None) -> list[str]:
        wanted = sorted(set(conversations)) if conversations is not None else None
        ids = self._attempt(lambda: ledger.loaded_ids(self.db, namespace, wanted))
        if wanted is not None and (unknown := sorted(set(wanted) - set(ids))):
            raise QueryError(
                f"namespace {namespace!r} has no conversation {', '.join(map(repr, unknown))} loaded in graph "
                f"{self.db.graph!r}; `agefacts query --name conversations --param namespace={namespace}` lists them"
            )
        if not ids:
            return []

        def work() -> None:
            with self.db.transaction():
                ledger.lock(self.db, [(namespace, i) for i in ids], moves=not self.moving)
                writer = self._writer_for()
                stale = writer.retract([conversation_key(namespace, i) for i in ids])
                if self.via == "bulk":
                    from .bulk import assemble

                    writer.write_batch(assemble([]), stale)
                else:
                    self._recompute_cypher(writer.settle(stale))
                    writer.refresh_versions(stale.groups | writer.chains_about(stale.entities))
                ledger.drop(self.db, namespace, ids)
                if not ledger.loaded_ids(self.db, namespace):
                    # Every load writes the owner, with no edge of its own: it goes with the
                    # namespace's last conversation (and only then, and only when bare).
                    writer.drop_if_bare(self.ontology.user_type, user_key(namespace))

        self._attempt(work)
        self.db.refresh_statistics()
        return list(ids)

    def _record(self, loaded: list[ledger.Loaded]) -> None:
        """The ledger rows of conversations just written, in their transaction."""
        ledger.record(self.db, loaded)

    def _writer_for(self) -> BulkWriter:
        from .bulk import BulkWriter

        if self._writer is None:
            self._writer = BulkWriter(self.db, copy_new=self.copy_new, clock=self.clock)
        return self._writer

    @property
    def copy_conflicts(self) -> int:
        """Batches whose copied rows met a key that existed (a racing writer's) and were
        upserted instead, on this loader's connection."""
        return self._writer.copy_conflicts if self._writer is not None else 0


def load_paths(
    db: Database,
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
    """Load every conversation found under ``paths``; see :class:`Loader` (and its
    ``tune_interpreter`` and ``workers``). On the embedded engine, a load its data folder has no room for is
    refused first (:func:`agefacts.engine.check_room`)."""
    from .engine import check_room

    paths = list(paths)
    check_room(db.dsn, input_size(paths))
    loader = Loader(
        db,
        ontology,
        force=force,
        via=via,
        batch_statements=batch_statements,
        tune_interpreter=tune_interpreter,
        workers=workers,
    )
    summary = Summary()
    try:
        for outcome in loader.load_many(read_told(paths, progress), stop):
            summary.outcomes.append(outcome)
    except KeyboardInterrupt:
        raise LoadInterrupted(summary) from None
    return summary


def read_told(
    paths: Sequence[str | Path], progress: Callable[[int, str], None] | None
) -> Iterator[tuple[str, Conversation | InputError]]:
    """The conversations under ``paths`` (or why one could not be read), each told to
    ``progress`` as it is read."""
    for n, (source, item) in enumerate(read_conversations(paths), start=1):
        if progress:
            progress(n, source)
        yield source, item


def terminal_progress(stream: TextIO | None = None) -> Callable[[int, str], None] | None:
    """A one-line progress display when ``stream`` (standard error when not given: the one
    in use at the call, not at import) is a terminal, else None."""
    stream = stream if stream is not None else sys.stderr
    if not stream.isatty():
        return None

    def show(n: int, source: str) -> None:
        tail = source if len(source) <= 60 else "…" + source[-59:]
        stream.write(f"\r\033[Kloading #{n}: {tail}")
        stream.flush()

    return show
