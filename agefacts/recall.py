"""Measuring recall: how much of what was said the answer to a question finds, beside a plain
BM25 over the same messages in the same run.

A questions file is JSON Lines, one question per line::

    {"question": "When did Gina get the internship?", "namespace": "conv-30",
     "evidence": [{"conversation": "conv-30-s12", "message": 0}], "category": "temporal"}

``evidence`` names the messages that answer it (conversation id and ordinal, as loaded);
``category`` is optional and groups the figures. For each question, :func:`ask` is asked in its
namespace and the messages it returns are scored in order: R@k is the share of the question's
evidence messages among the first k (R@5, R@10, R@20 as far as the k asked for reaches, and that
k), hit@10 whether any is among the first 10 (of them all, when fewer are asked for), MRR the mean of
1/rank of the first one found (0 when none is). Two baselines run beside it, each Okapi BM25
(k1 1.5, b 0.75, as ``rank_bm25`` scores) over every message of the namespace, built here from
the graph's own messages: ``bm25`` over words lower-cased, as ``rank_bm25`` is mostly used, and
``bm25-stemmed`` over the engine's own stems (PostgreSQL's ``english`` configuration: stop
words dropped, inflections folded), the strongest lexical baseline we know.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .clock import process_cpu
from .db import Database
from .embed import Embedder
from .errors import UsageError
from .ontology import Ontology

__all__ = [
    "BM25",
    "CUTOFFS",
    "MessageRef",
    "Question",
    "RecallReport",
    "cutoffs",
    "evaluate",
    "metrics",
    "namespace_messages",
    "read_questions",
    "score",
    "stems",
]

CUTOFFS = (5, 10, 20)
_WORD = re.compile(r"\w+")
MessageRef = tuple[str, int]  # (conversation, ordinal)


@dataclass(frozen=True)
class Question:
    question: str
    namespace: str
    evidence: tuple[MessageRef, ...]
    category: str = "all"


def read_questions(path: Path) -> list[Question]:
    """The questions of a JSON Lines file; a line that is not a question is an error naming
    the line and what it lacks."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UsageError(f"cannot read questions file {str(path)!r}: {exc.strerror or exc}") from None
    out: list[Question] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}, line {n}"
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise UsageError(f"{where} is not JSON ({exc}); each line is one question object") from None
        if not isinstance(row, dict):
            raise UsageError(f"{where} is not a JSON object; each line is one question object")
        q, ns, ev = row.get("question"), row.get("namespace"), row.get("evidence")
        if not isinstance(q, str) or not q.strip() or not isinstance(ns, str) or not ns:
            raise UsageError(f'{where} needs "question" and "namespace", both text')
        if not isinstance(ev, list) or not ev:
            raise UsageError(f'{where} needs "evidence": a list of {{"conversation": ..., "message": ordinal}}')
        refs: list[MessageRef] = []
        for e in ev:
            if (
                not isinstance(e, dict)
                or not isinstance(e.get("conversation"), str)
                or not isinstance(e.get("message"), int)
                or isinstance(e.get("message"), bool)
            ):
                raise UsageError(f'{where}: evidence {e!r} is not {{"conversation": text, "message": ordinal}}')
            refs.append((e["conversation"], e["message"]))
        category = row.get("category")
        out.append(Question(q, ns, tuple(dict.fromkeys(refs)), str(category) if category is not None else "all"))
    if not out:
        raise UsageError(f"questions file {str(path)!r} holds no question")
    return out


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _tokens(doc: str | Sequence[str]) -> list[str]:
    return _words(doc) if isinstance(doc, str) else list(doc)


def stems(db: Database, texts: Sequence[str]) -> list[list[str]]:
    """Each text's stems as the engine's search makes them (``to_tsvector('english')``), each
    as often as it is said, in one round trip."""
    out: list[list[str]] = [[] for _ in texts]
    for i, lexeme, n in db.execute(
        "SELECT t.i, u.lexeme, coalesce(cardinality(u.positions), 1) "
        "FROM unnest(%s::text[]) WITH ORDINALITY AS t(x, i), unnest(to_tsvector('english'::regconfig, t.x)) u",
        (list(texts),),
    ):
        out[int(i) - 1].extend([lexeme] * int(n))
    return out


class BM25:
    """Okapi BM25 over a list of documents, as ``rank_bm25.BM25Okapi`` scores them: a word in
    more than half the documents gets ``epsilon`` times the mean idf rather than a negative one.
    A document (and a query) is a text, cut into lower-cased words, or a list of its tokens
    already made (the engine's stems, say)."""

    def __init__(
        self, docs: Sequence[str | Sequence[str]], k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25
    ) -> None:
        self.k1, self.b = k1, b
        self.tf = [Counter(_tokens(d)) for d in docs]
        self.len = [sum(c.values()) for c in self.tf]
        n = len(docs)
        self.avgdl = (sum(self.len) / n) if n else 0.0
        df: Counter[str] = Counter()
        for c in self.tf:
            df.update(c.keys())
        idf = {w: math.log(n - f + 0.5) - math.log(f + 0.5) for w, f in df.items()}
        floor = epsilon * (sum(idf.values()) / len(idf)) if idf else 0.0
        self.idf = {w: (v if v >= 0 else floor) for w, v in idf.items()}

    def scores(self, query: str | Sequence[str]) -> list[float]:
        q = _tokens(query)
        out = []
        for tf, dl in zip(self.tf, self.len, strict=True):
            s = 0.0
            for w in q:
                f = tf.get(w, 0)
                if f:
                    s += self.idf[w] * f * (self.k1 + 1) / (f + self.k1 * (1 - self.b + self.b * dl / self.avgdl))
            out.append(s)
        return out

    def top(self, query: str | Sequence[str], k: int) -> list[int]:
        """The indexes of the ``k`` best documents, best first (ties by position)."""
        s = self.scores(query)
        return sorted((i for i in range(len(s)) if s[i] > 0), key=lambda i: (-s[i], i))[:k]


def cutoffs(k: int) -> tuple[int, ...]:
    """The R@ figures of a run that asks for ``k`` messages: R@5, R@10 and R@20 as far as k
    reaches, and R@k when k is below 20."""
    return tuple(sorted({c for c in CUTOFFS if c <= k} | ({k} if k < max(CUTOFFS) else set())))


def metrics(k: int) -> list[str]:
    """The figures a run that asks for ``k`` messages reports, in order."""
    return [*(f"R@{c}" for c in cutoffs(k)), f"hit@{min(10, k)}", "MRR"]


def score(found: Sequence[MessageRef], evidence: Iterable[MessageRef], k: int = max(CUTOFFS)) -> dict[str, float]:
    """One question's figures for the messages found, in order, of a run asking for ``k``."""
    gold = set(evidence)
    out = {f"R@{c}": len(gold & set(found[:c])) / len(gold) for c in cutoffs(k)}
    out[f"hit@{min(10, k)}"] = float(bool(gold & set(found[: min(10, k)])))
    first = next((i for i, f in enumerate(found, 1) if f in gold), None)
    out["MRR"] = 1.0 / first if first else 0.0
    out["all"] = len(gold & set(found)) / len(gold)
    return out


@dataclass
class RecallReport:
    """Mean figures per category (and ``all``) for ask and the two BM25 baselines, with ask's
    latency in milliseconds and, where the process serving the database could be read from
    here, the CPU it spent per ask (``engine_cpu_ms``: the mean, since the kernel counts CPU in
    ticks of 10 ms, longer than most asks)."""

    questions: int
    ask: dict[str, dict[str, float]] = field(default_factory=dict)
    bm25: dict[str, dict[str, float]] = field(default_factory=dict)
    bm25_stemmed: dict[str, dict[str, float]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    latency_ms: dict[str, float] = field(default_factory=dict)
    k: int = 20
    engine_cpu_ms: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "questions": self.questions,
            "k": self.k,
            "counts": self.counts,
            "ask": self.ask,
            "bm25": self.bm25,
            "bm25_stemmed": self.bm25_stemmed,
            "latency_ms": self.latency_ms,
            "engine_cpu_ms": self.engine_cpu_ms,
        }

    def rows(self) -> tuple[list[str], list[list[Any]]]:
        """A table: one row per category and method."""
        shown = metrics(self.k)
        rows = []
        for cat in self.counts:
            for name, figures in (("ask", self.ask), ("bm25", self.bm25), ("bm25-stemmed", self.bm25_stemmed)):
                rows.append([cat, self.counts[cat], name, *(round(figures[cat][m], 3) for m in shown)])
        return ["category", "questions", "method", *shown], rows


def _mean(values: list[dict[str, float]]) -> dict[str, float]:
    keys = values[0].keys() if values else []
    return {k: sum(v[k] for v in values) / len(values) for k in keys}


def _percentile(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(p * len(s)) - 1))] if s else 0.0


def namespace_messages(db: Database, namespace: str) -> list[tuple[MessageRef, str]]:
    """Every message of a namespace, as the baseline reads them."""
    rows = db.cypher(
        "MATCH (m:Message) WHERE m.namespace = $ns RETURN m.conversation, m.ordinal, m.text",
        {"ns": namespace},
        ("conversation", "ordinal", "text"),
    ).rows
    return [((c, int(o)), t or "") for c, o, t in sorted(rows, key=lambda r: (r[0], r[1]))]


def evaluate(
    db: Database,
    questions: Sequence[Question],
    ontology: Ontology,
    *,
    k: int = 20,
    ask: Callable[[Question, int], list[MessageRef]] | None = None,
    embedder: Embedder | None = None,
    server: int | None = None,
) -> RecallReport:
    """Ask every question (``ask``: how; by default :func:`agefacts.retrieve.ask` on ``db``,
    with the ``embedder`` when one is given)
    and score its messages and the baseline's, per category. ``server``: the process serving
    ``db`` (:func:`agefacts.bench.serving_process`), whose CPU each ask is measured by."""
    from .retrieve import ask as ask_db

    def default(q: Question, n: int) -> list[MessageRef]:
        answer = ask_db(db, q.question, ontology, namespace=q.namespace, k=n, embedder=embedder)
        return answer.message_refs()

    ask = ask or default
    by_ns: dict[str, tuple[list[MessageRef], BM25, BM25]] = {}
    per: dict[str, dict[str, list[dict[str, float]]]] = defaultdict(lambda: {"ask": [], "bm25": [], "stemmed": []})
    asked = stems(db, [q.question for q in questions]) if questions else []
    took: list[float] = []
    engine: list[float] = []
    for q, q_stems in zip(questions, asked, strict=True):
        if q.namespace not in by_ns:
            msgs = namespace_messages(db, q.namespace)
            if not msgs:
                raise UsageError(
                    f"namespace {q.namespace!r} of question {q.question!r} has no messages in graph {db.graph!r}: "
                    "load its conversations first (or give the graph they are in)"
                )
            texts = [t for _, t in msgs]
            by_ns[q.namespace] = ([m for m, _ in msgs], BM25(texts), BM25(stems(db, texts)))
        refs, bm25, stemmed = by_ns[q.namespace]
        before = process_cpu(server)
        start = time.perf_counter()
        found = ask(q, k)
        took.append((time.perf_counter() - start) * 1000)
        after = process_cpu(server)
        if before is not None and after is not None:
            engine.append((after - before) * 1000)
        base = [refs[i] for i in bm25.top(q.question, k)]
        strong = [refs[i] for i in stemmed.top(q_stems, k)]
        for cat in dict.fromkeys(("all", q.category)):
            per[cat]["ask"].append(score(found, q.evidence, k))
            per[cat]["bm25"].append(score(base, q.evidence, k))
            per[cat]["stemmed"].append(score(strong, q.evidence, k))
    report = RecallReport(len(questions), k=k)
    for cat in sorted(per, key=lambda c: (c != "all", c)):
        report.counts[cat] = len(per[cat]["ask"])
        report.ask[cat] = _mean(per[cat]["ask"])
        report.bm25[cat] = _mean(per[cat]["bm25"])
        report.bm25_stemmed[cat] = _mean(per[cat]["stemmed"])
    report.latency_ms = {"p50": round(_percentile(took, 0.5), 2), "p95": round(_percentile(took, 0.95), 2)}
    if engine and len(engine) == len(took):
        report.engine_cpu_ms = round(sum(engine) / len(engine), 2)
    return report
