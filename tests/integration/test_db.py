"""The connection layer against the real engine."""

from __future__ import annotations

import hashlib
import threading

import psycopg
import pytest

from agefacts.agtype import Edge, Path, Vertex
from agefacts.db import Database
from agefacts.errors import DatabaseError, QueryError
from agefacts.graphadmin import STATISTICS_TARGET

from ..helpers import at_once


def test_creating_a_graph_twice_is_not_an_error(dsn, graph_name, db):
    again = Database(dsn, graph_name).connect()
    again.ensure_graph()
    assert again.graph_exists()
    again.close()
    rows = db.execute("SELECT count(*) FROM ag_catalog.ag_graph WHERE name = %s", (graph_name,))
    assert rows == [(1,)]


def test_labels_are_created_once_and_kinds_are_checked(db):
    db.ensure_labels(vertex=["Person", "Statement"], edge=["SUBJECT_OF"])
    db.ensure_labels(vertex=["Person"], edge=["SUBJECT_OF"])
    assert db.labels() == {"Person": "v", "Statement": "v", "SUBJECT_OF": "e"}
    with pytest.raises(QueryError, match="vertex label"):
        Database(db.dsn, db.graph).connect().ensure_labels(edge=["Person"])


def test_a_label_that_holds_duplicate_keys_is_named_when_its_key_index_cannot_be_built(db):
    # AGE makes a label itself for a Cypher CREATE, without agefacts' key index: the one-call
    # set-up fails on the duplicates, and the label-by-label path names the label.
    db.cypher("CREATE (:Person {k: 'same'}), (:Person {k: 'same'})")
    with pytest.raises(DatabaseError, match="label 'Person' in graph .* already holds duplicate keys"):
        db.ensure_labels(vertex=["Place", "Person"], edge=["ABOUT"])
    assert db.execute("SELECT 1")  # the connection is usable, and the labels before it exist
    assert {"Place", "Person"} <= set(db.labels())


def test_clients_creating_the_same_labels_at_once_all_succeed(dsn, graph_name):
    Database(dsn, graph_name).connect().close()
    labels = [f"Kind{i}" for i in range(6)]

    def worker() -> None:
        conn = Database(dsn, graph_name).connect()
        conn.ensure_labels(vertex=labels, edge=["LINKS"])
        conn.close()

    errors = at_once(lambda i: worker(), 4)
    db = Database(dsn, graph_name).connect()
    try:
        assert not errors, errors
        assert db.labels() == {**dict.fromkeys(labels, "v"), "LINKS": "e"}
        indexed = db.execute(
            "SELECT count(*) FROM pg_indexes WHERE schemaname = %s AND indexdef LIKE 'CREATE UNIQUE INDEX%%' "
            "AND indexdef LIKE '%%agtype_access_operator%%'",
            (graph_name,),
        )
        assert indexed == [(len(labels) + 1,)]
    finally:
        db.drop_graph()


@pytest.mark.parametrize("bad", ["person", "Per son", "P`x", "Person)-[r]-(", ""])
def test_labels_must_be_safe(db, bad):
    with pytest.raises(QueryError, match="label"):
        db.ensure_labels(vertex=[bad])


def test_parameters_carry_any_text_verbatim(db):
    nasty = "O'Brien said \"$$ $x$ \\\\ \n'); DROP TABLE x; --\u2028 é 😀"
    db.cypher("CREATE (:Person {k: $k, name: $name})", {"k": "p1", "name": nasty})
    rows = db.cypher("MATCH (p:Person) WHERE p.name = $name RETURN p.name, p", {"name": nasty}, columns=("a", "b")).rows
    assert rows[0][0] == nasty
    assert isinstance(rows[0][1], Vertex) and rows[0][1].properties["name"] == nasty


def test_vertices_edges_and_paths_decode(db):
    db.cypher("CREATE (:Person {k: 'a'})-[:KNOWS {since: 2020}]->(:Person {k: 'b'})")
    ((p, e),) = db.cypher("MATCH p = (:Person)-[e:KNOWS]->() RETURN p, e", columns=("p", "e")).rows
    assert isinstance(p, Path) and [type(x) for x in p.elements] == [Vertex, Edge, Vertex]
    assert isinstance(e, Edge) and e.properties == {"since": 2020}
    assert e.start_id == p.elements[0].id and e.end_id == p.elements[2].id


def test_database_errors_keep_their_sqlstate(db):
    with pytest.raises(DatabaseError) as info:
        db.cypher("MATCH (n RETURN n")
    assert info.value.sqlstate == "42601"


def test_one_backend_session_is_shared_by_every_client(dsn, db):
    """The embedded engine serves all clients from one session: a SET made on one connection
    is seen by another. This is why agefacts never relies on session state between calls
    (and why it connects with prepare_threshold=None). Fails on the day the engine gives each
    client its own session; native PostgreSQL does, and AGEFACTS_TEST_DSN runs skip nothing."""
    other = Database(dsn, db.graph).connect()
    db.execute("SET application_name = 'agefacts-shared-session-probe'")
    shown = other.execute("SHOW application_name")[0][0]
    other.close()
    if "pglite" in db.execute("SELECT version()")[0][0].lower():
        assert shown == "agefacts-shared-session-probe"
    else:
        assert shown != "agefacts-shared-session-probe"


def test_an_id_above_2_to_the_31_comes_back_from_text_only_by_agtype(db):
    """The message search carries ids as text beside their keys. The embedded engine reads a
    graphid's own text into a 32-bit integer (WebAssembly's long), so it refuses every id
    above 2^31, and ids of a label past the first are all above it; by agtype they come
    back whole, on either engine. Fails on the day the engine reads them as a server does."""
    big = "1688849860264036"
    assert db.execute("SELECT (%s::text)::ag_catalog.agtype::ag_catalog.graphid::text", (big,))[0][0] == big
    if "pglite" in db.execute("SELECT version()")[0][0].lower():
        with pytest.raises(DatabaseError, match="invalid value for type graphid"):
            db.execute("SELECT (%s::text)::ag_catalog.graphid", (big,))
    else:
        assert db.execute("SELECT (%s::text)::ag_catalog.graphid::text", (big,))[0][0] == big


def test_two_connections_work_concurrently(dsn, graph_name, db):
    errors: list[BaseException] = []

    def worker(prefix: str) -> None:
        try:
            conn = Database(dsn, graph_name).connect()
            for i in range(25):
                with conn.transaction():
                    conn.cypher("MERGE (:Person {k: $k})", {"k": f"{prefix}{i}"})
                    conn.cypher("MATCH (p:Person {k: $k}) SET p.n = $n", {"k": f"{prefix}{i}", "n": i})
            conn.close()
        except BaseException as exc:  # reported below, with the thread's name
            errors.append(exc)

    db.ensure_labels(vertex=["Person"])
    threads = [threading.Thread(target=worker, args=(p,)) for p in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    rows = db.cypher("MATCH (p:Person) RETURN p.k, p.n", columns=("k", "n")).rows
    assert sorted(rows) == sorted([(f"{p}{i}", i) for p in "ab" for i in range(25)])


def test_a_failed_transaction_leaves_nothing(db):
    db.ensure_labels(vertex=["Person"])
    with pytest.raises(DatabaseError):
        with db.transaction():
            db.cypher("CREATE (:Person {k: 'x'})")
            db.execute("SELECT 1/0")
    assert db.cypher("MATCH (p:Person) RETURN count(p)").rows == [(0,)]


def test_first_connections_at_once_set_up_once_and_all_succeed(dsn, graph_name):
    """Clients starting together on a database whose set-up is out of date (and a graph that
    does not exist yet) all connect: set-up and graph creation happen once, under a lock."""
    probe = Database(dsn, graph_name + "_probe").connect()
    try:
        probe.execute("DELETE FROM agefacts.schema_version")
    finally:
        probe.drop_graph()  # a server keeps what a test leaves
        probe.close()
    errors = at_once(lambda i: Database(dsn, graph_name).connect().close(), 6)
    assert not errors, errors
    db = Database(dsn, graph_name).connect()
    try:
        assert db.execute("SELECT count(*) FROM agefacts.schema_version")[0][0] == 1
        assert db.execute("SELECT count(*) FROM ag_catalog.ag_graph WHERE name = %s", (graph_name,))[0][0] == 1
    finally:
        db.drop_graph()


def test_a_connection_at_the_current_set_up_runs_no_ddl(dsn, graph_name):
    db = Database(dsn, graph_name).connect()
    try:
        seen: list[str] = []
        real = db._run

        def spy(stmt, args=None, names=None):
            seen.append(str(stmt))
            return real(stmt, args, names)

        db._run = spy  # type: ignore[method-assign]
        db.connect()
        ddl = [s for s in seen if any(w in s.upper() for w in ("CREATE ", "ALTER ", "DROP "))]
        assert ddl == [] and seen, seen
    finally:
        db.drop_graph()


def test_an_age_older_than_the_tested_range_is_refused_naming_its_version(dsn, graph_name, monkeypatch):
    from agefacts import graphadmin

    assert graphadmin.age_version_supported("1.6.0") and graphadmin.age_version_supported("1.7.0-rc0")
    assert not graphadmin.age_version_supported("1.5.0") and not graphadmin.age_version_supported("0.9")
    real = Database._run

    def old_age(self, stmt, args=None, names=None):
        if "extversion" in str(stmt):
            return [("1.5.0",)]
        return real(self, stmt, args, names)

    monkeypatch.setattr(Database, "_run", old_age)
    with pytest.raises(DatabaseError) as info:
        Database(dsn, graph_name).connect()
    assert "AGE 1.5.0" in str(info.value) and "1.6.0 or newer" in str(info.value)
    monkeypatch.undo()
    (version,) = (
        Database(dsn, graph_name).connect().execute("SELECT extversion FROM pg_extension WHERE extname = 'age'")[0]
    )
    assert graphadmin.age_version_supported(version)
    Database(dsn, graph_name).connect().drop_graph()


def test_dropping_a_graph_drops_its_ingest_log_and_questions(db):
    from importlib import resources

    from agefacts.load import load_paths
    from agefacts.ontology import default_ontology

    examples = [str(resources.files("agefacts.examples"))]
    assert load_paths(db, examples, default_ontology()).count("loaded") == 25

    def kept() -> tuple[int, int]:
        (log,) = db.execute("SELECT count(*) FROM agefacts.ingest_log WHERE graph = %s", (db.graph,))
        (questions,) = db.execute("SELECT count(*) FROM agefacts.questions WHERE graph = %s", (db.graph,))
        return log[0], questions[0]

    assert kept()[0] == 25 and kept()[1] > 0
    db.drop_graph()
    assert kept() == (0, 0) and not db.graph_exists()
    db.ensure_graph()
    # A graph made again under the name loads what it is given, rather than skipping it.
    assert load_paths(db, examples, default_ontology()).count("loaded") == 25


def test_every_label_gets_its_own_key_index_whatever_its_name(db):
    # Types that once met index or sequence names: a shared long prefix, a name ending in _k.
    long_a, long_b = "A" * 39 + "a", "A" * 39 + "b"
    labels = ["Person", "Person_k", long_a, long_b, "K_k"]
    db.ensure_labels(vertex=labels)
    rows = db.execute(
        "SELECT tablename, count(*) FROM pg_indexes WHERE schemaname = %s AND tablename = ANY(%s) "
        "AND indexdef LIKE 'CREATE UNIQUE INDEX%%' AND indexdef LIKE '%%agtype_access_operator%%' GROUP BY tablename",
        (db.graph, labels),
    )
    assert dict(rows) == dict.fromkeys(labels, 1)  # one unique key index each
    db.cypher(f"CREATE (:{long_a} {{k: 'x'}}), (:{long_b} {{k: 'x'}})")
    with pytest.raises(DatabaseError):
        db.cypher(f"CREATE (:{long_b} {{k: 'x'}})")


def _walk_indexed(db: Database, table: str) -> set[str]:
    """The columns of a label table that some index leads with."""
    rows = db.execute(
        "SELECT a.attname FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] "
        "WHERE n.nspname = %s AND c.relname = %s",
        (db.graph, table),
    )
    return {name for (name,) in rows}


def test_every_label_can_be_walked_through_an_index_whatever_the_age_version(db):
    """Vertex ids and edge ends are indexed: AGE 1.7.0 makes those indexes itself, AGE 1.6.0
    made none, and every walk from an entity to its statements scanned whole labels. One
    dropped is made again the next time the label is set up."""
    db.ensure_labels(vertex=["Person", "Statement"], edge=["SUBJECT_OF"])
    for table, columns in (("Person", {"id"}), ("Statement", {"id"}), ("SUBJECT_OF", {"start_id", "end_id"})):
        assert columns <= _walk_indexed(db, table), table
    (dropped,) = db.execute(
        "SELECT i.indexrelid::regclass::text FROM pg_index i JOIN pg_attribute a "
        "ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] "
        "WHERE i.indrelid = %s::regclass AND a.attname = 'start_id'",
        (f'"{db.graph}"."SUBJECT_OF"',),
    )[0]
    db.execute(f"DROP INDEX {dropped}")
    assert "start_id" not in _walk_indexed(db, "SUBJECT_OF")
    fresh = Database(db.dsn, db.graph).connect()
    try:
        fresh.ensure_labels(edge=["SUBJECT_OF"])
    finally:
        fresh.close()
    assert {"start_id", "end_id"} <= _walk_indexed(db, "SUBJECT_OF")


def test_a_load_leaves_the_planner_statistics_on_every_engine(db):
    """A load analyzes the tables it changed past autovacuum's own threshold. The embedded
    engine runs no autovacuum launcher (pinned here), so nothing else ever would; on a server
    autovacuum would, but up to a minute later, and a query right after a load was planned
    without statistics: facts at 20k statements on PostgreSQL 16 + AGE 1.6.0 took 165 ms at the
    median right after the load, 9.5 ms once the tables were analyzed."""
    from agefacts.corpus import generate
    from agefacts.load import Loader
    from agefacts.models import Conversation

    from ..helpers import ONTO

    (launchers,) = db.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum launcher'")[0]
    if "pglite" in db.execute("SELECT version()")[0][0].lower():
        assert launchers == 0
    # More rows than autovacuum's threshold (50 and a tenth of the table) in every main table.
    convs = [Conversation.model_validate(c) for c in generate(600)]
    assert all(o.status == "loaded" for o in Loader(db, ONTO).load_many((c.id, c) for c in convs))
    analyzed = db.execute(
        "SELECT relname FROM pg_stat_user_tables WHERE schemaname = %s AND last_analyze IS NOT NULL ORDER BY relname",
        (db.graph,),
    )
    assert {"EVIDENCED_BY", "Message", "Statement", "SUBJECT_OF"} <= {name for (name,) in analyzed}
    assert db.refresh_statistics() == []  # nothing changed since
    # What the planner reads is kept (the key, namespace and search indexes' expressions, the
    # walk columns); the whole properties column, whose statistics no query's plan reads, is
    # not sampled: it was two thirds of ANALYZE's time.
    stats = db.execute("SELECT s.tablename, s.attname FROM pg_stats s WHERE s.schemaname = %s", (db.graph,))
    columns = {(t, a) for t, a in stats}
    assert not {t for t, a in columns if a == "properties"}
    assert {("Statement", "id"), ("SUBJECT_OF", "start_id")} <= columns
    assert ("k_" + hashlib.md5(b"Statement").hexdigest(), "agtype_access_operator") in columns
    # Sampled at a third of the default target: as fast a facts, ask and history at 100,000 and
    # 1,000,000 statements, for a third of ANALYZE's cost (docs/performance.md).
    (bounds,) = db.execute(
        "SELECT cardinality(histogram_bounds::text::text[]) FROM pg_stats WHERE schemaname = %s AND tablename = %s",
        (db.graph, "k_" + hashlib.md5(b"Statement").hexdigest()),
    )[0]
    count = psycopg.sql.SQL("SELECT count(*) FROM {}.{}")
    (statements,) = db.execute(count.format(psycopg.sql.Identifier(db.graph), psycopg.sql.Identifier("Statement")))[0]
    assert statements > 100 and bounds == STATISTICS_TARGET + 1


def _cut(conn) -> None:
    """End a connection's session from underneath it: its socket shut down both ways, so the
    server sees the client go and the client's next send fails."""
    import os
    import socket

    sock = socket.socket(fileno=os.dup(conn.fileno()))
    try:
        sock.shutdown(socket.SHUT_RDWR)
    finally:
        sock.close()


def test_a_connection_closed_while_idle_is_opened_again_for_the_next_statement(db):
    """A server ends idle sessions (a restart, an idle timeout; AGE 1.6.0 when it fails to
    flush its label cache, which ended a test's idle connections): the next statement runs on
    a new connection, since nothing of it had run. A connection lost inside a transaction is
    not retried (its work may be half done): that is the loader's to retry, whole."""
    from agefacts.errors import DatabaseError

    db.ensure_labels(vertex=["Person"])
    db.cypher("CREATE (:Person {k: 'p1', name: 'Ada'})")
    before = db.conn
    _cut(before)
    assert db.cypher("MATCH (p:Person) WHERE p.k = 'p1' RETURN p.name").rows == [("Ada",)]
    assert before.closed and db.conn is not before  # the fault happened, and was got over
    # A load (its own transactions, labels and ledger) and dropping a graph, likewise.
    from agefacts.load import load_paths

    from ..helpers import EXAMPLES, ONTO

    _cut(db.conn)
    assert load_paths(db, [EXAMPLES / "nina-01.json"], ONTO).count("loaded") == 1
    other = Database(db.dsn, db.graph + "_x").connect()
    _cut(other.conn)
    other.drop_graph()
    assert not other.graph_exists()
    other.close()
    inside = db.conn
    with pytest.raises(DatabaseError), db.transaction():
        db.execute("SELECT 1")
        _cut(inside)
        db.execute("SELECT 2")
    assert db.execute("SELECT 3") == [(3,)]


def test_an_async_connection_closed_while_idle_is_opened_again(dsn, db):
    import asyncio

    from agefacts.asyncdb import AsyncDatabase

    db.ensure_labels(vertex=["Person"])
    db.cypher("CREATE (:Person {k: 'p1', name: 'Ada'})")

    async def run() -> None:
        async with AsyncDatabase(dsn, db.graph) as adb:
            query = "MATCH (p:Person) WHERE p.k = 'p1' RETURN p.name"
            assert (await adb.cypher(query)).rows == [("Ada",)]
            before = adb._conn
            _cut(before)
            # Tasks that find it closed together open one new connection between them.
            answers = await asyncio.gather(*(adb.cypher(query) for _ in range(3)))
            assert [a.rows for a in answers] == [[("Ada",)]] * 3
            assert before.closed and adb._conn is not before

    asyncio.run(run())


def test_named_queries_run_prepared_and_a_closed_client_leaves_none_behind(dsn, graph_name):
    """Named queries run as prepared statements (AGE's Cypher-to-SQL and the planning were
    most of their time), named per client: the embedded engine serves every client from one
    session, so a client's statements must neither meet another's nor outlive it there. A
    graph dropped and made again under them is read again, not through a stale plan."""
    from agefacts.inputs import read_conversations
    from agefacts.load import Loader
    from agefacts.named import run_named
    from agefacts.reads import facts

    from ..helpers import EXAMPLES, ONTO

    convs = [c for _, c in read_conversations([EXAMPLES]) if c.namespace == "nina"]
    first = Database(dsn, graph_name).connect()
    other = Database(dsn, graph_name).connect()
    try:
        list(Loader(first, ONTO).load_many((c.id, c) for c in convs))
        before = facts(first, "user", namespace="nina", valid_at="2024-10-01").dicts()
        assert [r["object"] for r in before] == ["Oslo"]
        assert facts(other, "user", namespace="nina", valid_at="2024-10-01").dicts() == before
        mine = first._prepared.prefix
        held = [n for (n,) in first.execute("SELECT name FROM pg_prepared_statements") if n.startswith(mine)]
        assert len(held) >= 2 and first._prepared.prefix != other._prepared.prefix
        # The graph dropped and loaded again: the same statements answer from the new graph.
        first.drop_graph()
        first.ensure_graph()
        list(Loader(first, ONTO).load_many((c.id, c) for c in convs[:1]))
        assert [r["object"] for r in facts(first, "user", namespace="nina", valid_at="2024-10-01").dicts()] == ["Lyon"]
        assert len(run_named(first, "entity_keys").rows) >= 1
    finally:
        first.close()
        left = [n for (n,) in other.execute("SELECT name FROM pg_prepared_statements") if n.startswith(mine)]
        other.drop_graph()
        other.close()
    assert left == []


def test_clients_that_set_up_a_new_database_at_once_all_connect(dsn, graph_name):
    """Four clients connecting at once to a database agefacts had never seen: three failed
    ("duplicate key value violates unique constraint pg_namespace_nspname_index"), as the one
    that waited for the set-up lock still could not see, by name, the schema the first had
    made, and made it again. Every one connects, and the schema is set up once."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    fresh = graph_name.replace("t_", "db_")
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {fresh}")
    try:
        there = make_conninfo(dsn, dbname=fresh)
        assert conninfo_to_dict(there)["dbname"] == fresh
        clients = [Database(there, f"{graph_name}_{i}") for i in range(4)]
        try:
            assert at_once(lambda i: clients[i].connect(), 4) == []
            assert clients[0]._run("SELECT count(*) FROM agefacts.schema_version")[0][0] == 1
            # The embedded engine serves its one database whatever a DSN names (one session for
            # every client: there, nothing is set up twice).
            served = clients[0]._run("SELECT current_database()")[0][0]
            assert served == ("postgres" if clients[0].shares_session else fresh)
        finally:
            for c in clients:
                c.close()
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {fresh} WITH (FORCE)")


def test_statistics_are_refreshed_by_a_role_that_may_analyze_but_not_alter(db, monkeypatch):
    """Setting the properties column's statistics target needs the table's owner; a role that
    may only analyze (MAINTAIN, PostgreSQL 17 on) still analyzes, the target left as it is.
    Before 17 no such role exists, and a role that may do neither leaves the data as it is."""
    import uuid

    from agefacts.corpus import generate
    from agefacts.load import Loader
    from agefacts.models import Conversation

    from ..helpers import ONTO

    monkeypatch.setattr(Database, "refresh_statistics", lambda self: [])
    convs = [Conversation.model_validate(c) for c in generate(200)]
    assert {o.status for o in Loader(db, ONTO).load_many((c.id, c) for c in convs)} == {"loaded"}
    monkeypatch.undo()
    # On a server the counts the load made are its backend's until it sends them.
    db.execute("SELECT pg_stat_force_next_flush()")
    db.execute("SELECT 1")
    role = "af_maint_" + uuid.uuid4().hex[:8]
    ident, schema = psycopg.sql.Identifier(role), psycopg.sql.Identifier(db.graph)
    (version,) = db.execute("SELECT current_setting('server_version_num')::int")[0]
    db.execute(psycopg.sql.SQL("CREATE ROLE {} LOGIN").format(ident))
    db.execute(psycopg.sql.SQL("GRANT USAGE ON SCHEMA {}, ag_catalog TO {}").format(schema, ident))
    db.execute(psycopg.sql.SQL("GRANT SELECT ON ag_catalog.ag_graph, ag_catalog.ag_label TO {}").format(ident))
    # What a role that reads the graph has (the refusal to connect names it).
    db.execute(psycopg.sql.SQL("GRANT USAGE ON SCHEMA agefacts TO {}").format(ident))
    for tables in ("agefacts", db.graph):
        db.execute(
            psycopg.sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(
                psycopg.sql.Identifier(tables), ident
            )
        )
    if version >= 170000:
        db.execute(psycopg.sql.SQL("GRANT MAINTAIN ON ALL TABLES IN SCHEMA {} TO {}").format(schema, ident))
    maint = Database(psycopg.conninfo.make_conninfo(db.dsn, user=role), db.graph, create=False).connect()
    try:
        analyzed = maint.refresh_statistics()
    finally:
        maint.close()
        db.execute(psycopg.sql.SQL("DROP OWNED BY {}").format(ident))
        db.execute(psycopg.sql.SQL("DROP ROLE {}").format(ident))
    targets = dict(
        db.execute(
            "SELECT c.relname, coalesce(a.attstattarget, -1) FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND a.attname = 'properties'",
            (db.graph,),
        )
    )
    if version >= 170000:
        assert {"Message", "Statement", "EVIDENCED_BY"} <= set(analyzed)
        stamped = db.execute(
            "SELECT relname FROM pg_stat_user_tables WHERE schemaname = %s AND last_analyze IS NOT NULL", (db.graph,)
        )
        assert {"Message", "Statement"} <= {name for (name,) in stamped}
        assert targets["Message"] == -1  # the owner's to set
    else:
        assert targets["Message"] == -1
    assert len(db.execute(f'SELECT 1 FROM "{db.graph}"."Message"')) > 0
