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
import gc
import hashlib
import logging
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from psycopg import sql

from . import ledger
from .clock import StageClock, stage
from .compile import EXTRACTOR, FollowupRow, Plan, executable, plan, to_cypher
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
    need_text,
)
from .inputs import input_size, read_conversations
from .keys import conversation_key, edge_key, user_key
from .models import CHECKED, Conversation
from .names import CORE_VERTEX_LABELS
from .ontology import Ontology

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    from .bulk import Batch, BulkWriter
    from .retract import Stale
    from .workers import Pool

__all__ = [
    "Loader",
    "Outcome",
    "Prepared",
    "Seen",
    "Summary",
    "VIA",
    "Written",
    "batches",
    "content_hash",
    "load_paths",
    "read_told",
    "setup",
    "terminal_progress",
]


@dataclass
class Outcome:
    source: str
    conversation: str | None
    namespace: str | None
    status: str  # loaded | skipped | failed
    reason: str | None = None
    counts: dict[str, Any] = field(default_factory=dict)
    # The keys written, by kind (entities, statements, evidence): a run's totals count each
    # once, as the graph holds it, however many conversations wrote it.
    written: dict[str, frozenset[str]] = field(default_factory=dict, repr=False)
    # What did not become data: (turn, kind, reason, sentence), as the gate said it.
    rejections: list[tuple[int, str, str, str]] = field(default_factory=list, repr=False)


@dataclass
class Summary:
    outcomes: list[Outcome] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    def totals(self) -> dict[str, int]:
        """What the run wrote: entities, statements and evidence by distinct key (what the
        graph holds of them), the rest summed; ``claims`` is how many claims were admitted,
        ``repeated`` how many of them said a statement another claim of the run said too."""
        loaded = [o for o in self.outcomes if o.status == "loaded"]
        out = {}
        for kind in ("entities", "statements", "evidence"):
            out[kind] = len(frozenset().union(*(o.written.get(kind, frozenset()) for o in loaded)))
        for kind in ("claims", "rejected", "followups", "keyphrases", "unextracted"):
            out[kind] = sum(o.counts.get(kind, 0) for o in loaded)
        out["repeated"] = max(0, out["claims"] - out["statements"])
        return out

    def rejected_reasons(self) -> dict[str, int]:
        """How many claims (entities, follow-ups, keyphrases) the loaded conversations had
        refused, by reason."""
        out: Counter[str] = Counter()
        for o in self.outcomes:
            if o.status == "loaded":
                out.update(o.counts.get("rejected_reasons", {}))
        return dict(sorted(out.items()))

    def rejections(self) -> list[dict[str, Any]]:
        """Each refused claim of the loaded conversations, with where it was and why."""
        return [
            {"source": o.source, "namespace": o.namespace, "conversation": o.conversation, "turn": turn, "kind": kind}
            | {"reason": reason, "detail": detail}
            for o in self.outcomes
            if o.status == "loaded"
            for turn, kind, reason, detail in o.rejections
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "loaded": self.count("loaded"),
            "skipped": self.count("skipped"),
            "failed": self.count("failed"),
            **self.totals(),
            "rejected_reasons": self.rejected_reasons(),
            "rejections": self.rejections(),
            "people": self.people(),
            "failures": [{"source": o.source, "conversation": o.conversation, "reason": o.reason} for o in self.failed],
        }

    def people(self) -> list[str]:
        """Who is who in what was loaded: a name met in several conversations, one person (with
        a role in some and none in others: "my brother Ravi", then "Ravi"), and a role that
        names several people, kept apart ("my sister Ana", "my sister Rita")."""
        # By (namespace, key): the name, and the role each conversation named them with (None: none).
        named: dict[tuple[str, str], tuple[str, dict[str, str | None]]] = {}
        apart: dict[tuple[str, str], set[str]] = {}
        for o in self.outcomes:
            if o.status != "loaded":
                continue
            people = o.counts.get("people") or {}
            for k, (name, rel) in people.get("named", {}).items():
                named.setdefault((o.namespace or "", k), (name, {}))[1][o.conversation or ""] = rel
            for rel, names in people.get("apart", {}).items():
                apart.setdefault((o.namespace or "", rel), set()).update(names)
        lines = []
        for (ns, _), (name, by_conv) in sorted(named.items(), key=lambda x: (x[0][0], x[1][0])):
            roles = set(by_conv.values())
            if None in roles and len(roles) > 1:
                role = ", ".join(sorted(r for r in roles if r))
                lines.append(
                    f"one person: {name!r} of namespace {ns!r}, named with a role ({role}) "
                    f"and without one, in {len(by_conv)} conversations"
                )
        for (ns, rel), names in sorted(apart.items()):
            lines.append(
                f"several people with one role: {', '.join(repr(n) for n in sorted(names))} "
                f"of namespace {ns!r} are each {rel}"
            )
        return lines

    def text(self, show_rejections: bool = False) -> str:
        """What the run did; each refused claim's sentence too with ``show_rejections`` (the
        counts by reason are always there)."""
        t = self.totals()
        lines = [
            f"conversations: {self.count('loaded')} loaded, {self.count('skipped')} skipped (unchanged), "
            f"{self.count('failed')} failed",
            f"written: {t['entities']} entities, {t['statements']} statements"
            + (f" ({t['repeated']} claims said a statement again)" if t["repeated"] else "")
            + f", {t['evidence']} evidence, {t['rejected']} rejected claims, {t['followups']} follow-ups"
            + (f", {t['keyphrases']} keyphrases" if t["keyphrases"] else ""),
        ]
        if t["unextracted"]:
            lines.append(
                f"{t['unextracted']} user message(s) carry no extraction: they are stored and `agefacts ask` finds "
                "them by their words, but no fact is read from them until one is recorded (`agefacts extract FILES "
                "--out DIR --llm-url URL --model NAME`, then load DIR; or write statements by hand: docs/extract.md)"
            )
        lines.extend(self.people())
        reasons = self.rejected_reasons()
        if reasons:
            lines.append(
                "rejected by reason: "
                + ", ".join(f"{r} {n}" for r, n in reasons.items())
                + (
                    ""
                    if show_rejections
                    else " (`agefacts load` of the same files with --force --show-rejections says each one, and why)"
                )
            )
        if show_rejections:
            for r in self.rejections():
                lines.append(
                    f"rejected {r['conversation']} turn {r['turn']} ({r['kind']}, {r['reason']}): {r['detail']}"
                )
        # A reason shared by many conversations (the connection was lost) is said once.
        shared = Counter(o.reason for o in self.failed)
        said: set[str | None] = set()
        for o in self.failed:
            if shared[o.reason] > 3:
                if o.reason not in said:
                    said.add(o.reason)
                    lines.append(f"FAILED {shared[o.reason]} conversations, from {o.source} on: {o.reason}")
                continue
            who = f" (conversation {o.conversation!r})" if o.conversation else ""
            reason = o.reason or ""
            # Input errors name their place themselves (they are raised without the summary).
            if reason.startswith(o.source + ":") or reason.startswith(o.source + " "):
                reason = reason[len(o.source) :].lstrip(": ")
            lines.append(f"FAILED {o.source}{who}: {reason}")
        return "\n".join(lines)


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


# -- writing --------------------------------------------------------------------------------------
VIA = ("bulk", "cypher")
_log = logging.getLogger("agefacts.load")


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


class _PriorMoved(Exception):
    """Another loader changed what the ingest log holds for a conversation between our read
    and our write: it is prepared again against what is there now."""


_UNSET: Any = object()


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


def _prepare_one(
    ontology: Ontology, force: bool, source: str, conv: Conversation, prior: dict[tuple[str, str], str]
) -> Outcome | Prepared:
    document = conv.model_dump_json()
    h = content_hash(conv, ontology, document=document)
    done = _triage_one(source, conv, h, prior, None, force)
    return done or _plan_one(ontology, source, conv, h, prior.get((conv.namespace, conv.id)), document)


_T = TypeVar("_T")

_Ready = tuple[list["Outcome | Prepared"], "Batch | None", dict[tuple[str, str], str]]
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
) -> _Ready:
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
        return out, _assembled(out, via), hashes


def _assembled(out: Sequence[Outcome | Prepared], via: str) -> Batch | None:
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
def _interpreter_tuned() -> Iterator[None]:
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
        assembled = _assembled(out, via)
    if assembled is not None and not any(e.replaces for e in out if isinstance(e, Prepared)):
        # What the writer compares with a replaced conversation's removed edges: none here.
        assembled.edges_of = {}
    spent = {} if clock is None else {n: t["client_s"] or 0.0 for n, t in clock.spent().items()}
    return [e if isinstance(e, Outcome) else e.written for e in out], assembled, spent


class _Preparing:
    """Where batches are prepared while others are written: one thread, and from the second
    batch on, when ``workers`` is more than one, that many worker processes
    (:mod:`agefacts.workers`; a load of one batch does not wait for processes to start).
    Batches are prepared alike wherever they are, so the graph does not depend on it.

    With ``tuned``, the interpreter is tuned for loading (:func:`_interpreter_tuned`) while
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
    ) -> Callable[[], _Ready]:
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

            def ready() -> _Ready:
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
    def running(self) -> Iterator[_Preparing]:
        finished = False
        with _interpreter_tuned() if self.tuned else contextlib.nullcontext():
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
        inflight: list[tuple[Callable[[], _Ready], list[Outcome | None]]] = []
        # The Cypher path writes from the plans themselves, which stay where they are made.
        workers = self.workers if self.via == "bulk" else 1
        with _Preparing(
            self.ontology, workers, self.tune_interpreter, self.worker_timeout, self.clock
        ).running() as preparing:
            for batch, pending in self._batches(items):
                if stop is not None and stop():
                    break
                idents = {(c.namespace, c.id) for _, c in batch}
                if idents & run_seen:
                    # A conversation of an earlier batch again: those batches must land first,
                    # so that this one is compared with them.
                    while inflight:
                        yield from self._finish(*inflight.pop(0))
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
                yield from self._finish(*inflight.pop(0))
            if stop is not None and stop():
                raise KeyboardInterrupt
        if not self._lost:
            with stage(self.clock, "statistics"):
                self.db.refresh_statistics()

    # -- batches ------------------------------------------------------------------------------
    def _batches(
        self, items: Iterable[tuple[str, Conversation | InputError]]
    ) -> Iterator[tuple[list[tuple[str, Conversation]], list[Outcome | None]]]:
        return batches(items, self.batch_statements, self.batch_conversations)

    def _finish(self, ready: Callable[[], _Ready], pending: list[Outcome | None]) -> Iterator[Outcome]:
        prepared, assembled, hashes = ready()
        for e in prepared:
            ident = e.ident if isinstance(e, Prepared) else (e.namespace or "", e.conversation or "")
            # The first place each conversation was met in this run, with its content (also for
            # one skipped as unchanged, so a second identical copy is skipped too).
            self._seen.setdefault(ident, Seen(e.source, hashes.get(ident)))
        results = iter(self._write(prepared, assembled))
        for slot in pending:
            yield slot if slot is not None else next(results)

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

    def _write(self, prepared: list[Outcome | Prepared], assembled: Batch | None) -> list[Outcome]:
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
                    writer.write_batch(assembled, stale)
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

    def _check(self, entries: list[Prepared]) -> None:
        now = ledger.lock(self.db, [e.ident for e in entries], moves=not self.moving)
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
                current = _prepare_one(self.ontology, self.force, e.source, e.conv, prior)
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


def setup(
    db: Database,
    ontology: Ontology,
    *,
    app: Sequence[str] = (),
    reader: Sequence[str] = (),
    tenants: Sequence[tuple[str, str]] = (),
) -> tuple[list[str], list[str]]:
    """Set a graph up as its owner, for roles that may only load or read: agefacts' SQL
    objects and the graph (made by connecting), every label the ontology can write with its
    key index, then the grants each ``app`` role needs to load and each ``reader`` role needs
    to read. Each ``tenants`` (role, namespace) is a role the database keeps to that one
    namespace, by row-level security on every label and on agefacts' tables (it loads and
    reads like an app role, its own namespace only: sql/004_tenants.sql). Returns the grants
    run and those this role could not give."""
    from .db import TENANT_READS_ONLY
    from .names import CORE_EDGE_LABELS

    if tenants:
        _check_tenants(db, tenants)
    db.ensure_labels(vertex=sorted(CORE_VERTEX_LABELS | set(ontology.entity_types)), edge=sorted(CORE_EDGE_LABELS))
    done: list[str] = []
    refused: list[str] = []
    for role, write in [(r, True) for r in app] + [(r, False) for r in reader] + [(r, True) for r, _ in tenants]:
        ok, no = db.grant(role, write=write)
        done += ok
        refused += no
    if tenants:
        for role, namespace in tenants:
            db.execute(
                "INSERT INTO agefacts.tenants (graph, role, namespace) VALUES (%s, %s, %s) "
                "ON CONFLICT (graph, role) DO UPDATE SET namespace = EXCLUDED.namespace",
                (db.graph, role, namespace),
            )
            done.append(f"tenant: role {role} sees and writes namespace {namespace!r} only")
            # What configures every graph is read-only to a tenant: who is a tenant of what,
            # the moves that route writes, the ontology everyone is answered by, the schema.
            db.execute(
                sql.SQL("REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON {} FROM {}").format(
                    sql.SQL(", ").join(sql.Identifier("agefacts", t) for t in TENANT_READS_ONLY), sql.Identifier(role)
                )
            )
        db.execute("SELECT agefacts.protect_graph(%s)", (db.graph,))
    return done, refused


def _check_tenants(db: Database, tenants: Sequence[tuple[str, str]]) -> None:
    from .db import age_version_at_least

    found = db.age_version
    # AGE 1.6.0 applies the policies to what cypher() reads but writes past them (measured).
    if not age_version_at_least(found, (1, 7, 0)):
        raise UsageError(
            f"tenants need Apache AGE 1.7.0 or newer, where cypher() writes obey row-level security; this "
            f"server has {found or 'an unknown version'} (its reads obey it, its writes do not)"
        )
    for role, namespace in tenants:
        need_text(role, "a tenant's role")
        need_text(namespace, "a tenant's namespace")
        if not db.execute("SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %s", (role,)):
            raise UsageError(f"tenant role {role!r} does not exist: CREATE ROLE {role} LOGIN first")
        if db.execute("SELECT rolsuper OR rolbypassrls FROM pg_catalog.pg_roles WHERE rolname = %s", (role,))[0][0]:
            raise UsageError(f"tenant role {role!r} is a superuser or bypasses row-level security: no policy holds it")


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
