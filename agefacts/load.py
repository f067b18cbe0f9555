"""Loading conversations into a graph.

Each conversation is one transaction: all of it or none of it. An ingest log (SQL, beside the
graph) records each conversation's content hash, counts and load time; a conversation whose
content was already loaded unchanged is skipped, and ``force`` loads it again. A conversation
whose content changed replaces what its earlier version wrote. Follow-ups go to the SQL
question queue. A conversation that fails is reported with its source and reason, and the
others still load.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .compile import EXTRACTOR, Plan, entity_recompute, executable, plan, statement_recompute, supersession, to_cypher
from .consolidate import result_of
from . import cypher as cy
from .db import Database
from .errors import AgeFactsError, InputError
from .keys import conversation_key
from .models import Conversation
from .ontology import Ontology

__all__ = ["Outcome", "Summary", "read_conversations", "parse_conversation", "Loader", "load_paths", "content_hash"]


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
def _validation_text(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(x) for x in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    more = len(exc.errors()) - 5
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def parse_conversation(data: Any, source: str) -> Conversation:
    if not isinstance(data, dict):
        raise InputError(f"{source}: a conversation is a JSON object, not {type(data).__name__}")
    try:
        return Conversation.model_validate(data)
    except ValidationError as exc:
        cid = data.get("id")
        who = f" conversation {cid!r}" if isinstance(cid, str) else ""
        raise InputError(
            f"{source}{who} does not match the conversation schema: {_validation_text(exc)} "
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


def content_hash(conv: Conversation, ontology: Ontology) -> str:
    """What decides "already loaded unchanged": the conversation, the ontology that gates
    it, and the compiler's version."""
    blob = json.dumps(
        [conv.model_dump(mode="json"), ontology.fingerprint(), EXTRACTOR],
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


# -- writing --------------------------------------------------------------------------------------
class Loader:
    """Loads conversations into ``db``'s graph through the compiled Cypher."""

    def __init__(self, db: Database, ontology: Ontology, *, force: bool = False):
        self.db = db
        self.ontology = ontology
        self.force = force

    def load(self, conv: Conversation, source: str = "<conversation>") -> Outcome:
        h = content_hash(conv, self.ontology)
        prior = self.db.execute(
            "SELECT content_hash FROM agefacts.ingest_log WHERE graph = %s AND namespace = %s AND conversation = %s",
            (self.db.graph, conv.namespace, conv.id),
        )
        prior_hash = prior[0][0] if prior else None
        if prior_hash == h and not self.force:
            return Outcome(source, conv.id, conv.namespace, "skipped")
        result = result_of(conv, self.ontology)
        p = plan(conv, result, self.ontology)
        lines = executable(to_cypher(p))
        self.db.ensure_labels(vertex=p.vertex_labels, edge=p.edge_labels)
        with self.db.transaction():
            if prior_hash is not None and prior_hash != h:
                stale = self._retract(p)
            else:
                stale = None
            for line in lines:
                self.db.cypher_raw(line)
            if stale is not None:
                self._settle(stale, p)
            self._log(conv, h, p, source)
            self._questions(conv, p)
        return Outcome(source, conv.id, conv.namespace, "loaded", counts=dict(p.counts))

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

    def _log(self, conv: Conversation, h: str, p: Plan, source: str) -> None:
        self.db.execute(
            "INSERT INTO agefacts.ingest_log (graph, namespace, conversation, content_hash, counts, source, loaded_at) "
            "VALUES (%s, %s, %s, %s, %s::jsonb, %s, now()) "
            "ON CONFLICT (graph, namespace, conversation) DO UPDATE SET content_hash = EXCLUDED.content_hash, "
            "counts = EXCLUDED.counts, source = EXCLUDED.source, loaded_at = EXCLUDED.loaded_at",
            (self.db.graph, conv.namespace, conv.id, h, json.dumps(p.counts), source),
        )

    def _questions(self, conv: Conversation, p: Plan) -> None:
        self.db.execute(
            "DELETE FROM agefacts.questions WHERE graph = %s AND namespace = %s AND conversation = %s",
            (self.db.graph, conv.namespace, conv.id),
        )
        for f in p.followups:
            self.db.execute(
                "INSERT INTO agefacts.questions (graph, namespace, conversation, gap, entity_key, priority, question, reason, asked_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (self.db.graph, conv.namespace, conv.id, f.gap, f.entity_key, f.priority, f.question, f.reason, f.asked_at),
            )
        # A question about a name is answered once the entity has one, whichever load named it.
        open_rows = self.db.execute(
            "SELECT conversation, gap, entity_key FROM agefacts.questions WHERE graph = %s AND namespace = %s "
            "AND resolved_at IS NULL AND entity_key IS NOT NULL AND gap LIKE '%%.name'",
            (self.db.graph, conv.namespace),
        )
        for conversation, gap, ek in open_rows:
            rows = self.db.cypher_raw(
                "MATCH (n {k: $k})-[m:MENTIONED_IN]->() WHERE m.name IS NOT NULL RETURN min(m.at)", {"k": ek}
            )
            when = json.loads(rows[0][0]) if rows and rows[0][0] is not None else None
            if when is not None:
                self.db.execute(
                    "UPDATE agefacts.questions SET resolved_at = %s WHERE graph = %s AND namespace = %s "
                    "AND conversation = %s AND gap = %s",
                    (when, self.db.graph, conv.namespace, conversation, gap),
                )


def load_paths(
    db: Database,
    paths: Iterable[str | Path],
    ontology: Ontology,
    *,
    force: bool = False,
    progress: Callable[[int, str], None] | None = None,
) -> Summary:
    """Load every conversation found under ``paths``; see :class:`Loader`."""
    loader = Loader(db, ontology, force=force)
    summary = Summary()
    for n, (source, item) in enumerate(read_conversations(paths), start=1):
        if progress:
            progress(n, source)
        if isinstance(item, InputError):
            summary.outcomes.append(Outcome(source, None, None, "failed", str(item)))
            continue
        try:
            summary.outcomes.append(loader.load(item, source))
        except AgeFactsError as exc:
            summary.outcomes.append(Outcome(source, item.id, item.namespace, "failed", str(exc)))
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
