"""A graph an earlier agefacts wrote: its keys had no namespace key space (``<kind>:<32 hex>``).
This agefacts reads none of them, so it refuses such a graph, saying to run `agefacts migrate`,
rather than answer "no entity" or write a second copy of everything; migrating loads the kept
conversations again in one transaction, and gives the graph a fresh load gives."""

from __future__ import annotations

import pytest

from agefacts.cli import main
from agefacts.db import Database
from agefacts.errors import UsageError
from agefacts.load import Loader, load_paths
from agefacts.reads import digest, facts

from ..helpers import EXAMPLES, ONTO


def _as_written_before(db: Database) -> None:
    """Every key of the graph in the earlier form: the kind, then the 32 hex digits alone."""
    for table in ("_ag_label_vertex", "_ag_label_edge"):
        db.execute(
            f"UPDATE \"{db.graph}\".{table} SET properties = ((properties::text)::jsonb || jsonb_build_object('k', "
            "split_part(properties->>'k'::text, ':', 1) || ':' || substr(split_part(properties->>'k'::text, ':', 2), 17))"
            ")::text::ag_catalog.agtype"
        )
    db.keys_checked = False


@pytest.fixture
def old(db, other_graph):
    """The examples loaded, then every key turned to the earlier form; and a clean graph the
    same files were loaded into."""
    paths = sorted(EXAMPLES.glob("*.json"))
    load_paths(db, paths, ONTO)
    clean = other_graph("clean")
    load_paths(clean, paths, ONTO)
    _as_written_before(db)
    assert db.keys_stale() and not clean.keys_stale()
    return db, clean


def test_a_graph_an_earlier_agefacts_wrote_is_refused_until_migrated_then_equals_a_fresh_load(old, capsys):
    db, clean = old
    before = digest(db)
    stale = "was written by an earlier agefacts.*agefacts migrate --graph"
    with pytest.raises(UsageError, match=stale):
        list(Loader(db, ONTO).load_many([("x", c) for c in []]))
    with pytest.raises(UsageError, match=stale):  # what it finds by name it answers; nothing found says why
        facts(db, "Nobody At All", namespace="ann")
    with pytest.raises(UsageError, match=stale):
        Loader(db, ONTO).forget("ann")
    assert main(["load", str(EXAMPLES / "ann-01.json"), "--force", "--dsn", db.dsn, "--graph", db.graph]) == 2
    assert "agefacts migrate" in capsys.readouterr().err
    assert digest(db) == before  # nothing was written to it meanwhile
    assert main(["migrate", "--dsn", db.dsn, "--graph", db.graph]) == 0
    out = capsys.readouterr()
    assert "migrated" in out.out and "emptied" in out.err
    fresh = Database(db.dsn, db.graph).connect()
    try:
        assert digest(fresh) == digest(clean)
        assert facts(fresh, "user", namespace="ann").rows == facts(clean, "user", namespace="ann").rows
        # Once is enough: run again, it says so and changes nothing.
        assert main(["migrate", "--dsn", db.dsn, "--graph", db.graph]) == 0
        assert "needed no migration" in capsys.readouterr().out
        assert digest(fresh) == digest(clean)
    finally:
        fresh.close()


def test_a_migration_killed_midway_leaves_the_graph_as_it_was(old, monkeypatch):
    from agefacts import migrate as migrating

    db, _ = old
    before = digest(db)
    loaded: list[str] = []

    class Killed(Loader):
        def load_many(self, items, stop=None):
            for out in super().load_many(items, stop):
                loaded.append(out.conversation)
                yield out
                raise KeyboardInterrupt  # killed after its first conversation loaded

    monkeypatch.setattr(migrating, "Loader", Killed)
    with pytest.raises(KeyboardInterrupt):
        migrating.migrate(db)
    assert len(loaded) == 1  # the kill came once one conversation was loaded again
    assert db.keys_stale() and digest(db) == before


def test_the_demo_migrates_a_graph_an_earlier_agefacts_wrote_and_runs(old, capsys):
    """The demo loads into the default graph, which an earlier agefacts may have filled: after
    an upgrade `make demo` stopped at the sentence saying to migrate."""
    db, clean = old
    assert main(["demo", "--dsn", db.dsn, "--graph", db.graph]) == 0
    said = capsys.readouterr()
    assert "migrating it first" in said.err and "Some facts" in said.out
    fresh = Database(db.dsn, db.graph).connect()
    try:
        assert not fresh.keys_stale() and digest(fresh) == digest(clean)
    finally:
        fresh.close()
