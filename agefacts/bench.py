"""``agefacts bench``: how fast the loader is, measured against its own references in one run.

It generates realistic conversations (entities reused across a namespace's conversations,
relational and literal statements, evidence, single-valued predicates that supersede each
other) and times, on one engine:

- load: the default (bulk) load of the whole corpus into a new graph;
- reference: the compiled Cypher executed statement by statement (``--via cypher``), on the
  first ``reference_cap`` statements' conversations, with the bulk load of that same subset
  timed too, so the two rates are compared at equal size;
- copy: the physical reference: the same vertex and edge rows taken into a plain table with
  a unique key, the fastest way the engine takes rows (COPY on a server; one JSON array
  parameter on the embedded engine, where COPY FROM STDIN breaks the connection);
- replay: the unchanged corpus again (skipped by the ingest log), and a forced replay;
- replace: 2% of the conversations again with edited content (a statement removed, one
  added, the text changed), which retracts what their old versions wrote; the graph's digest
  is then compared with a fresh load of the final versions;
- facts: p50 and p95 of ``facts`` for random entities (by key, and by name as people ask);
- ask: p50 and p95 of ``ask`` with a question naming a random entity, in its namespace;
- the embedded engine's resident memory before and after.

Absolute times depend on the machine; the ratios are what to compare.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
import random
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .clock import StageClock, process_cpu
from .compile import plan
from .consolidate import result_of
from .corpus import edit, entity, generate, more_of
from .db import Database
from .load import Loader
from .models import Conversation, Turn
from .named import run_named
from .ontology import Ontology
from .reads import digest, facts

__all__ = [
    "AddBench",
    "BenchResult",
    "ExtractBench",
    "STATISTICAL_CAP",
    "engine_pid_for",
    "prepare_all",
    "prepared_digest",
    "run_add_bench",
    "run_bench",
    "run_extract_bench",
    "serving_process",
    "statistical_rate",
]


@dataclass
class BenchResult:
    data: dict[str, Any]

    def table(self) -> str:
        d = self.data
        lines = [f"engine: {d['engine']}", f"statements: {d['statements']} ({d['conversations']} conversations)", ""]
        lines.append(f"{'path':<23} {'statements':>10} {'seconds':>9} {'statements/s':>13} {'peak RSS MB':>12}")
        for name, p in d["paths"].items():
            peak = "" if p.get("peak_rss_mb") is None else f"{p['peak_rss_mb']:.0f}"
            lines.append(
                f"{name:<23} {p['statements']:>10} {p['seconds']:>9.2f} {p['statements_per_s']:>13.0f} {peak:>12}"
            )
        lines.append("")
        for k, v in d["ratios"].items():
            lines.append(f"{k:<28} {v:>8.2f}")
        for name in ("load", "load_by_batches", "copy", "replace", "incremental"):
            p = d["paths"].get(name, {})
            if "client_cpu_s" in p:
                server = "not readable here" if p["server_cpu_s"] is None else f"{p['server_cpu_s']:.2f} s"
                lines.append(f"CPU of {name:<15} client {p['client_cpu_s']:>6.2f} s, server {server}")
        for name in ("load", "load_by_batches", "replace", "incremental"):
            stages = d["paths"].get(name, {}).get("stages")
            if stages:
                lines += ["", f"CPU of {name} by stage (s)  client   server"]
                for st, t in stages.items():
                    server = "" if t["server_s"] is None else f"{t['server_s']:8.2f}"
                    lines.append(f"  {st:<24} {t['client_s']:7.2f} {server}")
        lines.append("")
        lines.append(f"facts p50/p95 (ms)      {d['facts_ms']['p50']:.1f} / {d['facts_ms']['p95']:.1f}")
        if d.get("facts_by_name_ms"):
            by_name = d["facts_by_name_ms"]
            lines.append(f"facts by name p50/p95   {by_name['p50']:.1f} / {by_name['p95']:.1f}")
        if d.get("ask_ms"):
            lines.append(f"ask p50/p95 (ms)        {d['ask_ms']['p50']:.1f} / {d['ask_ms']['p95']:.1f}")
        if d.get("statistical"):
            st = d["statistical"]
            lines.append(
                f"statistical extractor: {st['messages_per_s']:.0f} messages/s on one core "
                f"({st['messages']} messages, {st['keyphrases']} keyphrases)"
            )
        lines.append(f"bulk and reference digests equal: {'yes' if d['digest_equal'] else 'NO'}")
        if "first_load_digest_equal" in d:
            yes = "yes" if d["first_load_digest_equal"] else "NO"
            lines.append(f"first load and load by batches digests equal: {yes}")
        if "prepared_equal" in d:
            lines.append(f"prepared in one and two processes, the same: {'yes' if d['prepared_equal'] else 'NO'}")
            lines.append(f"loads prepared by {d['workers']} process(es) from their second batch on")
        lines.append(
            f"after replace and the incremental load, digest equals a fresh load of the final versions: {'yes' if d['replace_digest_equal'] else 'NO'}"
        )
        rss = d.get("engine_rss_mb") or {}
        if rss.get("after") is not None:
            lines.append(
                f"engine resident memory (MB): {rss['before']:.0f} before, {rss['after']:.0f} after, {rss['peak']:.0f} peak"
            )
        if d.get("notes"):
            lines += ["", *d["notes"]]
        return "\n".join(lines)


STATISTICAL_CAP = 5000


def statistical_rate(convs: list[Conversation], cap: int = STATISTICAL_CAP) -> dict[str, Any] | None:
    """The statistical extractor's rate over the user messages of ``convs`` (the first
    ``cap``), run as ``agefacts extract --extractor statistical`` runs it, conversation by
    conversation, in this process: messages per second of this process's CPU time, which is
    one core's, so that a busy machine does not count against it. None without ``yake``."""
    from .errors import ExtractionError
    from .keyphrases import StatisticalExtractor

    try:
        extractor = StatisticalExtractor()
    except ExtractionError:
        return None
    chosen, n = [], 0
    for c in convs:
        if n >= cap:
            break
        chosen.append(c)
        n += extractor.pending(c)
    cpu = time.process_time()
    wall = time.perf_counter()

    async def run() -> list[Conversation]:
        return [(await extractor.conversation(c)).conversation for c in chosen]

    done = asyncio.run(run())
    cpu = time.process_time() - cpu
    wall = time.perf_counter() - wall
    found = sum(len(t.keyphrases or ()) for c in done for t in c.turns)
    return {
        "messages": n,
        "keyphrases": found,
        "cpu_seconds": cpu,
        "seconds": wall,
        "messages_per_s": n / cpu if cpu else float("inf"),
    }


def _rss_mb(pid: int | None) -> tuple[float | None, float | None]:
    if not pid:
        return None, None
    try:
        fields = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status"))
    except OSError:
        return None, None

    def kb(k: str) -> float | None:
        return float(fields[k].split()[0]) / 1024 if k in fields else None

    return kb("VmRSS"), kb("VmHWM")


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def run_bench(
    dsn: str,
    ontology: Ontology,
    *,
    statements: int = 10_000,
    per_conversation: int = 10,
    reference_cap: int = 10_000,
    engine_pid: int | None = None,
    graph_prefix: str = "bench",
    keep: bool = False,
    log: Callable[[str], None] = lambda s: None,
    workers: int | None = None,
) -> BenchResult:
    """``workers``: the preparing processes of the loads (default: as ``agefacts load``,
    :func:`agefacts.workers.default_workers`); preparing alone is also timed in one process
    and in two."""
    from .workers import default_workers

    workers = default_workers() if workers is None else workers
    raw = generate(statements, per_conversation)
    convs = [Conversation.model_validate(c) for c in raw]
    notes: list[str] = []

    def fresh(name: str) -> Database:
        db = Database(dsn, f"{graph_prefix}_{name}").connect()
        db.drop_graph()
        db.ensure_graph()
        return db

    def load(db: Database, items: list[Conversation], **kw: Any) -> None:
        # ``clock``: a StageClock that counts the load's CPU by stage.
        # As `agefacts load` does: the process only loads, so the interpreter is tuned for it.
        kw.setdefault("workers", workers)
        outs = list(Loader(db, ontology, tune_interpreter=True, **kw).load_many((c.id, c) for c in items))
        bad = [o for o in outs if o.status == "failed"]
        if bad:
            raise RuntimeError(f"benchmark load failed: {bad[0].reason}")

    log(f"statistical extractor: keyphrases of up to {STATISTICAL_CAP} user messages")
    statistical = statistical_rate(convs)
    if statistical is None:
        notes.append("The statistical extractor was not measured: pip install 'agefacts[statistical]'.")

    rss_before, _ = _rss_mb(engine_pid)
    paths: dict[str, dict[str, Any]] = {}

    log("preparing alone (no database), in one process and in two")
    prepared: dict[int, str] = {}
    for n in (1, 2):
        secs, made = _timed(functools.partial(prepare_all, convs, ontology, n))
        prepared[n] = prepared_digest(made)
        del made
        paths[f"prepare_{n}_process{'es' if n > 1 else ''}"] = {"statements": statements, "seconds": secs}

    log(f"load: {statements} statements")
    db = fresh("load")
    server = serving_process(db, engine_pid)

    def clocked(items: list[Conversation], into: Database | None = None, **kw: Any) -> dict[str, Any]:
        """Load ``items`` into ``into`` (``db``), timed, with its CPU on both sides and by stage."""
        target = db if into is None else into
        clock = StageClock(server if into is None else serving_process(target, engine_pid))
        cpu = _cpu(clock.server)
        secs, _ = _timed(lambda: load(target, items, clock=clock, **kw))
        n = sum(len(t.recorded.statements) for c in items for t in c.turns if t.recorded)
        out: dict[str, Any] = {"statements": n, "seconds": secs, **_cpu_spent(cpu, _cpu(clock.server))}
        out["stages"] = _stages(clock, out)
        return out

    paths["load"] = clocked(convs)
    paths["load"]["peak_rss_mb"] = _rss_mb(engine_pid)[1]
    # The same corpus by the ordinary path (batch by batch, each a transaction, into indexed
    # labels): what a first load (agefacts.firstload) is compared with, in the same run.
    log(f"load by batches (not a first load): {statements} statements")
    by_batches = fresh("batches")
    paths["load_by_batches"] = clocked(convs, by_batches, first_load=False)
    first_digest_equal = digest(by_batches) == digest(db)
    if not keep:
        by_batches.drop_graph()
    # The reference path loads the same conversations when the corpus is within its cap; the
    # graph is compared as this load left it, before the replace and the incremental load
    # below change it.
    cap = min(reference_cap, statements)
    loaded_digest = digest(db) if cap >= statements else None

    log("replay (unchanged)")
    secs, _ = _timed(lambda: load(db, convs))
    paths["replay"] = {"statements": statements, "seconds": secs}
    log("forced replay")
    secs, _ = _timed(lambda: load(db, convs, force=True))
    paths["forced_replay"] = {"statements": statements, "seconds": secs}

    log("replace: 2% of the conversations, edited")
    rng_edit = random.Random(11)
    chosen = sorted(rng_edit.sample(range(len(raw)), max(1, len(raw) // 50)))
    edited = [Conversation.model_validate(edit(raw[i], i)) for i in chosen]
    paths["replace"] = clocked(edited)
    log("incremental: 10% more conversations of the same people into the loaded graph")
    extra = [Conversation.model_validate(c) for c in more_of(statements, per_conversation)]
    paths["incremental"] = clocked(extra)
    final = list(convs)
    for i, c in zip(chosen, edited, strict=True):
        final[i] = c
    final += extra
    log("fresh load of the final versions, for the digest")
    final_db = fresh("final")
    load(final_db, final)
    replace_digest_equal = digest(final_db) == digest(db)
    if not keep:
        final_db.drop_graph()

    log("facts for random entities")
    keys = [key for (key,) in run_named(db, "entity_keys").rows]
    rng = random.Random(3)
    times = []

    for k in rng.sample(keys, min(60, len(keys))):
        t0 = time.perf_counter()
        facts(db, k)
        times.append((time.perf_counter() - t0) * 1000)
    facts_ms = _percentiles(times)
    # As people ask: by name (or "user") and namespace, which finds the entity first.
    log("facts by name for random entities")
    named = [
        (r["namespace"], r["name"] or "user")
        for r in run_named(db, "entity_names", {}).dicts()
        if r["name"] or r["role"] == "user"
    ]
    times = []
    for ns, name in rng.sample(named, min(60, len(named))):
        t0 = time.perf_counter()
        facts(db, name, namespace=ns)
        times.append((time.perf_counter() - t0) * 1000)
    facts_by_name_ms = _percentiles(times)
    # ask as people ask it: a question naming the entity, in its namespace (linking, the facts
    # of what it names, and the messages that answer it).
    log("ask about random entities")
    from .retrieve import ask

    times = []
    for ns, name in rng.sample(named, min(60, len(named))):
        question = "Where do I live and work?" if name == "user" else f"What do you know about {name}?"
        t0 = time.perf_counter()
        ask(db, question, ontology, namespace=ns)
        times.append((time.perf_counter() - t0) * 1000)
    ask_ms = _percentiles(times)

    # The reference path, and the bulk load at the same size for a fair rate.
    subset, n = [], 0
    for c in convs:
        if n >= cap:
            break
        subset.append(c)
        n += sum(len(t.recorded.statements) for t in c.turns if t.recorded)
    if cap < statements:
        notes.append(
            f"The reference path ran on the first {n} statements; load_vs_reference compares rates at that size."
        )
    log(f"reference (compiled Cypher, statement by statement): {n} statements")
    ref_db = fresh("reference")
    secs, _ = _timed(lambda: load(ref_db, subset, via="cypher"))
    paths["reference"] = {"statements": n, "seconds": secs}

    if cap < statements:
        small = fresh("load_small")
        secs_small, _ = _timed(lambda: load(small, subset))
        paths["load_at_reference_size"] = {"statements": n, "seconds": secs_small}
        same_size_load = paths["load_at_reference_size"]
        log("digests of the two paths")
        digests_equal = digest(small) == digest(ref_db)
        if not keep:
            small.drop_graph()
    else:
        same_size_load = paths["load"]
        log("digests of the two paths")
        digests_equal = loaded_digest == digest(ref_db)

    log("copy: the same rows into a plain table")
    # One row per key, as the graph holds them: conversations share entities and statements,
    # and a plain COPY into a table with a primary key would fail on the repeats.
    by_key: dict[str, dict[str, Any]] = {}
    for c in convs:
        p = plan(c, result_of(c, ontology), ontology)
        for v in p.vertices:
            by_key.setdefault(v.k, {"label": v.label, "k": v.k, "p": v.props})
        for e in p.edges:
            by_key.setdefault(e.k, {"label": e.label, "k": e.k, "s": e.start, "e": e.end, "p": e.props})
    rows = list(by_key.values())
    # The rows the incremental load adds (keys the first load did not write), to compare it
    # with copying as many rows at the copy's rate.
    added: set[str] = set()
    for c in extra:
        p = plan(c, result_of(c, ontology), ontology)
        added |= {v.k for v in p.vertices if v.k not in by_key} | {e.k for e in p.edges if e.k not in by_key}
    server = serving_process(db, engine_pid)
    cpu = _cpu(server)
    secs = _copy(db, rows)
    paths["copy"] = {"statements": statements, "seconds": secs, "rows": len(rows), **_cpu_spent(cpu, _cpu(server))}
    for p_ in paths.values():
        p_["statements_per_s"] = p_["statements"] / p_["seconds"] if p_["seconds"] else float("inf")
        p_.setdefault("peak_rss_mb", None)
    rss_after, peak = _rss_mb(engine_pid)
    ratios = {
        "prepare_2_vs_1_process": paths["prepare_1_process"]["seconds"] / paths["prepare_2_processes"]["seconds"],
        "load_vs_reference": same_size_load["statements_per_s"] / paths["reference"]["statements_per_s"],
        "copy_vs_load": paths["load"]["seconds"] / paths["copy"]["seconds"],
        "copy_vs_load_by_batches": paths["load_by_batches"]["seconds"] / paths["copy"]["seconds"],
        "first_load_vs_by_batches": paths["load"]["seconds"] / paths["load_by_batches"]["seconds"],
        "first_load_vs_replay": paths["load"]["seconds"] / paths["replay"]["seconds"],
        # The rate of replacing changed conversations against the rate of the first load.
        "replace_rate_vs_load": paths["replace"]["statements_per_s"] / paths["load"]["statements_per_s"],
        # 10% more conversations of the same people into the loaded graph: its rate against the
        # first load's, and its time against copying as many new rows at the copy's rate.
        "incremental_rate_vs_load": paths["incremental"]["statements_per_s"] / paths["load"]["statements_per_s"],
        "copy_vs_incremental_load": paths["incremental"]["seconds"]
        / (paths["copy"]["seconds"] * len(added) / len(rows)),
    }
    for name in ("load", "load_by_batches"):
        # The server's CPU against the copy's, where both were read (a server on this machine).
        spent, copied = paths[name].get("server_cpu_s"), paths["copy"].get("server_cpu_s")
        if spent is not None and copied:
            ratios[f"{name}_server_cpu_vs_copy"] = spent / copied
    if same_size_load is not paths["load"]:
        # Linear, not quadratic: the rate at the full size against the rate at the smaller one.
        ratios["rate_full_vs_reference_size"] = paths["load"]["statements_per_s"] / same_size_load["statements_per_s"]
    if not keep:
        for name in ("load", "reference"):
            Database(dsn, f"{graph_prefix}_{name}").connect().drop_graph()
    version = db.execute("SELECT version()")[0][0]
    engine = "embedded (PGlite + AGE)" if "pglite" in version.lower() else version.split(",")[0]
    data = {
        "statements": statements,
        "conversations": len(convs),
        "engine": engine,
        "paths": paths,
        "ratios": ratios,
        "facts_ms": facts_ms,
        "facts_by_name_ms": facts_by_name_ms,
        "ask_ms": ask_ms,
        "engine_rss_mb": {"before": rss_before, "after": rss_after, "peak": peak},
        "notes": notes,
        "statistical": statistical,
        "digest_equal": digests_equal,
        "replace_digest_equal": replace_digest_equal,
        "first_load_digest_equal": first_digest_equal,
        "workers": workers,
        "prepared_equal": prepared[1] == prepared[2],
    }
    return BenchResult(data)


def prepare_all(
    convs: list[Conversation],
    ontology: Ontology,
    workers: int,
    batch_statements: int = 5000,
    batch_conversations: int = 1000,
) -> list[Any]:
    """Prepare ``convs`` as a load does, with no database (hash, ground, gate, consolidate,
    compile, assemble the rows), in batches, by the loader's own preparing: a thread of this
    process for ``workers`` 1, else that many worker processes from the second batch on."""
    from .preparing import Preparing, batches

    out: list[Any] = []
    inflight: list[Callable[[], Any]] = []
    with Preparing(ontology, workers, tuned=True).running() as preparing:
        for b, _ in batches(((c.id, c) for c in convs), batch_statements, batch_conversations):
            inflight.append(preparing.submit(False, b, {}, "bulk", {}))
            while len(inflight) > preparing.ahead:
                out.append(inflight.pop(0)())
        out += [ready() for ready in inflight]
    return out


def prepared_digest(prepared: list[Any]) -> str:
    """A digest of what :func:`prepare_all` made, to compare two runs of it."""
    h = hashlib.sha256()
    for out, assembled, hashes in prepared:
        for e in out:
            if hasattr(e, "written"):
                h.update(
                    repr((e.source, e.content_hash, e.prior, e.document, e.written.counts, e.written.outcome)).encode()
                )
            else:
                h.update(repr(e).encode())
        if assembled is not None:
            h.update(repr((assembled.vertices, assembled.edges, sorted(assembled.statement_keys))).encode())
        h.update(repr(sorted(hashes.items())).encode())
    return h.hexdigest()


def serving_process(db: Database, engine_pid: int | None) -> int | None:
    """The process whose CPU is the server's work for ``db``: the embedded engine's, or the
    backend serving this connection when the server runs on this machine (its /proc entry
    readable); None when it cannot be read from here."""
    if engine_pid is not None:
        return engine_pid if os.path.exists(f"/proc/{engine_pid}/stat") else None
    version = db.execute("SELECT version()")[0][0].lower()
    # The connection's details after a statement has run on it: one that was closed meanwhile
    # is opened again by that statement, and the backend read before was gone (the copy's
    # CPU went unmeasured in one bench run in two on PostgreSQL 16).
    info = db.conn.info
    local = info.host.startswith("/") or info.host in ("localhost", "127.0.0.1", "::1")
    if not local:
        return None  # another machine's pid
    if "pglite" in version:
        # The embedded engine serves every client from one process, which the backend pid it
        # reports is not: it is the process listening on the DSN's port.
        from .clock import listening_process

        return listening_process(info.host, int(info.port)) if info.port else None
    try:
        # A pid of this machine that is not a PostgreSQL backend is not ours to read.
        if b"postgres" not in Path(f"/proc/{info.backend_pid}/cmdline").read_bytes():
            return None
    except OSError:
        return None
    return info.backend_pid


def _cpu(server: int | None) -> tuple[float, float | None]:
    """CPU seconds so far: this process's (every thread), and the server process's."""
    return time.process_time(), process_cpu(server)


def _cpu_spent(before: tuple[float, float | None], after: tuple[float, float | None]) -> dict[str, float | None]:
    server = None if before[1] is None or after[1] is None else after[1] - before[1]
    return {"client_cpu_s": after[0] - before[0], "server_cpu_s": server}


def _stages(clock: StageClock, spent: Mapping[str, Any]) -> dict[str, dict[str, float | None]]:
    """The clock's seconds by stage, and "rest": what the whole path spent that no stage
    counted (reading its input, waiting on threads, Python between stages). Worker processes'
    client seconds are counted by stage but are no part of this process's total."""
    out = clock.spent()
    client = spent["client_cpu_s"] - (sum(t["client_s"] or 0.0 for t in out.values()) - clock.elsewhere)
    server = spent["server_cpu_s"]
    if server is not None:
        server -= sum(t["server_s"] or 0.0 for t in out.values())
    out["rest"] = {"client_s": client, "server_s": server}
    return out


def _percentiles(times_ms: list[float]) -> dict[str, float]:
    times = sorted(times_ms)
    if not times:
        return {"p50": float("nan"), "p95": float("nan")}
    return {"p50": statistics.median(times), "p95": times[max(0, int(len(times) * 0.95) - 1)]}


def _copy(db: Database, rows: list[dict[str, Any]]) -> float:
    """Time the engine taking ``rows`` into a plain table with a unique key."""
    db.execute("CREATE SCHEMA IF NOT EXISTS agefacts_bench")
    db.execute("DROP TABLE IF EXISTS agefacts_bench.rows")
    db.execute(
        "CREATE TABLE agefacts_bench.rows (k text PRIMARY KEY, label text NOT NULL, s text, e text, p jsonb NOT NULL)"
    )
    embedded = "pglite" in db.execute("SELECT version()")[0][0].lower()
    t0 = time.perf_counter()
    if embedded:
        # COPY FROM STDIN breaks the embedded engine's connection: one JSON array per batch.
        for i in range(0, len(rows), 5000):
            db.execute(
                "INSERT INTO agefacts_bench.rows SELECT r.k, r.label, r.s, r.e, r.p "
                "FROM jsonb_to_recordset(%s::jsonb) AS r(k text, label text, s text, e text, p jsonb) ON CONFLICT (k) DO NOTHING",
                (json.dumps(rows[i : i + 5000], ensure_ascii=False),),
            )
    else:
        with db.conn.cursor() as cur, cur.copy("COPY agefacts_bench.rows (k, label, s, e, p) FROM STDIN") as cp:
            for r in rows:
                cp.write_row((r["k"], r["label"], r.get("s"), r.get("e"), json.dumps(r["p"], ensure_ascii=False)))
    secs = time.perf_counter() - t0
    db.execute("DROP TABLE agefacts_bench.rows")
    return secs


def engine_pid_for(dsn: str | None) -> int | None:
    """The embedded engine's pid when the bench runs on it (the DSN resolves to it)."""
    from .db import chooses_embedded

    if not chooses_embedded(dsn):
        return None
    from .engine import Engine

    state = Engine().state()
    return state.pid if state else None


# -- extraction ---------------------------------------------------------------------------------------
@dataclass
class ExtractBench:
    """Turns per second and the mean number of requests in flight, per concurrency, against
    a local model endpoint with a fixed latency."""

    latency: float
    conversations: int
    turns: int
    rows: list[dict[str, float]]

    def table(self) -> str:
        lines = [
            f"model endpoint: local, {self.latency * 1000:.0f} ms per reply",
            f"user turns: {self.turns} ({self.conversations} conversations)",
            "",
            f"{'concurrency':>11} {'seconds':>9} {'turns/s':>9} {'mean in flight':>15} {'most in flight':>15}",
        ]
        for r in self.rows:
            lines.append(
                f"{r['concurrency']:>11.0f} {r['seconds']:>9.2f} {r['turns_per_s']:>9.1f} "
                f"{r['mean_in_flight']:>15.2f} {r['most_in_flight']:>15.0f}"
            )
        return "\n".join(lines)


def _chatty(conversations: int, turns: int) -> list[Conversation]:
    out = []
    for c in range(conversations):
        items: list[dict[str, Any]] = []
        for i in range(turns):
            at = f"2026-01-{1 + c % 28:02d}T{i // 60:02d}:{i % 60:02d}:00Z"
            items.append({"speaker": "user", "text": f"Message {i} of conversation {c}.", "at": at})
            items.append({"speaker": "assistant", "text": "I see."})
        out.append(Conversation.model_validate({"id": f"x{c}", "namespace": "bench", "turns": items}))
    return out


def run_extract_bench(
    ontology: Ontology,
    *,
    conversations: int = 16,
    turns: int = 5,
    latency: float = 0.2,
    concurrencies: tuple[int, ...] = (1, 4, 8),
    log: Callable[[str], None] = lambda s: None,
) -> ExtractBench:
    """Extract generated conversations (``turns`` user turns each) against a local endpoint
    that answers after ``latency`` seconds, at each concurrency; the endpoint measures the
    requests it holds at once."""
    import asyncio
    import subprocess
    import sys

    import httpx

    from .extract import extract_all
    from .model_client import LLMClient

    convs = _chatty(conversations, turns)
    rows: list[dict[str, float]] = []
    # The endpoint runs in a process of its own, as a real one does: in this interpreter it
    # would compete with the client for the interpreter lock and slow both.
    server = subprocess.Popen(
        [sys.executable, "-m", "agefacts.fake_model", "--latency", str(latency)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        for n in concurrencies:
            log(f"concurrency {n}")

            async def run(n: int = n) -> None:
                async with LLMClient(url, "fake-model", concurrency=n) as client:
                    await extract_all(client, convs, ontology, concurrency=n)

            httpx.post(url + "/reset")
            seconds, _ = _timed(lambda: asyncio.run(run()))
            stats = httpx.get(url + "/stats").json()
            rows.append(
                {
                    "concurrency": n,
                    "seconds": seconds,
                    "turns_per_s": stats["requests"] / seconds,
                    "mean_in_flight": stats["mean_in_flight"],
                    "most_in_flight": stats["most_in_flight"],
                }
            )
    finally:
        if server.stdin is not None:
            server.stdin.close()  # it serves until its input closes
        server.wait(timeout=10)
    return ExtractBench(latency, conversations, conversations * turns, rows)


# -- how an add's cost grows with its conversation -------------------------------------------------------
@dataclass
class AddBench:
    """Per conversation length: the first add in a process (which reads the conversation
    once), then p50/p95 of single-message adds; the p50 against the shortest's; whether the
    graph's digest equals a fresh load of what the memory exported."""

    adds: int
    rows: list[dict[str, float]]
    digest_equal: bool
    requests: int | None = None  # sent to the model, with one
    user_turns: int | None = None  # the person's messages added one at a time, with a model

    def table(self) -> str:
        lines = [
            f"Memory.add of one message to a conversation of n turns ({self.adds} adds each; ratio: p50 / p50 at the shortest)",
            "",
            f"{'turns':>7} {'first add ms':>13} {'p50 ms':>8} {'p95 ms':>8} {'ratio':>6}",
        ]
        for r in self.rows:
            lines.append(
                f"{r['turns']:>7.0f} {r['first_ms']:>13.1f} {r['p50_ms']:>8.1f} {r['p95_ms']:>8.1f} {r['ratio']:>6.2f}"
            )
        lines.append("")
        lines.append(f"digest equal to a fresh load of the export: {'yes' if self.digest_equal else 'NO'}")
        if self.requests is not None:
            lines.append(f"requests to the model: {self.requests} for {self.user_turns} of the person's messages")
        return "\n".join(lines)


_BENCH_PLACES = ["Oslo", "Lyon", "Porto", "Bergen", "Quito", "Hanoi", "Accra", "Perth"]
_BENCH_THINGS = ["tea", "jazz", "chess", "fado", "hiking", "sushi", "opera", "tennis"]


def _said(i: int, at: str) -> Turn:
    """A user turn that names a new place (every third), says again where the person is from
    (every fifth, about an earlier place), or says what they like: with its extraction."""
    if i % 3 == 0:
        name = f"{_BENCH_PLACES[i % len(_BENCH_PLACES)]} {i}"
        text = f"Last week I went to {name} with my family."
        entities = [entity(f"e{i}", "Place", name)]
        claims = [{"subject": "user", "predicate": "from_place", "object": f"e{i}", "quote": f"I went to {name}"}]
    elif i % 5 == 0 and i > 3:
        j = (i // 3 - 1) * 3
        text = "You know, I am from there, really."
        entities, claims = (
            [],
            [{"subject": "user", "predicate": "from_place", "object": f"e{j}", "quote": "I am from there"}],
        )
    else:
        thing = f"{_BENCH_THINGS[i % len(_BENCH_THINGS)]} {i % 40}"
        text = f"These days I like {thing} a lot."
        entities, claims = [], [{"subject": "user", "predicate": "likes", "value": thing, "quote": f"I like {thing}"}]
    recorded = {"entities": entities, "statements": [c | {"polarity": "asserted", "tense": "current"} for c in claims]}
    return Turn.model_validate({"speaker": "user", "text": text, "at": at, "recorded": recorded | {"followups": []}})


def _chat(start: int, n: int) -> list[Turn]:
    out: list[Turn] = []
    for i in range(start, start + n):
        at = f"2026-{1 + (i // 1000) % 12:02d}-{1 + (i // 40) % 28:02d}T{(i // 60) % 24:02d}:{i % 60:02d}:00Z"
        out.append(_said(i, at))
        out.append(Turn(speaker="assistant", text="I see, tell me more.", at=at))
    return out


def run_add_bench(
    dsn: str,
    ontology: Ontology,
    *,
    sizes: tuple[int, ...] = (10, 100, 1000),
    adds: int = 30,
    log: Callable[[str], None] = lambda s: None,
    model: bool = False,
    opening: str = "user",
    asynchronous: bool = False,
) -> AddBench:
    """For each size, a conversation of that many turns (half the person's, each with its
    extraction, half the assistant's) added at once, then ``adds`` single messages added one
    by one through :class:`agefacts.Memory`; then the memory's export loaded into a new graph.

    With ``model``, the adds are the person's messages without their extraction, asked of a
    local stand-in for a model endpoint (:mod:`agefacts.fake_model`) that answers each with
    it: the path a live model takes. ``opening="assistant"``: each conversation opens with
    the assistant's greeting. ``asynchronous``: through :class:`agefacts.AsyncMemory`."""
    import asyncio

    from .fake_model import FakeModel, completion
    from .memory import AsyncMemory, Memory
    from .model_client import LLMClient

    graph = "agefacts_bench_add"
    rows: list[dict[str, float]] = []
    Database(dsn, graph).connect().drop_graph()
    fake: FakeModel | None = None
    if model:
        replies = {t.text: t.recorded for t in _chat(0, max(sizes) // 2 + adds + 2) if t.recorded is not None}

        def answer(body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
            text = body["messages"][-1]["content"].split("Message to extract from:\n", 1)[1].split("\n\nReply", 1)[0]
            said = replies.get(text)
            return (
                200,
                completion(
                    (said.model_dump_json() if said else '{"entities":[],"statements":[],"followups":[]}'),
                    "bench-model",
                ),
                {},
            )

        fake = FakeModel(answer).start()

    def message(i: int) -> list[Turn]:
        t = _chat(i, 1)[0]
        return [t.model_copy(update={"recorded": None})] if model else [t]

    def opened(size: int) -> list[Turn]:
        # With a model, the opening turns are the model's to read too, as in a live chat: a
        # conversation recorded by hand and then by a model changes its model (loaded whole).
        turns = [t.model_copy(update={"recorded": None}) if model else t for t in _chat(0, size // 2)]
        if opening == "assistant":
            turns = [Turn(speaker="assistant", text="Hello! How can I help?", at=turns[0].at), *turns]
        return turns

    llm = LLMClient(fake.url, "bench-model") if fake is not None else None

    async def timed_async(memory: Any, cid: str, i: int) -> float:
        start = time.perf_counter()
        await memory.add(message(i), namespace="bench", conversation=cid)
        return time.perf_counter() - start

    async def on_async() -> tuple[list[dict[str, float]], list[Conversation], str]:
        out = []
        async with AsyncMemory(dsn, graph, ontology=ontology, llm=llm) as memory:
            for size in sorted(sizes):
                log(f"{size} turns")
                cid = f"chat{size}"
                await memory.add(opened(size), namespace="bench", conversation=cid)
                first = await timed_async(memory, cid, size // 2)
                times = [await timed_async(memory, cid, size // 2 + 1 + k) for k in range(adds)]
                out.append(_add_row(size, first, times))
            exported = await memory.export("bench")
        with Database(dsn, graph) as db:
            return out, exported, digest(db)

    try:
        if asynchronous:
            rows, exported, mine = asyncio.run(on_async())
        else:
            with Memory(dsn, graph, ontology=ontology, llm=llm) as memory:
                for size in sorted(sizes):
                    log(f"{size} turns")
                    cid = f"chat{size}"
                    memory.add(opened(size), namespace="bench", conversation=cid)
                    timed = [
                        _timed(lambda: memory.add(message(i), namespace="bench", conversation=cid))[0]  # noqa: B023
                        for i in range(size // 2, size // 2 + 1 + adds)
                    ]
                    rows.append(_add_row(size, timed[0], timed[1:]))
                exported = memory.export("bench")
                mine = digest(memory.db)
    finally:
        if fake is not None:
            fake.stop()
    requests = len(fake.requests) if fake is not None else None
    for r in rows:
        r["ratio"] = r["p50_ms"] / rows[0]["p50_ms"]
    check = Database(dsn, graph + "_fresh").connect()
    try:
        check.drop_graph()
        check.ensure_graph()
        list(Loader(check, ontology).load_many((c.id, c) for c in exported))
        equal = digest(check) == mine
    finally:
        check.drop_graph()
        check.close()
    end = Database(dsn, graph).connect()
    end.drop_graph()
    end.close()
    # Each of the person's messages asks the model once: the opening conversation's (half its
    # turns) and those added one at a time.
    said = sum(size // 2 + adds + 1 for size in sizes)
    return AddBench(adds, rows, equal, requests, said if model else None)


def _add_row(size: int, first: float, times: list[float]) -> dict[str, float]:
    """One length's row of the add bench, from the first add's and the timed adds' seconds."""
    p = _percentiles([1000 * t for t in times])
    return {"turns": size, "first_ms": first * 1000, "p50_ms": p["p50"], "p95_ms": p["p95"]}
