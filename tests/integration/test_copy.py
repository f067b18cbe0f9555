"""On a server, the bulk path sends rows whose keys are new by COPY (agefacts.bulk); the graph
it writes is the one the upsert writes, and a key that turns up meanwhile sends the batch back
to the upsert. On the embedded engine COPY is never sent (it breaks the connection)."""

from __future__ import annotations

import json
import random
import threading

import psycopg
from psycopg import sql

from agefacts.bulk import BulkWriter
from agefacts.compile import plan
from agefacts.consolidate import result_of
from agefacts.corpus import edit, generate
from agefacts.db import Database, copy_value
from agefacts.load import Loader
from agefacts.models import Conversation
from agefacts.reads import digest
from agefacts.tables import dumps

from ..helpers import ONTO, likes


def _server(db: Database) -> bool:
    return "pglite" not in db.execute("SELECT version()")[0][0].lower()


def _load(db: Database, convs: list[Conversation], *, copy_new: bool = True, force: bool = False) -> Loader:
    loader = Loader(db, ONTO, force=force, batch_statements=120)
    loader.copy_new = copy_new
    outs = list(loader.load_many((c.id, c) for c in convs))
    assert {o.status for o in outs} == {"loaded"}, [o.reason for o in outs if o.status != "loaded"]
    return loader


def test_copied_rows_make_the_graph_the_upsert_makes(db, other_graph, monkeypatch):
    # Shared entities and statements across conversations, several batches, then a forced
    # reload of some and edited versions of others (retracted, then written again).
    raw = generate(600, 6, seed=5)
    convs = [Conversation.model_validate(c) for c in raw]
    rng = random.Random(2)
    chosen = sorted(rng.sample(range(len(raw)), 12))
    edited = [Conversation.model_validate(edit(raw[i], i)) for i in chosen]
    copies: list[str] = []
    real_copy = Database.copy

    def counted(self, table, columns, rows):
        copies.append(table.as_string(self.conn))
        return real_copy(self, table, columns, rows)

    monkeypatch.setattr(Database, "copy", counted)
    upserted = other_graph("upserted")
    for target, copy_new in ((db, True), (upserted, False)):
        loaders = [
            _load(target, convs, copy_new=copy_new),
            _load(target, convs[:40], copy_new=copy_new, force=True),
            _load(target, edited, copy_new=copy_new),
        ]
        assert sum(x.copy_conflicts for x in loaders) == 0
        if copy_new:
            assert db.copies is _server(db)
            # Every label's new rows went by COPY on a server, and nothing did on the engine.
            assert bool(copies) is _server(db)
            if copies:
                assert {t.split(".")[1].strip('"') for t in copies} >= {"Message", "Statement", "EVIDENCED_BY"}
            n = len(copies)
    assert len(copies) == n  # the upsert-only loads copied nothing
    assert digest(db) == digest(upserted)


def test_a_key_a_racing_writer_commits_first_sends_the_batch_to_the_upsert(db, dsn, other_graph, monkeypatch):
    mine = likes("c1", "tea", "2024-01-01T10:00:00Z")
    statement = next(v for v in plan(mine, result_of(mine, ONTO), ONTO).vertices if v.label == "Statement")
    raced: list[BaseException | None] = []

    def race() -> None:
        # Another writer commits the statement this load is about to copy, between the
        # load's look-up of the keys that exist and its COPY.
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("LOAD 'age'")
                conn.execute(
                    sql.SQL("INSERT INTO {}.{} (properties) VALUES (%s::ag_catalog.agtype)").format(
                        sql.Identifier(db.graph), sql.Identifier("Statement")
                    ),
                    (dumps(statement.props),),
                )
            raced.append(None)
        except psycopg.Error as exc:
            raced.append(exc)

    racer: list[threading.Thread] = []

    def start_race(db: Database) -> None:
        if not racer:
            racer.append(threading.Thread(target=race))
            racer[0].start()
            # On a server the other writer commits at once; the embedded engine serves one
            # session, so there it waits for this transaction and loses to it instead.
            if db.copies:
                racer[0].join(30)

    # The copy path looks the keys up and then copies; the upsert (the engine's path) inserts.
    real_ids_of, real_upsert = BulkWriter._ids_of_labels, BulkWriter._upsert_vertices

    def ids_of(self, keys):
        found = real_ids_of(self, keys)
        if "Statement" in keys:
            start_race(self.db)
        return found

    def upsert(self, label, rows, keys, keep=()):
        if label == "Statement":
            start_race(self.db)
        return real_upsert(self, label, rows, keys, keep)

    monkeypatch.setattr(BulkWriter, "_ids_of_labels", ids_of)
    monkeypatch.setattr(BulkWriter, "_upsert_vertices", upsert)
    loader = Loader(db, ONTO)
    loader.first_load = False  # the ordinary path's look-up then copy (a first load's race: test_first_load)
    assert loader.load(mine).status == "loaded"
    racer[0].join(30)
    if db.copies:
        assert raced == [None]  # the other writer's row was there first
        assert loader.copy_conflicts == 1
    else:
        assert isinstance(raced[0], psycopg.errors.UniqueViolation)  # this load's row was
        assert loader.copy_conflicts == 0
    clean = other_graph("clean")
    Loader(clean, ONTO).load(mine)
    assert digest(db) == digest(clean)


HOSTILE = [
    "back\\slash",
    "tab\there",
    "new\nline",
    "carriage\rreturn",
    "\\N",
    "\\.",
    "quote \" and ' both",
    "Zoë 東京 🚲",
]


def test_text_copy_takes_as_it_is_written_the_same_as_the_upsert(db, other_graph):
    # COPY's text format gives backslash, tab, newline and carriage return meanings of their
    # own (and \N is NULL, \. the end): each must arrive as the person wrote it.
    text = " | ".join(HOSTILE)
    conv = likes("hostile", HOSTILE[0], "2024-03-01T10:00:00Z", title="\\N\t\\.", text=text)
    upserted = other_graph("upserted")
    for target, copy_new in ((db, True), (upserted, False)):
        _load(target, [conv], copy_new=copy_new)
    (got,) = db.cypher_raw("MATCH (m:Message) RETURN m.text", columns=("t",))[0]
    assert json.loads(got) == text
    assert digest(db) == digest(upserted)


def test_copy_value_escapes_what_copy_text_format_reads_specially():
    assert copy_value("plain Zoë") == "plain Zoë"
    assert copy_value("a\\b\tc\nd\re") == "a\\\\b\\tc\\nd\\re"
