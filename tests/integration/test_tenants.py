"""Isolation the database enforces: a tenant role (`agefacts setup --tenant ROLE=NAMESPACE`)
reads and writes one namespace only, through cypher(), plain SQL, search and agefacts' own
tables, because row-level security on every label says so, not agefacts' code."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import uuid

import psycopg
import psycopg.sql
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agefacts.db import Database
from agefacts.errors import DatabaseError, NotFound, UsageError
from agefacts.graphadmin import age_version_at_least
from agefacts.load import Loader, load_paths
from agefacts.provision import setup
from agefacts.reads import facts
from agefacts.retrieve import ask

from ..helpers import EXAMPLES, LIVES, ONTO, conversation


@contextlib.contextmanager
def _as(db: Database, role: str):
    """This connection's transactions as ``role`` (``SET LOCAL ROLE`` in each)."""
    db.role = role
    try:
        yield
    finally:
        db.role = None


def _drop_tenant(db: Database, role: str) -> None:
    """The tenant role a test made, and all it owns, gone."""
    with contextlib.suppress(DatabaseError):
        db.execute("DELETE FROM agefacts.tenants WHERE role = %s", (role,))
    with contextlib.suppress(DatabaseError, psycopg.Error):
        db.execute(f'DROP OWNED BY "{role}"')
        db.execute(f'DROP ROLE "{role}"')


@pytest.fixture
def ann_tenant(db):
    """The examples loaded, and a tenant role kept to namespace 'ann' (None on an AGE too old
    for tenants: setup refuses them there, as the first test holds)."""
    load_paths(db, [EXAMPLES], ONTO)
    role = "tenant_" + uuid.uuid4().hex[:8]
    db.execute(f'CREATE ROLE "{role}" LOGIN')
    try:
        if not age_version_at_least(db.age_version, (1, 7, 0)):
            yield None
            return
        setup(db, ONTO, tenants=[(role, "ann")])
        yield role
    finally:
        _drop_tenant(db, role)


def test_a_tenant_reads_and_writes_only_its_namespace(db, dsn, graph_name, caplog):
    load_paths(db, [EXAMPLES], ONTO)
    role = "tenant_" + uuid.uuid4().hex[:8]
    db.execute(f'CREATE ROLE "{role}" LOGIN')
    try:
        if not age_version_at_least(db.age_version, (1, 7, 0)):
            with pytest.raises(UsageError, match="tenants need Apache AGE 1.7.0"):
                setup(db, ONTO, tenants=[(role, "ann")])
            return
        done, refused = setup(db, ONTO, tenants=[(role, "ann")])
        assert refused == [] and any("sees and writes namespace 'ann' only" in d for d in done)
        everyone = {
            r[0]
            for r in db.execute(
                f'SELECT DISTINCT ag_catalog.agtype_object_field_text(properties, \'namespace\') FROM "{graph_name}"."_ag_label_vertex"'
            )
        }
        assert {"ann", "nina", "jose"} <= everyone  # the owner still sees every namespace
        for ns in ("ann", "nina"):  # turns a memory appended, kept beside the ingest log
            db.execute(
                "INSERT INTO agefacts.ingest_turns (graph, namespace, conversation, ordinal, turn) VALUES (%s, %s, 'x', 9, '{}')",
                (graph_name, ns),
            )
        with _as(db, role):
            seen = db.cypher("MATCH (n) RETURN DISTINCT n.namespace", columns=("ns",)).rows
            assert {r[0] for r in seen} == {"ann"}
            edges = db.cypher("MATCH (a)-[e]->(b) RETURN DISTINCT a.namespace, b.namespace", columns=("a", "b")).rows
            assert edges and set(edges) == {("ann", "ann")}
            sql_rows = db.execute(
                f'SELECT DISTINCT ag_catalog.agtype_object_field_text(properties, \'namespace\') FROM "{graph_name}"."Statement"'
            )
            assert sql_rows == [("ann",)]
            assert {
                r[0] for r in db.execute("SELECT namespace FROM agefacts.ingest_log WHERE graph = %s", (graph_name,))
            } == {"ann"}
            assert db.execute("SELECT namespace FROM agefacts.ingest_turns WHERE graph = %s", (graph_name,)) == [
                ("ann",)
            ]
            found = db.execute(
                "SELECT namespace FROM agefacts.search_messages(%s, NULL, 'Oslo moved Acme', 20)", (graph_name,)
            )
            assert found and {r[0] for r in found} == {"ann"}
            assert {r["namespace"] for r in facts(db, "user", all_namespaces=True).dicts()} == {"ann"}
            assert db.execute("SELECT role, namespace FROM agefacts.tenants") == [(role, "ann")]
            # Writing another's namespace, or deleting theirs, is refused by the database.
            with pytest.raises(DatabaseError, match="row-level security"):
                db.cypher("CREATE (:Person {namespace: 'nina', k: 'ent:planted', name: 'Eve'})")
            with pytest.raises(DatabaseError, match="row-level security"):
                db.cypher("MATCH (p:Person) SET p.namespace = 'nina'")  # moving its rows to another
            # Deleting another's: nothing to delete (it cannot see them), or AGE 1.7.0's error for
            # a policy with a subquery on an edge label ("unrecognized node type"); never deleted.
            with contextlib.suppress(DatabaseError):
                db.cypher("MATCH (p:Person) WHERE p.namespace = 'nina' DETACH DELETE p")
            # It loads and forgets its own namespace's conversations (by the bulk path, the
            # default: the Cypher path's MERGE writes a vertex before its namespace, and is refused).
            said = {"speaker": "user", "text": "I live in Porto.", "at": "2026-11-20T10:00:00Z", "recorded": LIVES}
            caplog.set_level("INFO", logger="agefacts.load")
            assert Loader(db, ONTO).load(conversation("ann-9", [said], namespace="ann")).status == "loaded"
            # PostgreSQL refuses COPY FROM under row-level security: on a server its rows went
            # by the upsert (the embedded engine is never sent COPY).
            assert ("rows cannot be copied here" in caplog.text) is db.copies
            other = Loader(db, ONTO).load(conversation("nina-9", [said], namespace="nina"))
            assert other.status == "failed" and "row-level security" in (other.reason or "")
            assert Loader(db, ONTO).forget("ann", ["ann-9"]) == ["ann-9"]
        assert db.cypher("MATCH (p:Person) WHERE p.k = 'ent:planted' RETURN p").rows == []
        assert db.cypher("MATCH (p:Person) WHERE p.namespace = 'nina' RETURN count(p)", columns=("n",)).rows[0][0] > 0
        assert {r["namespace"] for r in facts(db, "user", all_namespaces=True).dicts()} >= {"ann", "nina"}
    finally:
        _drop_tenant(db, role)


def test_a_tenant_cannot_change_what_configures_every_graph_nor_read_another_graphs_logs(db, other_graph, graph_name):
    """setup --tenant granted writes on every agefacts table: a tenant deleted its own tenant
    row and then read everything, wrote agefacts.moves (blocking or hiding another namespace),
    changed the ontology everyone is answered by and the schema version; and it read the
    ingest log, turns and vectors of every other graph (the policy was by namespace only)."""
    if not age_version_at_least(db.age_version, (1, 7, 0)):
        return  # setup refuses tenants there (the test above holds it)
    load_paths(db, [EXAMPLES / "ann-01.json"], ONTO)
    elsewhere = other_graph("elsewhere")
    load_paths(elsewhere, [EXAMPLES / "nina-01.json", EXAMPLES / "ann-02.json"], ONTO)
    role = "tenant_" + uuid.uuid4().hex[:8]
    db.execute(f'CREATE ROLE "{role}" LOGIN')
    try:
        setup(db, ONTO, tenants=[(role, "ann")])
        with _as(db, role):
            for statement in (
                "DELETE FROM agefacts.tenants",
                f"UPDATE agefacts.tenants SET namespace = 'nina' WHERE role = '{role}'",
                f"INSERT INTO agefacts.moves (graph, namespace, server, state) VALUES ('{graph_name}', 'nina', 'x', 'moving')",
                "UPDATE agefacts.graph_ontology SET digest = 'x'",
                "UPDATE agefacts.schema_version SET version = 'x'",
            ):
                with pytest.raises(DatabaseError, match="permission denied"):
                    db.execute(statement)
            # Another graph's log, even of its own namespace's name, is not its to read.
            for table in ("ingest_log", "questions"):
                rows = db.execute(f"SELECT count(*) FROM agefacts.{table} WHERE graph = %s", (elsewhere.graph,))
                assert rows == [(0,)], table
            assert db.execute("SELECT role, namespace FROM agefacts.tenants") == [(role, "ann")]
        # Still a tenant, still kept to its namespace.
        assert db.execute("SELECT namespace FROM agefacts.tenants WHERE role = %s", (role,)) == [("ann",)]
        assert db.execute("SELECT count(*) FROM agefacts.moves WHERE namespace = 'nina'") == [(0,)]
    finally:
        _drop_tenant(db, role)


@pytest.mark.parametrize("change", ["SET ROLE {role}", "SET search_path = public", "RESET search_path"])
def test_another_clients_session_settings_change_no_answer(db, dsn, graph_name, change):
    """The embedded engine serves every client from one session, so what a client sets for its
    session (a role, a search path) outlives it and would hold for the next client's
    statements: each of agefacts' transactions sets what it depends on for itself."""
    from agefacts.asyncdb import AsyncDatabase
    from agefacts.reads import facts_async

    load_paths(db, [EXAMPLES], ONTO)
    before = facts(db, "user", namespace="ann").rows
    role = "nobody_" + uuid.uuid4().hex[:8]
    db.execute(f'CREATE ROLE "{role}"')
    reader = AsyncDatabase(dsn, graph_name)

    async def read():
        async with reader:
            return (await facts_async(reader, "user", namespace="ann")).rows

    try:
        with psycopg.connect(dsn, autocommit=True) as other:
            other.execute(change.format(role=f'"{role}"'))
            seen = other.execute("SELECT pg_backend_pid(), current_user, current_setting('search_path')").fetchone()
        # Pinned: on the embedded engine the next client is served by that same session.
        with psycopg.connect(dsn, autocommit=True) as third:
            after = third.execute("SELECT pg_backend_pid(), current_user, current_setting('search_path')").fetchone()
        assert (after == seen) == db.shares_session
        try:
            assert facts(db, "user", namespace="ann").rows == before
            assert db.execute("SELECT current_user") != [(role,)]
            Loader(db, ONTO).load(
                conversation(
                    "after-change",
                    [{"speaker": "user", "text": "I live in Porto", "at": "2026-01-05T10:00:00Z", "recorded": LIVES}],
                    namespace="ann",
                )
            )
            import asyncio

            assert asyncio.run(read()) == facts(db, "user", namespace="ann").rows
        finally:
            with psycopg.connect(dsn, autocommit=True) as other:
                other.execute('RESET ROLE; SET search_path = ag_catalog, "$user", public')
    finally:
        db.execute(f'DROP ROLE "{role}"')


def test_a_connection_acts_as_the_user_it_names(db, dsn, graph_name, ann_tenant):
    """A tenant connects as itself and reads its namespace only, on the embedded engine too,
    whose one session is a superuser's whatever user connects; a user that is no role there
    is refused, not served as the superuser."""
    from psycopg.conninfo import make_conninfo

    role = ann_tenant
    if role is None:
        return  # setup refuses tenants there (the first test holds it)
    tenant = Database(make_conninfo(dsn, user=role), graph_name, create=False).connect()
    try:
        assert tenant.execute("SELECT current_user") == [(role,)]
        assert facts(tenant, "user", namespace="ann").rows == facts(db, "user", namespace="ann").rows
        with pytest.raises(NotFound, match="no entity 'user' in namespace 'nina'"):
            facts(tenant, "user", namespace="nina")
    finally:
        tenant.close()
    assert db.execute("SELECT current_user") != [(role,)]
    with pytest.raises(DatabaseError, match="does not exist"):
        Database(make_conninfo(dsn, user="nobody_" + uuid.uuid4().hex[:8]), graph_name).connect()


@pytest.mark.parametrize("via", ["bulk", "cypher"])
def test_a_row_of_another_namespace_is_never_merged_into(db, other_graph, via):
    """Keys are computable: whoever may write one namespace can plant a vertex carrying the key
    of a statement another namespace will load, with an end of its choosing. The load that
    meets it refuses that conversation, naming the key, rather than merging the planted
    properties into the other person's fact; the planted row stays as it was written."""
    conv = conversation(
        "plant-1",
        [{"speaker": "user", "text": "I live in Porto", "at": "2026-01-05T10:00:00Z", "recorded": LIVES}],
        "ann",
    )
    scratch = other_graph("scratch")
    Loader(scratch, ONTO).load(conv)
    (key,) = [r[0] for r in scratch.cypher("MATCH (s:Statement) RETURN s.k", columns=["k"]).rows]
    db.ensure_labels(vertex=["Statement"], edge=[])
    db.cypher(
        "CREATE (:Statement {k: $k, namespace: 'mallory', predicate: 'lives_in', valid_until: '2000-01'})",
        {"k": key},
    )
    out = Loader(db, ONTO, via=via).load(conv)
    assert out.status == "failed" and key in out.reason and "'mallory'" in out.reason, out
    rows = db.cypher("MATCH (s:Statement) RETURN s.namespace, s.valid_until", columns=["ns", "until"]).rows
    assert rows == [("mallory", "2000-01")]
    assert db.cypher("MATCH (c:Conversation) RETURN c.id", columns=["id"]).rows == []  # nothing of it was written


@pytest.mark.parametrize("via", ["bulk", "cypher"])
def test_a_fact_version_of_another_namespace_is_left_alone(db, via):
    """A version planted by another namespace under someone's subject is neither taken over nor
    removed when that person's chain is read again; their own versions are written beside it."""
    from agefacts.keys import user_key

    db.ensure_labels(vertex=["Fact"], edge=[])
    planted = {"k": "fact:planted", "namespace": "mallory", "subject_key": user_key("ann"), "predicate": "lives_in"}
    db.cypher(
        "CREATE (:Fact {k: $k, namespace: $namespace, subject_key: $subject_key, predicate: $predicate})", planted
    )
    conv = conversation(
        "plant-2",
        [{"speaker": "user", "text": "I live in Porto", "at": "2026-01-05T10:00:00Z", "recorded": LIVES}],
        "ann",
    )
    assert Loader(db, ONTO, via=via).load(conv).status == "loaded"
    rows = db.cypher("MATCH (f:Fact) RETURN f.namespace, f.object_key IS NULL", columns=["ns", "bare"]).rows
    assert sorted(rows) == [("ann", False), ("mallory", True)]
    assert [r["object"] for r in facts(db, "user", namespace="ann").dicts()] == ["Porto"]


@settings(max_examples=int(os.environ.get("AGEFACTS_FUZZ_EXAMPLES", "12")), deadline=None)
@given(data=st.data())
def test_planting_any_key_of_another_namespace_changes_nothing_of_it(dsn, data):
    """The attacker's generator: a vertex planted under any key another namespace's conversation
    will write (its conversation, messages, entities, statements), by either load path, with
    drawn properties. The load refuses that conversation whole and names the key; the planted
    vertex is as written; once it is removed, the same load gives what a clean graph holds."""
    from agefacts.compile import plan
    from agefacts.consolidate import result_of
    from agefacts.reads import digest

    conv = conversation(
        "plant-3",
        [
            {"speaker": "user", "text": "I live in Porto", "at": "2026-01-05T10:00:00Z", "recorded": LIVES},
            {"speaker": "assistant", "text": "Noted.", "at": "2026-01-05T10:00:05Z"},
        ],
        "ann",
    )
    target = data.draw(st.sampled_from(plan(conv, result_of(conv, ONTO), ONTO).vertices), label="target")
    extra = data.draw(
        st.dictionaries(
            st.sampled_from(["valid_until", "valid_from", "name", "text", "predicate", "corrects", "at"]),
            st.one_of(
                st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=8),
                st.booleans(),
                st.integers(-(2**63), 2**63 - 1),
            ),
            max_size=3,
        ),
        label="extra",
    )
    via = data.draw(st.sampled_from(["bulk", "cypher"]), label="via")
    graph_name = "t_" + uuid.uuid4().hex[:12]
    clean = Database(dsn, graph_name + "_clean").connect()
    db = Database(dsn, graph_name).connect()
    try:
        Loader(clean, ONTO, via=via).load(conv)
        db.ensure_labels(vertex=[target.label], edge=[])
        planted = {**extra, "k": target.k, "namespace": "mallory"}
        db.execute(
            psycopg.sql.SQL("INSERT INTO {} (properties) VALUES (%s::ag_catalog.agtype)").format(
                psycopg.sql.Identifier(graph_name, target.label)
            ),
            (json.dumps(planted),),
        )
        out = Loader(db, ONTO, via=via).load(conv)
        assert out.status == "failed" and target.k in out.reason and "'mallory'" in out.reason, out
        there = db.cypher(f"MATCH (n:{target.label}) RETURN properties(n)", columns=["p"]).rows
        assert there == [(planted,)]
        db.cypher(f"MATCH (n:{target.label}) DELETE n")
        assert Loader(db, ONTO, via=via).load(conv).status == "loaded"
        assert digest(db) == digest(clean)
    finally:
        for d in (clean, db):
            d.drop_graph()
            d.close()


def test_a_tenant_loads_adds_asks_and_forgets_through_its_own_connection(db, dsn, graph_name, ann_tenant):
    """A tenant connects as itself (not the owner's connection switched to its role): every
    label of the ontology is prepared and protected by setup, and what configures the graph is
    read-only to it, so a load needs no right it lacks. Another namespace stays as it was."""
    from psycopg.conninfo import make_conninfo

    from agefacts.memory import Memory
    from agefacts.reads import digest

    role = ann_tenant
    if role is None:
        return  # setup refuses tenants there (the first test holds it)
    nina = digest(db, "nina")
    own = make_conninfo(dsn, user=role)
    tenant = Database(own, graph_name).connect()
    try:
        said = [{"speaker": "user", "text": "I live in Porto", "at": "2026-12-01T10:00:00Z", "recorded": LIVES}]
        assert Loader(tenant, ONTO).load(conversation("own-1", said, "ann")).status == "loaded"
    finally:
        tenant.close()
    with Memory(own, graph_name, ontology=ONTO) as memory:
        added = memory.add(
            [{"speaker": "user", "text": "We moved to Porto", "recorded": LIVES, "at": "2026-12-02T10:00:00Z"}],
            namespace="ann",
            conversation="own-2",
        )
        assert added.status == "loaded", added
        assert "Porto" in {f.object for f in memory.facts("user", namespace="ann")}
        assert memory.ask("Where do I live?", namespace="ann").facts
        assert sorted(memory.forget("ann", ["own-1", "own-2"])) == ["own-1", "own-2"]
        assert "Porto" not in {f.object for f in memory.facts("user", namespace="ann")}
    assert digest(db, "nina") == nina


# What the drawn attacks' check asks every other namespace (words their messages say).
_ASKED = "where do I live and work, my sister, my job"

_TABLES = [
    "ingest_log",
    "ingest_turns",
    "questions",
    "extractions",
    "schema_version",
    "graph_ontology",
    "tenants",
    "moves",
]
_LABELS = ["Conversation", "Message", "Person", "Place", "Organization", "Statement", "Fact", "EVIDENCE", "ABOUT"]


def _attacks(graph: str, stolen_keys: list[str]):
    """Statements a tenant of namespace 'ann' might run to read, change or probe the others:
    plain SQL on agefacts' tables and the graph's label tables, and Cypher, with drawn
    targets, namespaces and guessed keys (the keys of the others' vertices, which are
    computable)."""
    from agefacts.keys import key_space

    own = key_space("ann")  # a key of its own namespace's space, which it may write
    ns = st.sampled_from(["nina", "jose", "ann", "omar"])
    key = st.sampled_from(stolen_keys)
    table = st.sampled_from(_TABLES).map(lambda t: f"agefacts.{t}")
    label = st.sampled_from(_LABELS).map(lambda lab: f'"{graph}"."{lab}"')
    props = st.builds(
        lambda n, k, until: json.dumps({"k": k, "namespace": n, "valid_until": until}),
        ns,
        key,
        st.sampled_from(["2000-01", "2999"]),
    )
    vlabel = st.sampled_from(["Statement", "Person", "Message", "Fact"])
    # A message of its own that says another namespace's search word and the words asked of it.
    planted = st.builds(
        lambda n, i: (
            f"SELECT * FROM ag_catalog.cypher('{graph}', $$ CREATE (:Message {{k: 'msg:{own}planted{i}', "
            f"namespace: 'ann', conversation: 'planted', ordinal: {i}, speaker: 'user', "
            f"text: 'ns{hashlib.md5(n.encode()).hexdigest()} {_ASKED}'}}) $$) AS (v ag_catalog.agtype)"
        ),
        ns,
        st.integers(0, 3),
    )
    return st.one_of(
        planted,
        st.builds(lambda t: f"SELECT * FROM {t}", table),
        st.builds(lambda t: f"DELETE FROM {t}", table),
        st.builds(
            lambda t, n: f"UPDATE {t} SET namespace = '{n}'",
            st.sampled_from(
                ["agefacts.ingest_log", "agefacts.ingest_turns", "agefacts.questions", "agefacts.extractions"]
            ),
            ns,
        ),
        st.builds(lambda n: f"UPDATE agefacts.tenants SET namespace = '{n}'", ns),
        st.builds(
            lambda n: f"INSERT INTO agefacts.tenants (graph, role, namespace) VALUES ('{graph}', current_user, '{n}')",
            ns,
        ),
        st.builds(lambda n: f"INSERT INTO agefacts.moves (namespace, target) VALUES ('{n}', 'x')", ns),
        st.builds(lambda lab: f"SELECT id, properties FROM {lab}", label),
        st.builds(lambda lab: f"DELETE FROM {lab}", label),
        st.builds(lambda lab, p: f"UPDATE {lab} SET properties = '{p}'::ag_catalog.agtype", label, props),
        st.builds(
            lambda lab, p: f"INSERT INTO {lab} (properties) VALUES ('{p}'::ag_catalog.agtype)",
            st.sampled_from(['"{g}"."Statement"', '"{g}"."Person"']).map(lambda s: s.format(g=graph)),
            props,
        ),
        st.builds(
            lambda n: (
                f"SELECT * FROM ag_catalog.cypher('{graph}', $$ MATCH (v {{namespace: '{n}'}}) RETURN v $$) AS (v ag_catalog.agtype)"
            ),
            ns,
        ),
        st.just(
            f"SELECT * FROM ag_catalog.cypher('{graph}', $$ MATCH (a)-[e]->(b) RETURN a, e, b $$) AS (a ag_catalog.agtype, e ag_catalog.agtype, b ag_catalog.agtype)"
        ),
        st.builds(
            lambda n: (
                f"SELECT * FROM ag_catalog.cypher('{graph}', $$ MATCH (v) SET v.namespace = '{n}' RETURN v $$) AS (v ag_catalog.agtype)"
            ),
            ns,
        ),
        st.builds(
            lambda n: (
                f"SELECT * FROM ag_catalog.cypher('{graph}', $$ MATCH (v {{namespace: '{n}'}}) DETACH DELETE v $$) AS (v ag_catalog.agtype)"
            ),
            ns,
        ),
        st.builds(
            lambda lab, k, n: (
                f"SELECT * FROM ag_catalog.cypher('{graph}', $$ CREATE (:{lab} {{k: '{k}', namespace: '{n}', valid_until: '2000-01'}}) $$) AS (v ag_catalog.agtype)"
            ),
            vlabel,
            key,
            ns,
        ),
        st.builds(
            lambda k: (
                f"SELECT * FROM ag_catalog.cypher('{graph}', $$ MATCH (v {{k: '{k}'}}) SET v.valid_until = '2000-01' RETURN v $$) AS (v ag_catalog.agtype)"
            ),
            key,
        ),
        st.builds(lambda lab: f"TRUNCATE {lab}", label),
        st.builds(lambda lab: f"ALTER TABLE {lab} DISABLE ROW LEVEL SECURITY", label),
        st.builds(lambda lab: f"DROP POLICY agefacts_tenant ON {lab}", label),
        st.just("SELECT agefacts.protect_graph(current_schema())"),
    )


def test_a_tenant_running_drawn_attacks_changes_and_reads_nothing_of_another_namespace(db, dsn, graph_name, ann_tenant):
    """The attacker's generator for tenants: a tenant's own connection runs drawn SQL and Cypher
    against every agefacts table and label (reads, inserts, updates, deletes, policy changes,
    guessed keys). Afterwards each other namespace's digest and answers are what they were, and
    no row any statement returned held another namespace's words or keys."""
    from hypothesis import HealthCheck, Phase
    from psycopg.conninfo import make_conninfo

    from agefacts.reads import digest

    role = ann_tenant
    if role is None:
        return  # setup refuses tenants there (the first test holds it)
    others = ["nina", "jose", "omar"]

    def answers(ns: str) -> tuple:
        found = ask(db, _ASKED, ONTO, namespace=ns, k=10).messages
        return digest(db, ns), facts(db, "user", namespace=ns).rows, [(m["namespace"], m["text"]) for m in found]

    # What a model answered each of them, kept until written (as a process killed before its
    # write leaves it): a tenant neither reads nor changes it.
    from agefacts import ledger
    from agefacts.models import Turn

    for ns in others:
        said = Turn(speaker="user", text=f"what {ns} paid for and kept", at="2026-01-01T10:00:00Z", error="HTTP 500")
        ledger.keep_paid(db, ns, "killed", [said], "m")

    def kept() -> dict:
        return {ns: ledger.paid(db, ns, "killed") for ns in others}

    paid_before = kept()
    before = {ns: answers(ns) for ns in others}
    assert all(b[2] for b in before.values())  # each namespace finds something for the question
    # What is theirs and cannot be guessed: their vertices' ids (from sequences) and words.
    secrets = (
        {
            str(r[0])
            for r in db.execute(
                f'SELECT id::text FROM "{graph_name}"._ag_label_vertex '
                "WHERE ag_catalog.agtype_object_field_text(properties, 'namespace') <> 'ann'"
            )
        }
        | {
            str(r[0])
            for r in db.cypher(
                "MATCH (m:Message) WHERE m.namespace <> 'ann' AND size(m.text) > 12 RETURN m.text", columns=["t"]
            ).rows
        }
        | {f"what {ns} paid for and kept" for ns in others}
    )
    keys = {str(r[0]) for r in db.cypher("MATCH (v) WHERE v.namespace <> 'ann' RETURN v.k", columns=["k"]).rows}
    stolen = sorted(keys)[:40]
    tenant = psycopg.connect(make_conninfo(dsn, user=role), autocommit=True)
    ran: list[str] = []

    @settings(
        max_examples=int(os.environ.get("AGEFACTS_FUZZ_EXAMPLES", "40")),
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(st.lists(_attacks(graph_name, stolen), min_size=1, max_size=6))
    def attack(statements):
        for stmt in statements:
            try:
                with tenant.transaction():
                    if db.shares_session:
                        tenant.execute(f'SET LOCAL ROLE "{role}"')  # who it is on the embedded engine
                    tenant.execute('SET LOCAL search_path = ag_catalog, "$user", public')
                    cur = tenant.execute(stmt)
                    rows = cur.fetchall() if cur.description else []
            except psycopg.Error:
                continue
            ran.append(stmt)
            seen = " ".join(str(c) for r in rows for c in r)
            leaked = [s for s in secrets if s in seen]
            assert not leaked, (stmt, leaked[:3])

    try:
        attack()
    finally:
        tenant.close()
    assert ran, "no drawn statement ran at all"
    assert {ns: answers(ns) for ns in others} == before
    assert kept() == paid_before


@settings(max_examples=int(os.environ.get("AGEFACTS_FUZZ_EXAMPLES", "20")), deadline=None)
@given(data=st.data())
def test_a_key_tells_a_tenant_nothing_and_none_of_another_namespace_can_be_taken(dsn, data):
    """Keys are computable. A tenant writing a vertex or edge under a key of another namespace
    was refused by the unique index when that key was held ("lives_in Oslo": yes) and took it
    when not ("Tokyo": no), so a refusal told it what another person had said; and a key taken
    first blocked that person's later load of it. Drawn keys of another namespace, held or still
    to come, written by drawn means through the tenant's own connection: the answer never
    depends on whether the key is held, and the other namespace still loads what it says next."""
    from psycopg.conninfo import make_conninfo

    from agefacts.compile import plan
    from agefacts.consolidate import result_of

    said = {
        when: conversation(
            f"said-{when}",
            [{"speaker": "user", "text": f"I live in Porto, {when}", "at": at, "recorded": LIVES}],
            "nina",
        )
        for when, at in (("held", "2026-01-05T10:00:00Z"), ("later", "2026-02-05T10:00:00Z"))
    }
    plans = {when: plan(c, result_of(c, ONTO), ONTO) for when, c in said.items()}
    # Elements of one label each conversation writes, under keys the other does not share.
    pairs = [
        (a, b)
        for a, b in [
            *zip(plans["held"].vertices, plans["later"].vertices, strict=False),
            *zip(plans["held"].edges, plans["later"].edges, strict=False),
        ]
        if a.label == b.label and a.k != b.k
    ]
    held, later = data.draw(st.sampled_from(pairs), label="held, later")
    how = data.draw(st.sampled_from(["cypher", "sql", "set"]), label="how")
    extra = data.draw(st.sampled_from(["", ", valid_until: '2000-01'"]), label="extra")
    graph = "t_" + uuid.uuid4().hex[:12]
    role = "tenant_" + uuid.uuid4().hex[:8]
    db = Database(dsn, graph).connect()
    try:
        if not age_version_at_least(db.age_version, (1, 7, 0)):
            return  # setup refuses tenants there (test_a_tenant_reads_and_writes_only_its_namespace)
        Loader(db, ONTO).load(said["held"])
        Loader(db, ONTO).load(
            conversation("own", [{"speaker": "user", "text": "hi", "at": "2026-01-01T10:00:00Z"}], "ann")
        )
        db.execute(f'CREATE ROLE "{role}" LOGIN')
        setup(db, ONTO, tenants=[(role, "ann")])
        tenant = psycopg.connect(make_conninfo(dsn, user=role), autocommit=True)
        try:
            answers = {
                name: _try_key(tenant, db, graph, role, element, how, extra)
                for name, element in (("held", held), ("later", later))
            }
        finally:
            tenant.close()
        assert answers["held"] == answers["later"], answers
        assert Loader(db, ONTO).load(said["later"]).status == "loaded"
        lives = [r for r in facts(db, "user", namespace="nina").dicts() if r["predicate"] == "lives_in"]
        assert [r["object"] for r in lives] == ["Porto"], lives
        assert lives[0]["evidence"] == 2, lives  # what it said later is there too
    finally:
        _drop_tenant(db, role)
        db.drop_graph()
        db.close()


def _try_key(tenant, db: Database, graph: str, role: str, element, how: str, extra: str) -> str:
    """What the database answers a tenant writing ``element``'s key into its own namespace
    (``how``: a Cypher CREATE, a SQL INSERT, or a SET on a vertex of its own): "ok" or the
    error's SQLSTATE. Nothing of it is kept."""
    from agefacts.compile import Edge

    is_edge = isinstance(element, Edge)
    try:
        with tenant.transaction():
            if db.shares_session:
                tenant.execute(f'SET LOCAL ROLE "{role}"')
            tenant.execute('SET LOCAL search_path = ag_catalog, "$user", public')
            if how == "cypher" and not is_edge:
                tenant.execute(
                    f"SELECT * FROM cypher('{graph}', $$ CREATE (:{element.label} "
                    f"{{k: '{element.k}', namespace: 'ann'{extra}}}) $$) AS (v agtype)"
                )
            elif how == "cypher" or (how == "set" and is_edge):
                tenant.execute(
                    f"SELECT * FROM cypher('{graph}', $$ MATCH (a:Conversation {{namespace: 'ann'}}), "
                    f"(b:Message {{namespace: 'ann'}}) CREATE (a)-[:{element.label} {{k: '{element.k}'{extra}}}]->(b) "
                    "$$) AS (v agtype)"
                )
            elif how == "set":
                tenant.execute(
                    f"SELECT * FROM cypher('{graph}', $$ MATCH (m:Message {{namespace: 'ann'}}) "
                    f"SET m.k = '{element.k}' RETURN m $$) AS (v agtype)"
                )
            elif is_edge:
                tenant.execute(
                    psycopg.sql.SQL(
                        "INSERT INTO {} (start_id, end_id, properties) SELECT c.id, m.id, %s::agtype "
                        "FROM {} c, {} m WHERE agtype_object_field_text(c.properties, 'namespace') = 'ann' "
                        "AND agtype_object_field_text(m.properties, 'namespace') = 'ann'"
                    ).format(
                        psycopg.sql.Identifier(graph, element.label),
                        psycopg.sql.Identifier(graph, "Conversation"),
                        psycopg.sql.Identifier(graph, "Message"),
                    ),
                    (json.dumps({"k": element.k}),),
                )
            else:
                tenant.execute(
                    psycopg.sql.SQL("INSERT INTO {} (properties) VALUES (%s::agtype)").format(
                        psycopg.sql.Identifier(graph, element.label)
                    ),
                    (json.dumps({"k": element.k, "namespace": "ann"}),),
                )
            raise _Undo
    except _Undo:
        return "ok"
    except psycopg.Error as exc:
        return exc.sqlstate or "error"


class _Undo(Exception):
    """Raised to roll a tenant's write back once it went through."""
