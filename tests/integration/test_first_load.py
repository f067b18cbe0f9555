"""A load into a graph that holds none of agefacts' labels goes by the first-load path
(agefacts.firstload): one transaction, rows written with no look-up and the indexes built
after, shared vertices merged and derived in the client, fact versions written once. Whatever
the corpus and however it is cut into batches, the graph is the one the ordinary path writes;
a failure anywhere in it leaves nothing, and the ordinary path then loads the same batches."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agefacts.bulk import BulkWriter
from agefacts.corpus import generate
from agefacts.db import Database
from agefacts.errors import DatabaseError
from agefacts.firstload import FirstLoad
from agefacts.load import Loader
from agefacts.models import Conversation
from agefacts.reads import digest

from ..helpers import ONTO, at_once, fresh, fuzz
from .test_differential import version


def _load(
    db: Database,
    convs: list[Conversation],
    *,
    first: bool = True,
    batch: int = 40,
    landed: tuple[str, ...] = ("loaded",),
    workers: int = 1,
) -> Loader:
    loader = Loader(db, ONTO, batch_statements=batch, workers=workers)
    loader.first_load = first
    outs = list(loader.load_many((c.id, c) for c in convs))
    assert len(outs) == len(convs) and {o.status for o in outs} <= set(landed), [o.reason for o in outs]
    return loader


@st.composite
def corpora(draw) -> tuple[list[Conversation], int]:
    """Generated people's conversations (entities and one-value facts shared across them),
    with hand-drawn ones about one namespace's owner mixed in, cut into batches of a drawn
    size: the same entity and the same statement written by several batches."""
    convs = [
        Conversation.model_validate(c)
        for c in generate(draw(st.integers(20, 160)), draw(st.integers(2, 8)), seed=draw(st.integers(0, 10_000)))
    ]
    mixed = [draw(version(f"h{i}", 1 + i)) for i in range(draw(st.integers(0, 3)))]
    at = draw(st.permutations(range(len(convs) + len(mixed))))
    everything = convs + mixed
    return [everything[i] for i in at], draw(st.integers(5, 60))


@fuzz(6)
@given(corpus=corpora(), workers=st.sampled_from([1, 2]))
def test_a_first_load_writes_the_graph_the_ordinary_path_writes(dsn, graph_name, corpus, workers):
    # Prepared in this process or in worker processes, which hand back less of a batch.
    convs, batch = corpus
    first = fresh(Database(dsn, graph_name + "_first").connect())
    ordinary = fresh(Database(dsn, graph_name + "_ordinary").connect())
    try:
        loaded = _load(first, convs, batch=batch, workers=workers)
        assert loaded.first_loads == 1 and not loaded.fallbacks
        assert _load(ordinary, convs, first=False, batch=batch).first_loads == 0
        assert digest(first) == digest(ordinary)
        # Loaded again, nothing changes: every conversation is in the ingest log.
        again = Loader(first, ONTO)
        assert {o.status for o in again.load_many((c.id, c) for c in convs)} == {"skipped"}
        assert digest(first) == digest(ordinary)
    finally:
        first.drop_graph()
        ordinary.drop_graph()


def _as_read(rows: list[dict]) -> list[dict]:
    return sorted(({**r, "said": sorted(r["said"])} for r in rows), key=lambda r: r["statement"])


@fuzz(6)
@given(corpus=corpora())
def test_a_first_load_reads_time_from_the_statements_the_graph_gives_back(db, monkeypatch, corpus):
    # A first load reads time from the rows it wrote (FirstLoad.statement_rows), not from a
    # read of the graph: what it gives the reading is what the graph gives back for the same
    # chains once it is committed (BulkWriter.chain_rows, what every other load reads), and
    # the ids it writes the versions' edges with are the graph's.
    convs, batch = corpus
    fresh(db)
    made: list[tuple[list[dict], dict]] = []
    chains: set = set()
    real_rows, real_write = FirstLoad.statement_rows, FirstLoad.write_batch

    def write_batch(self, batch):
        chains.update(batch.chain_of.values())  # every chain the load writes a statement of
        return real_write(self, batch)

    def statement_rows(self):
        rows = real_rows(self)
        made.append((rows, dict(self.ids)))
        return rows

    monkeypatch.setattr(FirstLoad, "write_batch", write_batch)
    monkeypatch.setattr(FirstLoad, "statement_rows", statement_rows)
    assert _load(db, convs, batch=batch).first_loads == 1
    ((rows, ids),) = made
    read, id_of, _ = BulkWriter(db).chain_rows(chains)
    assert rows and _as_read(rows) == _as_read(read)
    assert id_of and all(ids[k] == i for k, i in id_of.items())


def test_a_first_load_that_fails_is_loaded_again_by_the_ordinary_path(db, other_graph, monkeypatch, caplog):
    convs = [Conversation.model_validate(c) for c in generate(300, 5, seed=3)]
    failed: list[str] = []
    real = BulkWriter.write_new_edges

    def failing(self, label, rows):
        # The third batch's edges: two batches' rows are in the transaction already.
        if label == "EVIDENCED_BY" and not failed:
            calls.append(label)
            if len(calls) == 3:
                failed.append(label)
                raise DatabaseError("the server went away mid-copy (a fault injected by the test)")
        return real(self, label, rows)

    calls: list[str] = []
    monkeypatch.setattr(BulkWriter, "write_new_edges", failing)
    caplog.set_level("INFO", logger="agefacts.load")
    loader = _load(db, convs, batch=50)
    assert failed == ["EVIDENCED_BY"]  # the fault happened
    assert loader.first_loads == 0 and "first load: the server went away" in loader.fallbacks[0]
    assert "the first load was rolled back" in caplog.text
    monkeypatch.undo()
    assert digest(db) == digest(_graph(other_graph("clean"), convs))


def _graph(db: Database, convs: list[Conversation]) -> Database:
    _load(db, convs, first=False)
    return db


def test_a_first_load_stopped_before_its_end_leaves_nothing(db, other_graph, monkeypatch):
    convs = [Conversation.model_validate(c) for c in generate(300, 5, seed=9)]
    real = FirstLoad.write_batch
    written: list[int] = []

    def interrupted(self, batch):
        written.append(len(batch.statement_keys))
        if len(written) == 3:
            raise KeyboardInterrupt  # Ctrl-C while the third batch is written
        return real(self, batch)

    monkeypatch.setattr(FirstLoad, "write_batch", interrupted)
    loader = Loader(db, ONTO, batch_statements=50)
    with pytest.raises(KeyboardInterrupt):
        list(loader.load_many((c.id, c) for c in convs))
    assert len(written) == 3 and all(written)
    # Nothing of the two batches written before: not a label, not a line of the ingest log.
    assert db.labels() == {}
    assert db.execute("SELECT count(*) FROM agefacts.ingest_log WHERE graph = %s", (db.graph,)) == [(0,)]
    monkeypatch.undo()
    assert _load(db, convs).first_loads == 1
    assert digest(db) == digest(_graph(other_graph("clean"), convs))


def test_loaders_racing_into_a_new_graph_land_every_conversation(dsn, graph_name, other_graph):
    # Two loaders into one new graph at once, with people in common: both may start a first
    # load; the one that is not first finds the other's labels (or keys) and goes the
    # ordinary way.
    convs = [Conversation.model_validate(c) for c in generate(400, 5, seed=12)]
    halves = [convs[: len(convs) * 2 // 3], convs[len(convs) // 3 :]]
    target = Database(dsn, graph_name + "_raced").connect()
    fresh(target)
    loaders: list[Loader] = []

    def run(i: int) -> None:
        with Database(dsn, target.graph).connect() as db:
            # What the other loader wrote first is skipped here.
            loaders.append(_load(db, halves[i], landed=("loaded", "skipped")))

    assert at_once(run, 2) == []
    assert sorted(x.first_loads for x in loaders) == [0, 1]
    try:
        assert digest(target) == digest(_graph(other_graph("clean"), convs))
    finally:
        target.drop_graph()


def test_a_first_load_asked_to_stop_keeps_the_batches_it_wrote(db, other_graph, monkeypatch):
    # Ctrl-C in `agefacts load` asks the load to stop after the batch being written: a first
    # load then finishes what it wrote (indexes, fact versions), commits it and says so.
    convs = [Conversation.model_validate(c) for c in generate(300, 5, seed=4)]
    real = FirstLoad.write_batch
    written: list[int] = []

    def counted(self, batch):
        written.append(1)
        return real(self, batch)

    monkeypatch.setattr(FirstLoad, "write_batch", counted)
    loader = Loader(db, ONTO, batch_statements=50)
    outs = []
    with pytest.raises(KeyboardInterrupt):
        for o in loader.load_many(((c.id, c) for c in convs), stop=lambda: len(written) >= 2):
            outs.append(o)
    assert loader.first_loads == 1 and len(written) >= 2
    loaded = [o.conversation for o in outs if o.status == "loaded"]
    assert 0 < len(loaded) < len(convs) and len(outs) == len(loaded)
    monkeypatch.undo()
    # What it said was loaded is what the graph holds, and the same command loads the rest.
    assert digest(db) == digest(_graph(other_graph("part"), [c for c in convs if c.id in loaded]))
    again = list(Loader(db, ONTO).load_many((c.id, c) for c in convs))
    assert sorted(o.conversation for o in again if o.status == "skipped") == sorted(loaded)
    assert digest(db) == digest(_graph(other_graph("whole"), convs))


@pytest.mark.parametrize(
    ("cap", "value", "statements"), [("first_load_rows", 400, 300), ("first_load_namespaces", 2, 900)]
)
def test_a_first_load_past_its_caps_commits_and_goes_on_by_batches(
    db, other_graph, monkeypatch, cap, value, statements
):
    # It keeps every batch until it commits (to load them again should it fail), and holds a
    # lock on each namespace: past either cap it commits and the rest of the load goes the
    # ordinary way.
    convs = [Conversation.model_validate(c) for c in generate(statements, 5, seed=6)]
    assert len({c.namespace for c in convs}) > 2
    first: list[int] = []
    real = FirstLoad.write_batch
    monkeypatch.setattr(FirstLoad, "write_batch", lambda self, batch: first.append(1) or real(self, batch))
    loader = Loader(db, ONTO, batch_statements=50)
    setattr(loader, cap, value)
    outs = list(loader.load_many((c.id, c) for c in convs))
    assert {o.status for o in outs} == {"loaded"} and len(outs) == len(convs)
    assert loader.first_loads == 1 and not loader.fallbacks
    # 50 statements a batch: the first load took some of the batches, and no more.
    assert 0 < len(first) < statements // 50 - 1, len(first)
    monkeypatch.undo()
    assert digest(db) == digest(_graph(other_graph("clean"), convs))


def test_a_first_load_holds_a_lock_per_namespace_not_per_conversation(db, other_graph, monkeypatch):
    # One transaction for the whole load: a lock per conversation held to its end overflowed
    # a server's lock table at 30,000 conversations ("out of shared memory"), and the whole
    # load went again the ordinary way. Its labels, made in that transaction, hold every other
    # writer back until it commits; the namespaces stay locked against a move.
    convs = [Conversation.model_validate(c) for c in generate(600, 5, seed=2)]
    held: list[tuple[int, int]] = []
    namespaces: set[str] = set()
    real = FirstLoad.write_batch

    def counted(self, batch):
        # This batch's locks are taken before it is written.
        rows = next(rows for label, rows, _ in batch.vertices if label == "Conversation")
        namespaces.update(json.loads(r)["namespace"] for r in rows)
        (locks,) = self.db.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
        )[0]
        held.append((int(locks), len(namespaces)))
        return real(self, batch)

    monkeypatch.setattr(FirstLoad, "write_batch", counted)
    loader = Loader(db, ONTO, batch_statements=50)
    assert {o.status for o in loader.load_many((c.id, c) for c in convs)} == {"loaded"}
    assert loader.first_loads == 1 and len(held) > 5
    assert all(locks <= namespaces for locks, namespaces in held), held
    monkeypatch.undo()
    assert digest(db) == digest(_graph(other_graph("clean"), convs))


@pytest.mark.parametrize("first", [True, False], ids=["first load", "by batches"])
@pytest.mark.parametrize("fault", ["killed", "stopped"])
def test_a_load_whose_workers_are_lost_at_its_end_reads_time_itself(db, other_graph, monkeypatch, caplog, fault, first):
    # At a first load's end, and for an ordinary load's last batch, the worker processes have
    # nothing left to prepare and read time (Preparing.read_elsewhere). Killed then, or stopped
    # (as a debugger or a system swapping stops a process: alive, answering nothing), the parts
    # they held are read in the loading process, and the load lands whole.
    import os
    import signal

    from agefacts.preparing import Preparing

    convs = [Conversation.model_validate(c) for c in generate(400, 5, seed=12)]
    real = Preparing.read_elsewhere
    lost: list[int] = []

    def read_elsewhere(self):
        start = real(self)
        assert start is not None and self._processes is not None  # this load started workers
        pool = self._processes

        def read(rows, held):
            # Lost as the first part is handed to them: asked for a reader, the last batch may
            # still be being prepared, and a loss then is preparing's (another test's) to meet.
            for p in [] if lost else pool.processes:
                os.kill(p.pid, signal.SIGKILL if fault == "killed" else signal.SIGSTOP)
                lost.append(p.pid)
            return start(rows, held)

        return read

    monkeypatch.setattr(Preparing, "read_elsewhere", read_elsewhere)
    caplog.set_level("INFO", logger="agefacts.load")
    loader = Loader(db, ONTO, batch_statements=60, workers=2, worker_timeout=3.0, first_load=first)
    outs = list(loader.load_many((c.id, c) for c in convs))
    assert {o.status for o in outs} == {"loaded"} and len(outs) == len(convs)
    assert len(lost) == 2 and loader.first_loads == int(first) and not loader.fallbacks
    # The fault happened, and was met where time was read: a worker was found gone, or silent.
    said = "no answer within 3 s" if fault == "stopped" else "a worker process that prepares batches ended"
    assert said in caplog.text
    monkeypatch.undo()
    assert digest(db) == digest(_graph(other_graph("clean"), convs))
