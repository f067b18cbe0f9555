"""Preparing conversations to be written, with no database: each one's JSON and content hash,
what is skipped as unchanged or refused as met twice, grounding, gating and compiling, and
the rows a batch of the bulk path writes; in the loading process, in one thread beside the
writer, or in worker processes (:mod:`agefacts.workers`). :class:`agefacts.load.Loader`
writes what this prepares."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import logging
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import ledger
from .clock import StageClock, stage
from .compile import EXTRACTOR, FollowupRow, Plan, plan
from .consolidate import result_of
from .errors import AgeFactsError, InputError
from .models import CHECKED, Conversation
from .names import CORE_VERTEX_LABELS
from .ontology import Ontology
from .summary import Outcome

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    from .bulk import Batch, ReadElsewhere, _Read
    from .workers import Pool

__all__ = [
    "Prepared",
    "Preparing",
    "Ready",
    "Seen",
    "Written",
    "batches",
    "content_hash",
    "interpreter_tuned",
    "prepare_one",
]

# Preparing is the load's, under the logger it always had.
_log = logging.getLogger("agefacts.load")


def content_hash(
    conv: Conversation, ontology: Ontology, fingerprint: str | None = None, document: str | None = None
) -> str:
    """What decides "already loaded unchanged": the conversation (its JSON as pydantic
    writes it, fields in declared order: ``document``, when already made), the ontology that
    gates it, and the compiler's version. Pass the ontology's ``fingerprint()`` when hashing
    many conversations."""
    h = hashlib.sha256((document or conv.model_dump_json()).encode("utf-8"))
    h.update(b"\0" + (fingerprint or ontology.fingerprint()).encode() + b"\0" + EXTRACTOR.encode())
    return h.hexdigest()


@dataclass(frozen=True)
class Written:
    """What a prepared conversation's ledger row and outcome need of its plan: all that comes
    back from a worker process, where the plan itself would cost more to send than to make."""

    counts: dict[str, Any]
    followups: list[FollowupRow]
    outcome: Outcome

    @classmethod
    def of(cls, source: str, conv: Conversation, p: Plan) -> Written:
        written = {
            "entities": frozenset(v.k for v in p.vertices if v.label not in CORE_VERTEX_LABELS),
            "statements": frozenset(p.statements),
            "evidence": frozenset(e.k for e in p.edges if e.label == "EVIDENCED_BY"),
        }
        outcome = Outcome(
            source,
            conv.id,
            conv.namespace,
            "loaded",
            counts=dict(p.counts),
            written=written,
            rejections=list(p.rejections),
        )
        return cls(p.counts, p.followups, outcome)


@dataclass(frozen=True)
class Prepared:
    """A conversation ready to write: its content hash, the hash it was last loaded with
    (``prior``, None when never), its plan (None when it was prepared in a worker process:
    it is made again here only if the conversation must be written on its own), its JSON
    (hashed, and kept in the ledger), and what its ledger row and outcome need."""

    source: str
    conv: Conversation
    content_hash: str
    prior: str | None
    plan: Plan | None
    document: str
    written: Written

    @classmethod
    def of(cls, source: str, conv: Conversation, h: str, prior: str | None, p: Plan, document: str) -> Prepared:
        return cls(source, conv, h, prior, p, document, Written.of(source, conv, p))

    @property
    def ident(self) -> tuple[str, str]:
        return (self.conv.namespace, self.conv.id)

    @property
    def replaces(self) -> bool:
        """The graph holds another version of this conversation, which this one replaces."""
        return self.prior is not None and self.prior != self.content_hash

    def outcome(self) -> Outcome:
        return self.written.outcome

    def loaded(self) -> ledger.Loaded:
        w = self.written
        return ledger.Loaded(self.conv, self.content_hash, w.counts, w.followups, self.source, self.document)


@dataclass(frozen=True)
class Seen:
    """Where a conversation was first met in this run, and with what content."""

    source: str
    content_hash: str | None


def _triage_one(
    source: str, conv: Conversation, h: str, prior: dict[tuple[str, str], str], earlier: Seen | None, force: bool
) -> Outcome | None:
    """The outcome of a conversation that is not to be written (None: it is), by its hash."""
    if earlier is not None:
        # The same conversation twice in one run: the same content is nothing new, other
        # content is refused, since which one should win is not ours to guess.
        if earlier.content_hash == h:
            return Outcome(source, conv.id, conv.namespace, "skipped", f"the same as {earlier.source}")
        return Outcome(
            source,
            conv.id,
            conv.namespace,
            "failed",
            f"conversation {conv.id!r} of namespace {conv.namespace!r} is also at {earlier.source}, "
            "with other content; give each version its own id, or load one of them",
        )
    if prior.get((conv.namespace, conv.id)) == h and not force:
        return Outcome(source, conv.id, conv.namespace, "skipped")
    return None


def _plan_one(
    ontology: Ontology,
    source: str,
    conv: Conversation,
    h: str,
    prior: str | None,
    document: str,
    clock: StageClock | None = None,
) -> Outcome | Prepared:
    try:
        with stage(clock, "ground and gate"):
            result = result_of(conv, ontology)
        with stage(clock, "compile"):
            planned = plan(conv, result, ontology)
        return Prepared.of(source, conv, h, prior, planned, document)
    except AgeFactsError as exc:
        return Outcome(source, conv.id, conv.namespace, "failed", str(exc))


def prepare_one(
    ontology: Ontology, force: bool, source: str, conv: Conversation, prior: dict[tuple[str, str], str]
) -> Outcome | Prepared:
    document = conv.model_dump_json()
    h = content_hash(conv, ontology, document=document)
    done = _triage_one(source, conv, h, prior, None, force)
    return done or _plan_one(ontology, source, conv, h, prior.get((conv.namespace, conv.id)), document)


Ready = tuple[list["Outcome | Prepared"], "Batch | None", dict[tuple[str, str], str]]
"""What the worker hands back: each conversation prepared (or its outcome), the assembled rows
of the bulk path, and every content hash."""


def _triage(
    ontology: Ontology,
    force: bool,
    batch: list[tuple[str, Conversation]],
    prior: dict[tuple[str, str], str],
    earlier: dict[tuple[str, str], Seen],
    clock: StageClock | None = None,
) -> tuple[list[Outcome | None], dict[tuple[str, str], str], dict[tuple[str, str], str]]:
    """Each conversation's JSON (made once: hashed now, kept in the ledger) and content hash,
    and the outcome of each that is not to be written (None for those that are)."""
    with stage(clock, "hash"):
        fingerprint = ontology.fingerprint()
        documents = {(c.namespace, c.id): c.model_dump_json() for _, c in batch}
        hashes = {ident: content_hash(c, ontology, fingerprint, documents[ident]) for ident, c in _idents(batch)}
        out = [
            _triage_one(source, conv, hashes[ident], prior, earlier.get(ident), force)
            for (ident, conv), (source, _) in zip(_idents(batch), batch, strict=True)
        ]
    return out, documents, hashes


def _idents(batch: list[tuple[str, Conversation]]) -> list[tuple[tuple[str, str], Conversation]]:
    return [((c.namespace, c.id), c) for _, c in batch]


def _prepare(
    ontology: Ontology,
    force: bool,
    batch: list[tuple[str, Conversation]],
    prior: dict[tuple[str, str], str],
    via: str = "bulk",
    earlier: dict[tuple[str, str], Seen] | None = None,
    clock: StageClock | None = None,
) -> Ready:
    """Pure work, no database: hash, skip what is unchanged, ground, gate and compile, and
    for the bulk path put the rows together (:func:`agefacts.bulk.assemble`). Returns the
    outcomes or prepared conversations, the assembled batch, and every content hash."""
    done, documents, hashes = _triage(ontology, force, batch, prior, earlier or {}, clock)
    out = [
        d
        if d is not None
        else _plan_one(
            ontology,
            source,
            conv,
            hashes[(conv.namespace, conv.id)],
            prior.get((conv.namespace, conv.id)),
            documents[(conv.namespace, conv.id)],
            clock,
        )
        for d, (source, conv) in zip(done, batch, strict=True)
    ]
    with stage(clock, "assemble"):
        return out, _batch_rows(out, via), hashes


def _batch_rows(out: Sequence[Outcome | Prepared], via: str) -> Batch | None:
    """The rows of the bulk path's batch (:func:`agefacts.bulk.assemble`) of the conversations
    prepared; None for the Cypher path, or when there are none."""
    plans = [e.plan for e in out if isinstance(e, Prepared) and e.plan is not None]
    if via != "bulk" or not plans:
        return None
    from .bulk import assemble

    return assemble(plans)


def batches(
    items: Iterable[tuple[str, Conversation | InputError]], statements: int, conversations: int
) -> Iterator[tuple[list[tuple[str, Conversation]], list[Outcome | None]]]:
    """The batches a load writes, each one transaction: about ``statements`` statements or
    ``conversations`` conversations, a conversation never split, and a conversation met again
    starting a new batch (the first must land first). Each comes with a slot per item in
    order: None for a conversation of the batch, the outcome of an item that is no
    conversation."""
    batch: list[tuple[str, Conversation]] = []
    pending: list[Outcome | None] = []
    seen: set[tuple[str, str]] = set()
    size = 0
    for source, item in items:
        if isinstance(item, InputError):
            pending.append(Outcome(source, None, None, "failed", str(item)))
            continue
        ident = (item.namespace, item.id)
        if ident in seen:
            yield batch, pending
            batch, pending, seen, size = [], [], set(), 0
        batch.append((source, item))
        pending.append(None)
        seen.add(ident)
        size += sum(len(t.recorded.statements) for t in item.turns if t.recorded)
        if len(batch) >= conversations or size >= statements:
            yield batch, pending
            batch, pending, seen, size = [], [], set(), 0
    if pending:
        yield batch, pending


_tuning_lock = threading.Lock()
_tuning_users = 0
_tuning_saved: tuple[float, tuple[int, int, int]] | None = None


@contextlib.contextmanager
def interpreter_tuned() -> Iterator[None]:
    """The interpreter set for loading while any load runs, and restored when the last one
    ends (counted, so that loads in several threads never restore each other's settings):

    - the thread switch interval shortened: the loader's main thread spends its time waiting
      on the database; each time an answer arrives it needs the interpreter lock back, and
      with the default 5 ms interval a busy worker would hold it that long, hundreds of times
      a batch (measured: 0.05 ms loads 30k statements 15% faster than 0.2 ms, and 20% faster
      than 1 ms);
    - the young generation's garbage collection threshold raised from 700 to 100,000
      allocations: preparing a batch allocates millions of short-lived objects, and collecting
      every 700 of them took a quarter of the preparing (100k statements: 22-24 s of CPU, 16 s
      raised, the same as with no collection at all)."""
    global _tuning_users, _tuning_saved
    with _tuning_lock:
        if _tuning_users == 0:
            _tuning_saved = (sys.getswitchinterval(), gc.get_threshold())
            sys.setswitchinterval(min(_tuning_saved[0], 0.00005))
            young, *older = _tuning_saved[1]
            gc.set_threshold(max(young, 100_000), *older)
        _tuning_users += 1
    try:
        yield
    finally:
        with _tuning_lock:
            _tuning_users -= 1
            if _tuning_users == 0 and _tuning_saved is not None:
                sys.setswitchinterval(_tuning_saved[0])
                gc.set_threshold(*_tuning_saved[1])
                _tuning_saved = None


_Far = tuple[list["Outcome | Written"], "Batch | None", dict[str, float]]
"""What a worker process hands back for the conversations it was given to plan: for each, its
:class:`Written` (or why it failed), the assembled rows, and when asked the CPU seconds of
each stage; not the plans, which cost more to send than to make, nor anything the process
that reads has already."""


def _prepare_far(todo: list[tuple[str, str, str, str | None]], via: str, timed: bool = False) -> _Far:
    """Ground, gate, compile and assemble ``todo`` (each conversation as its source, its JSON,
    its content hash and its prior hash) in a worker process (:mod:`agefacts.workers`), by the
    worker's ontology. The conversation comes as the JSON that was hashed: made already, it
    costs the sender nothing more, where pickling the model cost it 1.2 s of CPU per 100,000
    statements and the worker as much to take it apart as to parse the JSON."""
    from . import workers

    onto = workers.ontology()
    clock = StageClock() if timed else None
    with stage(clock, "parse"):
        # Made by the loading process from conversations it validated: the rules written in
        # Python held there (a fifth of the parsing here), and the types are checked again.
        convs = [Conversation.model_validate_json(document, context=CHECKED) for _, document, _, _ in todo]
    out = [
        _plan_one(onto, source, conv, h, old, "", clock) for (source, _, h, old), conv in zip(todo, convs, strict=True)
    ]
    with stage(clock, "assemble"):
        assembled = _batch_rows(out, via)
    if assembled is not None and not any(e.replaces for e in out if isinstance(e, Prepared)):
        # What the writer compares with a replaced conversation's removed edges: none here.
        assembled.edges_of = {}
    spent = {} if clock is None else {n: t["client_s"] or 0.0 for n, t in clock.spent().items()}
    return [e if isinstance(e, Outcome) else e.written for e in out], assembled, spent


class Preparing:
    """Where batches are prepared while others are written: one thread, and from the second
    batch on, when ``workers`` is more than one, that many worker processes
    (:mod:`agefacts.workers`; a load of one batch does not wait for processes to start).
    Batches are prepared alike wherever they are, so the graph does not depend on it.

    With ``tuned``, the interpreter is tuned for loading (:func:`interpreter_tuned`) while
    it runs: the settings are the whole process's, so a library leaves them alone unless its
    caller asks (the command line does)."""

    def __init__(
        self,
        ontology: Ontology,
        workers: int,
        tuned: bool,
        timeout: float | None = None,
        clock: StageClock | None = None,
    ):
        from .workers import DEFAULT_TIMEOUT

        self.ontology = ontology
        # Preparing never talks to the server: its stages count this process's CPU alone.
        self.clock = None if clock is None else clock.client_only()
        self.workers = workers
        self.tuned = tuned
        self.timeout = DEFAULT_TIMEOUT if timeout is None else timeout
        self._thread: ThreadPoolExecutor | None = None
        self._processes: Pool | None = None
        self._submitted = 0
        self._broken = False  # a worker process died: the rest is prepared here

    @property
    def ahead(self) -> int:
        """Batches prepared ahead of the one being written."""
        return self.workers if self._processes is not None else 1

    def submit(
        self,
        force: bool,
        batch: list[tuple[str, Conversation]],
        prior: dict[tuple[str, str], str],
        via: str,
        earlier: dict[tuple[str, str], Seen],
    ) -> Callable[[], Ready]:
        """Start preparing ``batch``; the call returned waits for it and gives it."""
        self._submitted += 1
        if self.workers > 1 and self._submitted > 1 and not self._broken:
            # Hashing is done here, so that what is unchanged never goes to a worker (a load
            # of what is there already starts none); the JSON made for it stays here too.
            done, documents, hashes = _triage(self.ontology, force, batch, prior, earlier, self.clock)
            todo = [
                (source, documents[ident], hashes[ident], prior.get(ident))
                for d, (source, conv) in zip(done, batch, strict=True)
                if d is None
                for ident in [(conv.namespace, conv.id)]
            ]
            if not todo:
                skipped: list[Outcome | Prepared] = [d for d in done if d is not None]
                return lambda: (skipped, None, hashes)
            from .errors import WorkerLost

            try:
                if self._processes is None:
                    from . import workers

                    self._processes = workers.start(self.workers, self.ontology, timeout=self.timeout)
                far = self._processes.submit(_prepare_far, todo, via, self.clock is not None)
            except WorkerLost as exc:
                self._break(exc)
                return self.submit(force, batch, prior, via, earlier)

            def ready() -> Ready:
                try:
                    planned, assembled, spent = far.result()
                except WorkerLost as exc:
                    # What it was given is prepared here instead.
                    self._break(exc)
                    return _prepare(self.ontology, force, batch, prior, via, earlier, self.clock)
                if self.clock is not None:
                    self.clock.add_all(spent)
                back = iter(planned)
                out: list[Outcome | Prepared] = []
                for d, (source, conv) in zip(done, batch, strict=True):
                    if d is not None:
                        out.append(d)
                        continue
                    w = next(back)
                    ident = (conv.namespace, conv.id)
                    out.append(
                        w
                        if isinstance(w, Outcome)
                        else Prepared(source, conv, hashes[ident], prior.get(ident), None, documents[ident], w)
                    )
                return out, assembled, hashes

            return ready
        if self._thread is None:
            from concurrent.futures import ThreadPoolExecutor

            self._thread = ThreadPoolExecutor(max_workers=1)
        near = self._thread.submit(_prepare, self.ontology, force, batch, prior, via, earlier, self.clock)
        return near.result

    def read_elsewhere(self) -> ReadElsewhere | None:
        """Reading time (:attr:`agefacts.bulk.BulkWriter.read_elsewhere`) in this load's worker
        processes, for when they have nothing left to prepare (a first load's end); None when
        it started none, or lost one. A part whose worker is lost, or gives no answer in time,
        is read here."""
        if self._processes is None or self._broken:
            return None
        from .bulk import _read_versions, read_versions_far
        from .errors import WorkerLost

        pool, clock = self._processes, self.clock

        def start(rows: list[dict[str, Any]], held: frozenset[str]) -> Callable[[], _Read]:
            try:
                far = pool.submit(read_versions_far, rows, held, clock is not None)
            except WorkerLost as exc:
                self._break(exc)
                return lambda: _read_versions(rows, held, clock)

            def result() -> _Read:
                try:
                    got, spent = far.result()
                except WorkerLost as exc:
                    self._break(exc)
                    return _read_versions(rows, held, clock)
                if clock is not None:
                    clock.add_all(spent)
                return got

            return result

        return start

    def _break(self, exc: BaseException) -> None:
        """A worker process ended (killed by the system short of memory, or by someone) or
        stopped answering: its processes are ended, and every batch from now on is prepared
        in this process."""
        if not self._broken:
            _log.warning("a worker process that prepares batches ended (%s); preparing here instead", exc)
        self._broken = True
        if self._processes is not None:
            # The others may be well, but batches now go in order through this process.
            self._processes.close(wait=False)

    @contextlib.contextmanager
    def running(self) -> Iterator[Preparing]:
        finished = False
        with interpreter_tuned() if self.tuned else contextlib.nullcontext():
            try:
                yield self
                finished = True
            finally:
                # Interrupted: the batches being prepared are not waited for (nothing of them
                # is written).
                if self._thread is not None:
                    self._thread.shutdown(wait=finished, cancel_futures=not finished)
                if self._processes is not None:
                    # Bounded: a worker that does not end when asked is killed.
                    self._processes.close(wait=finished)
