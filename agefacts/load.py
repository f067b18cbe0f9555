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
import hashlib
import json
import random
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .compile import EXTRACTOR, Plan, entity_recompute, executable, plan, statement_recompute, supersession, to_cypher
from .consolidate import result_of
from . import cypher as cy
from .db import Database
from .errors import AgeFactsError, DatabaseError, InputError
from .keys import conversation_key
from .models import Conversation, describe
from .ontology import Ontology

__all__ = ["Outcome", "Summary", "read_conversations", "parse_conversation", "Loader", "load_paths", "content_hash", "VIA"]


@dataclass
class Outcome:
    source: str
    conversation: str | None
    namespace: str | None
    status: str  # loaded | skipped | failed
    reason: str | None = None
    counts: dict[str, Any] = field(default_factory=dict)


@dataclass
class Summary:
    outcomes: list[Outcome] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    def totals(self) -> dict[str, int]:
        out = {"entities": 0, "statements": 0, "evidence": 0, "rejected": 0, "followups": 0}
        for o in self.outcomes:
            if o.status == "loaded":
                for k in out:
                    out[k] += o.counts.get(k, 0)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "loaded": self.count("loaded"),
            "skipped": self.count("skipped"),
            "failed": self.count("failed"),
            **self.totals(),
            "failures": [{"source": o.source, "conversation": o.conversation, "reason": o.reason} for o in self.failed],
        }

    def text(self) -> str:
        t = self.totals()
        lines = [
            f"conversations: {self.count('loaded')} loaded, {self.count('skipped')} skipped (unchanged), "
            f"{self.count('failed')} failed",
            f"written: {t['entities']} entities, {t['statements']} statements, {t['evidence']} evidence, "
            f"{t['rejected']} rejected claims, {t['followups']} follow-ups",
        ]
        for o in self.failed:
            who = f" (conversation {o.conversation!r})" if o.conversation else ""
            lines.append(f"FAILED {o.source}{who}: {o.reason}")
        return "\n".join(lines)


# -- reading input --------------------------------------------------------------------------------
def parse_conversation(data: Any, source: str) -> Conversation:
    if not isinstance(data, dict):
        raise InputError(f"{source}: a conversation is a JSON object, not {type(data).__name__}")
    try:
        return Conversation.model_validate(data)
    except ValidationError as exc:
        cid = data.get("id")
        who = f" conversation {cid!r}" if isinstance(cid, str) else ""
        raise InputError(
            f"{source}{who} does not match the conversation schema: {describe(exc)} "
            "(see `agefacts schema conversation`)"
        ) from None


def _files(paths: Iterable[str | Path]) -> Iterator[Path]:
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            yield from sorted(q for q in p.rglob("*") if q.suffix in (".json", ".jsonl") and q.is_file())
        else:
            yield p


def read_conversations(paths: Iterable[str | Path]) -> Iterator[tuple[str, Conversation | InputError]]:
    """Conversations from files, folders (``*.json``, ``*.jsonl``, recursively, in name order)
    and JSONL files, one at a time so memory stays flat. A bad file or line is yielded as an
    :class:`InputError` in its place, and the rest are still read."""
    for path in _files(paths):
        if not path.exists():
            yield str(path), InputError(f"{path}: no such file or folder")
            continue
        if path.suffix == ".jsonl":
            try:
                fh = path.open(encoding="utf-8", errors="strict")
            except OSError as exc:
                yield str(path), InputError(f"{path}: cannot read it: {exc.strerror}")
                continue
            with fh:
                lineno = 0
                while True:
                    src = f"{path}:{lineno + 1}"
                    try:
                        line = fh.readline()
                    except UnicodeDecodeError as exc:
                        yield src, InputError(f"{src}: not UTF-8 text ({exc.reason}); save the file as UTF-8")
                        break
                    if not line:
                        break
                    lineno += 1
                    if not line.strip():
                        continue
                    yield src, _parse_text(line, src)
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            yield str(path), InputError(f"{path}: not UTF-8 text ({exc.reason}); save the file as UTF-8")
            continue
        except OSError as exc:
            yield str(path), InputError(f"{path}: cannot read it: {exc.strerror}")
            continue
        try:
            data = json.loads(text)
        except ValueError as exc:
            yield str(path), InputError(f"{path}: not valid JSON ({exc}); a conversation file holds one JSON object")
            continue
        items = data if isinstance(data, list) else [data]
        for i, item in enumerate(items):
            src = f"{path}[{i}]" if isinstance(data, list) else str(path)
            try:
                yield src, parse_conversation(item, src)
            except InputError as exc:
                yield src, exc


def _parse_text(line: str, source: str) -> Conversation | InputError:
    try:
        data = json.loads(line)
    except ValueError as exc:
        return InputError(f"{source}: not valid JSON ({exc}); a JSONL file holds one conversation object per line")
    try:
        return parse_conversation(data, source)
    except InputError as exc:
        return exc


def content_hash(conv: Conversation, ontology: Ontology, fingerprint: str | None = None) -> str:
    """What decides "already loaded unchanged": the conversation (its JSON as pydantic
    writes it, fields in declared order), the ontology that gates it, and the compiler's
    version. Pass the ontology's ``fingerprint()`` when hashing many conversations."""
    h = hashlib.sha256(conv.model_dump_json().encode("utf-8"))
    h.update(b"\0" + (fingerprint or ontology.fingerprint()).encode() + b"\0" + EXTRACTOR.encode())
    return h.hexdigest()


# -- writing --------------------------------------------------------------------------------------
VIA = ("bulk", "cypher")


def _prepare(
    ontology: Ontology, force: bool, batch: list[tuple[str, Conversation]], prior: dict[tuple[str, str], str],
    via: str = "bulk",
) -> tuple[list[tuple], Any]:
    """Pure work, no database: hash, skip what is unchanged, ground, gate and compile, and
    for the bulk path put the new conversations' rows together (:func:`agefacts.bulk.assemble`)."""
    out: list[tuple] = []
    fingerprint = ontology.fingerprint()
    for source, conv in batch:
        try:
            h = content_hash(conv, ontology, fingerprint)
            old = prior.get((conv.namespace, conv.id))
            if old == h and not force:
                out.append(("done", Outcome(source, conv.id, conv.namespace, "skipped")))
                continue
            p = plan(conv, result_of(conv, ontology), ontology)
        except AgeFactsError as exc:
            out.append(("done", Outcome(source, conv.id, conv.namespace, "failed", str(exc))))
            continue
        out.append(("replace" if old is not None and old != h else "new", source, conv, h, p))
    new = [e[4] for e in out if e[0] == "new"]
    if via == "bulk" and len(new) > 1:
        from .bulk import assemble

        return out, assemble(new)
    return out, None


@contextlib.contextmanager
def _worker():
    """One worker thread, with the interpreter's thread switch interval shortened while it
    runs. The loader's main thread spends its time waiting on the database; each time an
    answer arrives it needs the interpreter lock back, and with the default 5 ms interval
    a busy worker would hold it that long, hundreds of times a batch (measured: 0.05 ms loads
    30k statements 15% faster than 0.2 ms, and 20% faster than 1 ms). Restored afterwards."""
    from concurrent.futures import ThreadPoolExecutor

    before = sys.getswitchinterval()
    sys.setswitchinterval(min(before, 0.00005))
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            yield pool
    finally:
        sys.setswitchinterval(before)


class Loader:
    """Loads conversations into ``db``'s graph.

    ``via="bulk"`` (the default) writes batches of conversations set-wise into the label
    tables (:mod:`agefacts.bulk`); ``via="cypher"`` executes the compiled Cypher line by line,
    the reference path. Both write the same graph. A batch (about ``batch_statements``
    statements; 5000 measured fastest, 19% faster than 1000 at 30k statements) is one
    transaction; if it fails,
    its conversations are retried one transaction each, so a conversation is always loaded
    entirely or not at all and one bad conversation cannot take others with it.
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
    ):
        if via not in VIA:
            raise ValueError(f"via must be one of {VIA}, not {via!r}")
        self.db = db
        self.ontology = ontology
        self.force = force
        self.via = via
        self.batch_statements = batch_statements
        self.batch_conversations = batch_conversations
        self.retries = retries
        self._writer = None
        self._lost: str | None = None  # why the connection is gone for good, once it is

    # -- the public calls ---------------------------------------------------------------------
    def load(self, conv: Conversation, source: str = "<conversation>") -> Outcome:
        """Load one conversation (see :meth:`load_many`)."""
        (out,) = list(self.load_many([(source, conv)]))
        return out

    def load_many(self, items: Iterable[tuple[str, Conversation | InputError]]) -> Iterator[Outcome]:
        """Load conversations as they come, in batches; yields one outcome per item, in order.

        While one batch is written, the next is ground, gated and compiled in a worker
        thread, so the database's work and Python's overlap instead of adding up."""
        run_seen: set[tuple[str, str]] = set()
        previous = None
        with _worker() as pool:
            for batch, pending in self._batches(items):
                idents = {(c.namespace, c.id) for _, c in batch}
                if previous is not None and idents & run_seen:
                    # A conversation of an earlier batch again: that batch must land first, so
                    # that this one sees its ingest log row.
                    yield from self._finish(*previous)
                    previous = None
                run_seen |= idents
                prior = self._prior_hashes([c for _, c in batch]) if batch else {}
                future = pool.submit(_prepare, self.ontology, self.force, batch, prior, self.via)
                if previous is not None:
                    yield from self._finish(*previous)
                previous = (future, pending)
            if previous is not None:
                yield from self._finish(*previous)

    # -- batches ------------------------------------------------------------------------------
    def _batches(self, items: Iterable[tuple[str, Conversation | InputError]]) -> Iterator[tuple[list, list]]:
        batch: list[tuple[str, Conversation]] = []
        pending: list[Outcome | None] = []
        seen: set[tuple[str, str]] = set()
        size = 0
        for source, item in items:
            if isinstance(item, InputError):
                pending.append(Outcome(source, None, None, "failed", str(item)))
                continue
            ident = (item.namespace, item.id)
            if ident in seen:  # the same conversation twice: the first must land first
                yield batch, pending
                batch, pending, seen, size = [], [], set(), 0
            batch.append((source, item))
            pending.append(None)
            seen.add(ident)
            size += sum(len(t.recorded.statements) for t in item.turns if t.recorded)
            if len(batch) >= self.batch_conversations or size >= self.batch_statements:
                yield batch, pending
                batch, pending, seen, size = [], [], set(), 0
        if pending:
            yield batch, pending

    def _finish(self, future: Any, pending: list[Outcome | None]) -> Iterator[Outcome]:
        results = iter(self._write(future.result()))
        for slot in pending:
            yield slot if slot is not None else next(results)

    def _attempt(self, work: Callable[[], Any]) -> Any:
        """Run one unit of idempotent work (a whole transaction), retrying what a retry can
        resolve, a bounded number of times: a unique key or deadlock conflict with a
        concurrent writer (after a short random backoff), and a dropped connection (after
        reconnecting). Loading is idempotent, so work that may or may not have committed
        before the connection dropped is safe to run again."""
        for attempt in range(self.retries + 1):
            try:
                return work()
            except DatabaseError as exc:
                if attempt >= self.retries or not (exc.retryable or exc.connection_lost):
                    raise
                if exc.connection_lost:
                    try:
                        self.db.reconnect(retries=self.retries)
                    except DatabaseError as gone:
                        self._lost = str(gone)
                        raise
                    self._writer = None
                else:
                    time.sleep(0.02 * (2**attempt) * (0.5 + random.random()))
        raise AssertionError("unreachable")  # pragma: no cover

    def _lost_outcome(self, source: str, conv: Conversation) -> Outcome:
        return Outcome(
            source, conv.id, conv.namespace, "failed",
            f"not loaded: the database connection was lost ({self._lost}); run the same command "
            "again to load the rest (what was loaded is skipped)",
        )

    def _prior_hashes(self, convs: list[Conversation]) -> dict[tuple[str, str], str]:
        if self._lost:
            return {}
        payload = json.dumps([{"ns": c.namespace, "id": c.id} for c in convs])

        def read() -> list:
            return self.db.execute(
                "SELECT l.namespace, l.conversation, l.content_hash FROM agefacts.ingest_log l "
                "JOIN jsonb_to_recordset(%s::jsonb) AS r(ns text, id text) ON l.namespace = r.ns AND l.conversation = r.id "
                "WHERE l.graph = %s",
                (payload, self.db.graph),
            )

        try:
            rows = self._attempt(read)
        except DatabaseError:
            if self._lost:
                return {}
            raise
        return {(ns, cid): h for ns, cid, h in rows}

    def _write(self, prepared_batch: tuple[list[tuple], Any]) -> list[Outcome]:
        prepared, assembled = prepared_batch
        outcomes: list[Outcome | None] = [None] * len(prepared)
        todo: list[tuple[int, str, Conversation, str, Plan]] = []
        for i, entry in enumerate(prepared):
            if entry[0] == "done":
                outcomes[i] = entry[1]
            elif self._lost:
                outcomes[i] = self._lost_outcome(entry[1], entry[2])
            elif entry[0] == "replace":
                # Changed content replaces the old version's writes: done one by one.
                outcomes[i] = self._one(*entry[1:], replace=True)
            else:
                todo.append((i, *entry[1:]))
        if todo and assembled is not None and len(todo) == sum(1 for e in prepared if e[0] == "new"):

            def batch() -> None:
                self.db.ensure_labels(vertex=assembled.vertex_labels, edge=assembled.edge_labels)
                with self.db.transaction():
                    self._writer_for().write_batch(assembled)
                    self._record([(t[2], t[3], t[4], t[1]) for t in todo])

            try:
                self._attempt(batch)
                for i, source, conv, _, p in todo:
                    outcomes[i] = Outcome(source, conv.id, conv.namespace, "loaded", counts=dict(p.counts))
                todo = []
            except AgeFactsError:
                pass  # rolled back whole; each conversation again on its own, below
        for i, source, conv, h, p in todo:
            outcomes[i] = self._lost_outcome(source, conv) if self._lost else self._one(source, conv, h, p)
        return [o for o in outcomes if o is not None]

    def _one(self, source: str, conv: Conversation, h: str, p: Plan, replace: bool = False) -> Outcome:
        def work() -> None:
            self.db.ensure_labels(vertex=p.vertex_labels, edge=p.edge_labels)
            with self.db.transaction():
                stale = self._retract(p) if replace else None
                if self.via == "bulk" and stale is None:
                    self._bulk([p])
                else:
                    for line in executable(to_cypher(p)):
                        self.db.cypher_raw(line)
                if stale is not None:
                    self._settle(stale, p)
                self._record([(conv, h, p, source)])

        try:
            self._attempt(work)
        except AgeFactsError as exc:
            if self._lost:
                return self._lost_outcome(source, conv)
            return Outcome(source, conv.id, conv.namespace, "failed", str(exc))
        return Outcome(source, conv.id, conv.namespace, "loaded", counts=dict(p.counts))

    def _writer_for(self):
        from .bulk import BulkWriter

        if self._writer is None:
            self._writer = BulkWriter(self.db)
        return self._writer

    def _bulk(self, plans: list[Plan]) -> None:
        self._writer_for().write(plans)

    # A conversation whose content changed replaces what its earlier version wrote: its
    # messages (with their evidence) and its mentions go, then whatever was left without
    # evidence or mentions goes, and the rest is recomputed. Edges are deleted before their
    # vertices, explicitly: the embedded engine's DETACH DELETE leaves a vertex's edges behind.
    def _retract(self, p: Plan) -> dict[str, Any]:
        ck = conversation_key(p.namespace, p.conversation)
        rows = self.db.cypher_raw(
            "MATCH (c:Conversation)<-[:PART_OF]-(:Message)<-[:EVIDENCED_BY]-(s:Statement)<-[:SUBJECT_OF]-(x) "
            "WHERE c.k = $ck RETURN DISTINCT s.k, label(x), x.k, s.predicate",
            {"ck": ck},
            columns=("s", "l", "x", "p"),
        )
        statements = sorted({json.loads(r[0]) for r in rows})
        groups = sorted({(json.loads(r[1]), json.loads(r[2]), json.loads(r[3])) for r in rows})
        ents = self.db.cypher_raw(
            "MATCH (c:Conversation)<-[:MENTIONED_IN]-(n) WHERE c.k = $ck RETURN DISTINCT label(n), n.k",
            {"ck": ck},
            columns=("l", "k"),
        )
        entities = sorted({(json.loads(a), json.loads(b)) for a, b in ents})
        self.db.cypher_raw(
            "MATCH (c:Conversation)<-[:PART_OF]-(:Message)<-[r:EVIDENCED_BY]-() WHERE c.k = $ck DELETE r", {"ck": ck}
        )
        self.db.cypher_raw("MATCH (c:Conversation)<-[r:MENTIONED_IN]-() WHERE c.k = $ck DELETE r", {"ck": ck})
        self.db.cypher_raw("MATCH (c:Conversation)<-[r:PART_OF]-(:Message) WHERE c.k = $ck DELETE r", {"ck": ck})
        self.db.cypher_raw(
            "MATCH (m:Message) WHERE m.namespace = $ns AND m.conversation = $cid DELETE m",
            {"ns": p.namespace, "cid": p.conversation},
        )
        return {"statements": statements, "groups": groups, "entities": entities}

    def _settle(self, stale: dict[str, Any], p: Plan) -> None:
        for sk in stale["statements"]:
            gone = "WHERE s.k = $k AND NOT EXISTS((s)-[:EVIDENCED_BY]->())"
            self.db.cypher_raw(f"MATCH (s:Statement)-[r]-() {gone} DELETE r", {"k": sk})
            self.db.cypher_raw(f"MATCH (s:Statement) {gone} DELETE s", {"k": sk})
        for label, k in stale["entities"]:
            self.db.cypher_raw(
                f"MATCH (n:{cy.label(label)}) WHERE n.k = $k AND NOT EXISTS((n)-[]-()) DELETE n", {"k": k}
            )
        for label, k in stale["entities"]:
            for line in entity_recompute(label, k):
                self.db.cypher_raw(line)
        for sk in stale["statements"]:
            self.db.cypher_raw(statement_recompute(sk))
        for group in stale["groups"]:
            for line in supersession(*group):
                self.db.cypher_raw(line)

    def _record(self, loaded: list[tuple[Conversation, str, Plan, str]]) -> None:
        """The ingest log and the question queue, for conversations just written."""
        g = self.db.graph
        self.db.execute(
            "INSERT INTO agefacts.ingest_log (graph, namespace, conversation, content_hash, counts, source, loaded_at) "
            "SELECT %s, r.ns, r.id, r.h, r.counts, r.src, now() FROM jsonb_to_recordset(%s::jsonb) "
            "AS r(ns text, id text, h text, counts jsonb, src text) "
            "ON CONFLICT (graph, namespace, conversation) DO UPDATE SET content_hash = EXCLUDED.content_hash, "
            "counts = EXCLUDED.counts, source = EXCLUDED.source, loaded_at = EXCLUDED.loaded_at",
            (g, json.dumps([{"ns": c.namespace, "id": c.id, "h": h, "counts": p.counts, "src": src} for c, h, p, src in loaded])),
        )
        convs = json.dumps([{"ns": c.namespace, "id": c.id} for c, _, _, _ in loaded])
        self.db.execute(
            "DELETE FROM agefacts.questions q USING jsonb_to_recordset(%s::jsonb) AS r(ns text, id text) "
            "WHERE q.graph = %s AND q.namespace = r.ns AND q.conversation = r.id",
            (convs, g),
        )
        rows = [
            {"ns": c.namespace, "id": c.id, "gap": f.gap, "ek": f.entity_key, "pr": f.priority, "q": f.question, "why": f.reason, "at": f.asked_at}
            for c, _, p, _ in loaded
            for f in p.followups
        ]
        if rows:
            self.db.execute(
                "INSERT INTO agefacts.questions (graph, namespace, conversation, gap, entity_key, priority, question, reason, asked_at) "
                "SELECT %s, r.ns, r.id, r.gap, r.ek, r.pr, r.q, r.why, r.at FROM jsonb_to_recordset(%s::jsonb) "
                "AS r(ns text, id text, gap text, ek text, pr text, q text, why text, at text)",
                (g, json.dumps(rows)),
            )
        # A question about a name is answered once the entity has one, whichever load named it:
        # resolved at the earliest time a conversation gave the name.
        # (MENTIONED_IN exists: every load creates all of agefacts' own labels first.)
        namespaces = sorted({c.namespace for c, _, _, _ in loaded})
        from psycopg import sql

        self.db.execute(
            sql.SQL(
                "UPDATE agefacts.questions q SET resolved_at = r.first FROM ("
                "  SELECT q2.namespace, q2.conversation, q2.gap, min(((e.properties::text)::jsonb)->>'at') AS first "
                "  FROM agefacts.questions q2 "
                "  JOIN {v} v ON ag_catalog.agtype_access_operator(v.properties, '\"k\"'::ag_catalog.agtype) "
                "     = (to_jsonb(q2.entity_key)::text)::ag_catalog.agtype "
                "  JOIN {m} e ON e.start_id = v.id "
                "  WHERE q2.graph = %s AND q2.namespace = ANY(%s) AND q2.resolved_at IS NULL AND q2.gap LIKE '%%.name' "
                "    AND ((e.properties::text)::jsonb) ? 'name' "
                "  GROUP BY q2.namespace, q2.conversation, q2.gap) r "
                "WHERE q.graph = %s AND q.namespace = r.namespace AND q.conversation = r.conversation AND q.gap = r.gap"
            ).format(
                v=sql.SQL("{}._ag_label_vertex").format(sql.Identifier(g)),
                m=sql.SQL("{}.{}").format(sql.Identifier(g), sql.Identifier("MENTIONED_IN")),
            ),
            (g, namespaces, g),
        )


def load_paths(
    db: Database,
    paths: Iterable[str | Path],
    ontology: Ontology,
    *,
    force: bool = False,
    via: str = "bulk",
    progress: Callable[[int, str], None] | None = None,
) -> Summary:
    """Load every conversation found under ``paths``; see :class:`Loader`."""
    loader = Loader(db, ontology, force=force, via=via)
    summary = Summary()

    def items() -> Iterator[tuple[str, Conversation | InputError]]:
        for n, (source, item) in enumerate(read_conversations(paths), start=1):
            if progress:
                progress(n, source)
            yield source, item

    for outcome in loader.load_many(items()):
        summary.outcomes.append(outcome)
    return summary


def terminal_progress(stream=sys.stderr) -> Callable[[int, str], None] | None:
    """A one-line progress display when ``stream`` is a terminal, else None."""
    if not stream.isatty():
        return None

    def show(n: int, source: str) -> None:
        tail = source if len(source) <= 60 else "…" + source[-59:]
        stream.write(f"\r\033[Kloading #{n}: {tail}")
        stream.flush()

    return show
