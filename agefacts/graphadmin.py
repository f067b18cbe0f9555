"""What a connection does to a database beyond running statements: the privileges a role lacks
and granting them, setting up agefacts' own SQL (``sql/``) once per version, making and
dropping the graph, its labels and their key indexes, and statistics after a load.

:class:`GraphAdmin` is a part of :class:`agefacts.db.Database` (its base), apart from the
connection itself: it runs its statements through the connection's ``_run`` and ``_tx``.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
from collections.abc import Callable, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from .dberrors import translate
from .errors import DatabaseError, QueryError, keys_stale_error
from .names import is_entity_label, is_label

__all__ = [
    "GraphAdmin",
    "SETUP_LOCK",
    "KEYS_STALE",
    "MIN_AGE",
    "STATISTICS_TARGET",
    "TENANT_READS_ONLY",
    "TESTED_AGE",
    "age_version_at_least",
    "age_version_supported",
    "check_label",
]

_log = logging.getLogger("agefacts.db")  # the connection's: what it logs was logged there before

# Advisory lock keys for set-up (one bigint, and a pair for a graph by name).
SETUP_LOCK = 0x61676566_61637473  # "agefacts"
_GRAPH_LOCK = 0x61676566

# The oldest Apache AGE the shipped queries and compiled Cypher are tested on. AGE 1.5.0 was
# measured too: it parses no list comprehension ([x IN xs WHERE ...], [x IN xs | ...]), which
# the shipped entity lookup needs, and names create_vlabel's arguments
# differently; 62 of 234 tests failed there.
MIN_AGE = (1, 6, 0)
TESTED_AGE = (
    "1.6.0 on PostgreSQL 15, 16 and 17; 1.7.0 on PostgreSQL 17 and 18 (the embedded engine too); 1.8.0 on PostgreSQL 18"
)


def age_version_at_least(version: str | None, wanted: tuple[int, int, int]) -> bool:
    """Whether an ``extversion`` of age (``1.6.0``, ``1.7.0-rc0``) is ``wanted`` or newer;
    an unknown version counts as the newest."""
    if version is None:
        return True
    nums = [int(n) for n in re.findall(r"\d+", version)[:3]]
    return tuple(nums + [0] * (3 - len(nums))) >= wanted


def age_version_supported(version: str) -> bool:
    """Whether an ``extversion`` of age is one agefacts supports (``1.6.0``, ``1.7.0-rc0``)."""
    return age_version_at_least(version, MIN_AGE)


# Whether a graph holds keys of an earlier agefacts' form (sql/007_keys.sql), for each database kind.
KEYS_STALE = "SELECT agefacts.keys_stale(%s)"

_LABELS = (
    "SELECT l.name, l.kind FROM ag_catalog.ag_label l "
    "JOIN ag_catalog.ag_graph g ON g.graphid = l.graph "
    "WHERE g.name = %s AND l.name NOT LIKE '\\_ag\\_label\\_%%'"
)

# What configures every graph: a tenant reads it and never changes it.
TENANT_READS_ONLY = ("tenants", "moves", "graph_ontology", "schema_version")

# The sample ANALYZE takes after a load (300 rows per unit) and the lists it keeps. A third of
# the default (100) costs a third of its CPU with facts, facts by name, history and ask as fast
# (alternated, at 100,000 statements on both engines and at 1,000,000 on PostgreSQL 17); a
# tenth cost a seventh, and at 1,000,000 statements made each of them 3 to 10 times slower: so
# small a sample counts a fifth of the distinct ends of an edge label, and the planner then
# joins whole tables (docs/performance.md).
STATISTICS_TARGET = 30


def _accepted(name: str, ok: Callable[[str], bool], what: str, rule: str) -> str:
    """``name`` when ``ok`` says so; else the error naming it as ``what`` and saying ``rule``.
    (Names that are interpolated into SQL or Cypher are checked this way.)"""
    if not ok(name):
        raise QueryError(f"{what} {name!r} is not accepted: {rule}")
    return name


def check_label(name: str) -> str:
    """Labels are interpolated into Cypher, so they must match ``^[A-Z][A-Za-z0-9_]*$``."""
    return _accepted(
        name,
        is_label,
        "label",
        "a label starts with an upper-case ASCII letter followed by letters, digits or underscores",
    )


class GraphAdmin:
    """The database's set-up, privileges, graph and labels, for :class:`agefacts.db.Database`."""

    graph: str
    create: bool
    age_version: str | None
    kept_ontology: str | None
    keys_checked: bool
    _conn: psycopg.Connection | None
    _labels: set[tuple[str, str]]

    if TYPE_CHECKING:  # the connection's, in Database

        @property
        def conn(self) -> psycopg.Connection: ...

        def _run(self, stmt: Any, args: Any = None, names: list[str] | None = None) -> list[tuple[Any, ...]]: ...

        def _tx(self) -> contextlib.AbstractContextManager[psycopg.Connection]: ...

        def table(self, query: Any, params: Any = None) -> Any: ...

    def _lacking(self, exc: psycopg.Error | DatabaseError, *, write: bool | None = None) -> DatabaseError:
        """A refusal for want of a privilege, as the grants that would allow what this
        connection is for (loading, or reading; ``write``: changing the graph, whatever the
        connection was opened for)."""
        write = self.create if write is None else write
        try:
            grants = self.missing_privileges(write=write)
        except psycopg.Error:
            grants = []
        try:
            set_up = self._run("SELECT to_regnamespace('agefacts') IS NOT NULL")[0][0] and self.graph_exists()
        except psycopg.Error:
            set_up = True  # cannot tell: the grants say the rest
        if write and not set_up:
            # Not a grant to ask for: the graph is the owner's to make, once.
            return DatabaseError(
                f"graph {self.graph!r} is not set up in this database, and this role may not create it: the "
                f"database's owner (or a role with CREATE on it) runs `agefacts setup --graph {self.graph} "
                "--app ROLE` once, which makes it and grants ROLE what loading needs",
                exc.sqlstate,
            )
        if not grants:
            if isinstance(exc, DatabaseError):
                return exc
            return translate(exc, f"preparing to {'change' if write else 'read'} graph {self.graph!r}")
        return DatabaseError(self._lacking_text(grants, write=write), exc.sqlstate)

    def refused(self, exc: DatabaseError) -> DatabaseError:
        """A write that the server refused for want of a privilege (``exc``, already ours), as
        the grants that would allow it; any other error as it is."""
        if exc.sqlstate != "42501" or self._conn is None:
            return exc
        return self._lacking(exc, write=True)

    def _lacking_text(self, grants: list[str], *, write: bool | None = None) -> str:
        doing = "change" if (self.create if write is None else write) else "read"
        if doing == "change" and self.create:
            doing = "load into"
        return (
            f"this role may not {doing} graph {self.graph!r}; a role that owns the objects (or a superuser) "
            f"can grant what it lacks: {'; '.join(grants)}"
        )

    def missing_privileges(self, *, write: bool, role: str | None = None) -> list[str]:
        """The GRANT statements ``role`` (default: this connection's) lacks to load into
        (``write``) or read this graph: USAGE on AGE's catalog and SELECT on its tables, then
        agefacts' own tables and the graph's label tables and sequences as far as they
        exist, or CREATE on the database when a writer must make them."""
        who = role or self._run("SELECT current_user")[0][0]
        ident = sql.Identifier(who).as_string(self.conn)
        graph = sql.Identifier(self.graph).as_string(self.conn)
        dml = "SELECT, INSERT, UPDATE, DELETE" if write else "SELECT"
        (usage_ag, read_ag, can_create, have_schema, have_graph), *_ = self._run(
            "SELECT has_schema_privilege(%(r)s, 'ag_catalog', 'USAGE'), "
            # By oid from the catalog: naming ag_catalog's tables would need USAGE on it.
            "(SELECT bool_and(has_table_privilege(%(r)s, c.oid, 'SELECT')) FROM pg_catalog.pg_class c "
            "  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
            "  WHERE n.nspname = 'ag_catalog' AND c.relname IN ('ag_graph', 'ag_label')), "
            "has_database_privilege(%(r)s, current_database(), 'CREATE'), "
            "to_regnamespace('agefacts') IS NOT NULL, to_regnamespace(%(g)s) IS NOT NULL",
            {"r": who, "g": self.graph},
        )
        out: list[str] = []
        if not usage_ag:
            out.append(f"GRANT USAGE ON SCHEMA ag_catalog TO {ident}")
        if not read_ag:
            out.append(f"GRANT SELECT ON ag_catalog.ag_graph, ag_catalog.ag_label TO {ident}")
        if write and (not have_schema or not have_graph) and not can_create:
            database = sql.Identifier(self.conn.info.dbname).as_string(self.conn)
            out.append(f"GRANT CREATE ON DATABASE {database} TO {ident}")
        for schema, shown in (("agefacts", "agefacts"), (self.graph, graph)):
            if not self._run("SELECT to_regnamespace(%s) IS NOT NULL", (schema,))[0][0]:
                continue
            if not self._run("SELECT has_schema_privilege(%s, %s, 'USAGE')", (who, schema))[0][0]:
                out.append(f"GRANT USAGE ON SCHEMA {shown} TO {ident}")
            wanted = "SELECT" if schema == "agefacts" and not write else dml
            # A tenant only reads what configures every graph (sql/004_tenants.sql); a load
            # writes none of it.
            tenant = schema == "agefacts" and self._is_tenant(who)
            lacking = self._run(
                "SELECT count(*) FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND NOT "
                "  (SELECT bool_and(has_table_privilege(%s, c.oid, p)) FROM unnest(string_to_array("
                "    CASE WHEN %s AND c.relname = ANY(%s) THEN 'SELECT' ELSE %s END, ', ')) p)",
                (schema, who, tenant, list(TENANT_READS_ONLY), wanted),
            )[0][0]
            if lacking:
                out.append(f"GRANT {wanted} ON ALL TABLES IN SCHEMA {shown} TO {ident}")
            if (
                write
                and self._run(
                    "SELECT count(*) FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = %s AND CASE WHEN c.relkind = 'S' THEN NOT has_sequence_privilege(%s, c.oid, 'USAGE') END",
                    (schema, who),
                )[0][0]
            ):
                out.append(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA {shown} TO {ident}")
        return out

    def _is_tenant(self, role: str) -> bool:
        """Whether ``role`` is a tenant (of any graph: agefacts.tenants is read by them too).
        No when this role may not read that table (it is then no tenant, which may)."""
        try:
            with self._tx():  # a savepoint inside the caller's transaction: a refusal undoes only this
                # (has_schema_privilege refuses a schema that is not there: no tenant either.)
                if not self._run(
                    "SELECT has_schema_privilege('agefacts', 'USAGE') AND to_regclass('agefacts.tenants') IS NOT NULL"
                )[0][0]:
                    return False
                found = self._run("SELECT EXISTS (SELECT 1 FROM agefacts.tenants WHERE role = %s)", (role,))
                return bool(found[0][0])
        except psycopg.Error:
            return False

    def grant(self, role: str, *, write: bool) -> tuple[list[str], list[str]]:
        """Grant ``role`` what it lacks to load into (``write``) or read this graph, as far as
        this connection's role may grant it, and the same on the label tables and sequences
        this role creates later (default privileges). Returns the statements run and those
        refused (AGE's catalog is usually a superuser's to grant on)."""
        done: list[str] = []
        refused: list[str] = []
        ident = sql.Identifier(role).as_string(self.conn)
        graph = sql.Identifier(self.graph).as_string(self.conn)
        later = [
            f"ALTER DEFAULT PRIVILEGES IN SCHEMA {graph} GRANT "
            f"{'SELECT, INSERT, UPDATE, DELETE' if write else 'SELECT'} ON TABLES TO {ident}"
        ]
        if write:
            later.append(f"ALTER DEFAULT PRIVILEGES IN SCHEMA {graph} GRANT USAGE ON SEQUENCES TO {ident}")
        for statement in self.missing_privileges(write=write, role=role) + later:
            try:
                with self._tx():
                    self._run(statement)
                done.append(statement)
            except psycopg.errors.InsufficientPrivilege:
                refused.append(statement)
            except psycopg.Error as exc:
                raise translate(exc, f"granting to role {role!r}") from exc
        # A GRANT on what this role may not grant is only a warning ("no privileges were
        # granted"): what is still missing afterwards was refused.
        still = self.missing_privileges(write=write, role=role)
        return [s for s in done if s not in still], refused + [s for s in done if s in still]

    def _age_extension_version(self) -> str | None:
        """The installed age extension's version (None when it is not installed), kept."""
        rows = self._run("SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'age'")
        self.age_version = rows[0][0] if rows else None
        return self.age_version

    def _check_age_version(self) -> None:
        """Refuse an AGE older than the oldest one agefacts is tested on, naming it."""
        found = self.age_version
        if found is None or age_version_supported(found):
            return
        raise DatabaseError(
            f"this server has Apache AGE {found}; agefacts needs AGE {'.'.join(map(str, MIN_AGE))} or newer "
            f"(tested: {TESTED_AGE}): upgrade the age extension (ALTER EXTENSION age UPDATE) or use another server"
        )

    def _apply_sql(self) -> None:
        """Create agefacts' own SQL objects from ``sql/``, once per version of those files:
        a connection that finds them at this version runs no DDL, and first connections
        racing each other set up one at a time (an advisory lock, then a second look)."""
        files = resources.files("agefacts._sql")
        scripts = [
            (files / name).read_text() for name in sorted(p.name for p in files.iterdir() if p.name.endswith(".sql"))
        ]
        version = hashlib.sha256("\0".join(scripts).encode()).hexdigest()[:16]
        if self._schema_version() == version:
            return
        try:
            self._set_up(scripts, version)
        except psycopg.errors.InsufficientPrivilege as exc:
            raise DatabaseError(
                "agefacts' own SQL objects in this database (schema agefacts) are missing or from another version "
                "of agefacts, and this role may not create them: connect once as the role that set the database "
                "up (or one with CREATE on the database), which updates them",
                exc.sqlstate,
            ) from exc

    def _set_up(self, scripts: list[str], version: str) -> None:
        with self._tx():
            self._run("SELECT pg_advisory_xact_lock(%s)", (SETUP_LOCK,))
            # An advisory lock does not make the server read what other sessions changed in
            # its catalogs, and a relation's lock does: without it, a client that waited here
            # while another set up a new database still found no schema agefacts by name, ran
            # the scripts again and failed on the schema the other had made.
            self._run("LOCK TABLE pg_catalog.pg_namespace IN ACCESS SHARE MODE")
            if self._schema_version() == version:
                return
            for script in scripts:
                self._run(script)
            self._run(
                "INSERT INTO agefacts.schema_version (id, version) VALUES (1, %s) "
                "ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version",
                (version,),
            )

    def _schema_version(self) -> str | None:
        if not self._run("SELECT to_regclass('agefacts.schema_version') IS NOT NULL")[0][0]:
            return None
        rows = self._run("SELECT version FROM agefacts.schema_version WHERE id = 1")
        return rows[0][0] if rows else None

    def keys_stale(self) -> bool:
        """Whether the graph holds keys of the form an earlier agefacts wrote (agefacts.migrate)."""
        return bool(self.table(KEYS_STALE, (self.graph,)).rows[0][0])

    def check_keys(self) -> None:
        """Refuse a graph an earlier agefacts wrote, saying how to migrate it: this agefacts
        would read none of its keys and write a second copy of everything beside them. Asked
        once a connection (the owner who migrates it meanwhile knows)."""
        if self.keys_checked:
            return
        if self.keys_stale():
            raise keys_stale_error(self.graph)
        self.keys_checked = True

    # -- graph and labels ----------------------------------------------------------------
    def graph_exists(self) -> bool:
        return bool(self._run("SELECT 1 FROM ag_catalog.ag_graph WHERE name = %s", (self.graph,)))

    def ensure_graph(self) -> None:
        """Create the graph if it is missing; creating an existing graph is not an error, and
        clients creating it at once create it once (an advisory lock, then a second look)."""
        if self.graph_exists():
            return
        try:
            with self._tx():
                self._run("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_GRAPH_LOCK, self.graph))
                if not self.graph_exists():
                    self._run("SELECT ag_catalog.create_graph(%s)", (self.graph,))
        except (
            psycopg.errors.InvalidSchemaName,
            psycopg.errors.UniqueViolation,
            psycopg.errors.DuplicateSchema,
        ) as exc:
            if not self.graph_exists():  # not another client's create: a real error
                raise translate(exc, f"creating graph {self.graph!r}") from exc
        except psycopg.errors.InsufficientPrivilege as exc:
            raise self._lacking(exc) from exc
        except psycopg.Error as exc:
            raise translate(exc, f"creating graph {self.graph!r}") from exc

    def drop_graph(self) -> None:
        """Drop the graph and what agefacts keeps about it beside it (its ingest log, what was
        paid for and not written, its questions, its ontology, its tenants and its message
        vectors), in one transaction: a graph created again under the name starts empty,
        and loads what it is given."""
        try:
            with self._tx():
                if self.graph_exists():
                    self._run("SELECT ag_catalog.drop_graph(%s, true)", (self.graph,))
                for table in (
                    "ingest_log",
                    "ingest_turns",
                    "extractions",
                    "questions",
                    "graph_ontology",
                    "tenants",
                    "message_vectors",
                ):
                    # message_vectors exists once embeddings were used (agefacts.embed).
                    if self._run("SELECT to_regclass(%s) IS NOT NULL", (f"agefacts.{table}",))[0][0]:
                        self._run(
                            sql.SQL("DELETE FROM agefacts.{} WHERE graph = %s").format(sql.Identifier(table)),
                            (self.graph,),
                        )
        except psycopg.Error as exc:
            raise translate(exc, f"dropping graph {self.graph!r}") from exc
        self._labels.clear()
        self.kept_ontology = None
        self.keys_checked = False

    def refresh_statistics(self) -> list[str]:
        """ANALYZE the graph's label tables that changed by more than autovacuum's default
        threshold since they were last analyzed (50 rows and a tenth of the table), as
        autovacuum would; returns the labels analyzed. The embedded engine has no autovacuum
        launcher (a quirk a test pins), and on a server autovacuum comes up to a minute later,
        while an assistant asks right after it adds: without statistics the planner guesses a
        key lookup finds hundreds of rows and hash-joins whole edge tables (``facts`` at 20k
        statements on PostgreSQL 16 + AGE 1.6.0: 165 ms at the median right after a load, 9.5
        ms analyzed; at 100k on the embedded engine 30 ms against 18 ms). Statistics are an
        optimisation: a role that may not analyze a table (it warns) or any failure here
        leaves the data as it is and is not an error.

        The ``properties`` column itself is not sampled (its statistics target is set to 0
        the first time its table is analyzed here): no plan reads them, since queries test
        its indexed expressions (whose statistics are kept) and never the whole value, and
        sorting sampled agtype values was two thirds of ANALYZE's time (20,000 statements on
        the embedded engine: 3.6 s against 1.3 s for every label)."""
        try:
            # A backend sends its counts at most once a second; the load's own are wanted now.
            self._run("SELECT pg_stat_force_next_flush()")
            with self._tx():
                self._run(f"SET LOCAL default_statistics_target = {STATISTICS_TARGET:d}")
                stale = self._run(
                    # attstattarget: -1 by default before PostgreSQL 17, NULL since.
                    "SELECT s.relname, a.attnum IS NOT NULL AND coalesce(a.attstattarget, -1) <> 0 FROM pg_stat_user_tables s "
                    "LEFT JOIN pg_attribute a ON a.attrelid = s.relid AND a.attname = 'properties' "
                    "WHERE s.schemaname = %s AND s.n_mod_since_analyze > 50 + 0.1 * s.n_live_tup ORDER BY s.relname",
                    (self.graph,),
                )
                for name, sampled in stale:
                    table = sql.SQL("{}.{}").format(sql.Identifier(self.graph), sql.Identifier(name))
                    if sampled:
                        try:
                            # The lock this takes is the one ANALYZE takes next. Only the owner
                            # may; a role that may only analyze (MAINTAIN) still analyzes.
                            with self._tx():
                                self._run(
                                    sql.SQL("ALTER TABLE {} ALTER COLUMN properties SET STATISTICS 0").format(table)
                                )
                        except psycopg.Error as exc:
                            _log.info("statistics target of %s left as it is: %s", name, exc)
                    self._run(sql.SQL("ANALYZE {}").format(table))
            return [name for name, _ in stale]
        except psycopg.Error as exc:
            _log.info("statistics of graph %r not refreshed: %s", self.graph, exc)
            return []

    def labels(self) -> dict[str, str]:
        """The graph's labels and their kinds ('v' or 'e'), AGE's internal defaults excluded."""
        try:
            return {name: kind for name, kind in self._run(_LABELS, (self.graph,))}
        except psycopg.Error as exc:
            raise translate(exc, "reading the graph's labels") from exc

    def ensure_labels(self, vertex: Sequence[str] = (), edge: Sequence[str] = ()) -> None:
        """Create missing labels up front, so that concurrent writers never race to create one
        inside a MERGE and a MATCH on a label that has no rows yet is valid."""
        wanted = [(check_label(v), "v") for v in vertex] + [(check_label(e), "e") for e in edge]
        todo = [w for w in wanted if w not in self._labels]
        if not todo:
            return
        have = self.labels()
        for name, kind in todo:
            if name in have and have[name] != kind:
                raise QueryError(
                    f"label {name!r} exists in graph {self.graph!r} as "
                    f"{'a vertex' if have[name] == 'v' else 'an edge'} label; it cannot be "
                    "used for the other kind"
                )
        try:
            # All in one call (sql/002_indexes.sql); on any failure (a label another client
            # created meanwhile, duplicate keys, a missing right) one at a time below, which
            # tells which label and why.
            with self._tx():
                self._run(
                    "SELECT agefacts.ensure_labels(%s, %s, %s)",
                    (self.graph, [n for n, _ in todo], [_index_kind(n, k) for n, k in todo]),
                )
        except psycopg.Error:
            self._ensure_labels_one_by_one(todo)
            return
        if self.conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            self._labels.update(todo)

    def create_labels(self, vertex: Sequence[str] = (), edge: Sequence[str] = ()) -> None:
        """Create missing labels without agefacts' indexes, inside the caller's transaction: a
        first load (:mod:`agefacts.firstload`) copies its rows first and builds the indexes
        after, with :meth:`ensure_labels`, before it commits."""
        wanted = [(check_label(v), "v") for v in vertex] + [(check_label(e), "e") for e in edge]
        have = self.labels()
        for name, kind in wanted:
            if name in have:
                if have[name] != kind:
                    raise QueryError(f"label {name!r} exists in graph {self.graph!r} as the other kind of label")
                continue
            fn = "create_vlabel" if kind == "v" else "create_elabel"
            try:
                self._run(
                    sql.SQL("SELECT ag_catalog.{}(%s::cstring, %s::cstring)").format(sql.Identifier(fn)),
                    (self.graph, name),
                )
            except psycopg.Error as exc:
                raise translate(exc, f"creating label {name!r}") from exc

    def _ensure_labels_one_by_one(self, todo: Sequence[tuple[str, str]]) -> None:
        have = self.labels()
        for name, kind in todo:
            if name not in have:
                fn = "create_vlabel" if kind == "v" else "create_elabel"
                try:
                    with self._tx():
                        self._run(
                            sql.SQL("SELECT ag_catalog.{}(%s::cstring, %s::cstring)").format(sql.Identifier(fn)),
                            (self.graph, name),
                        )
                except psycopg.Error as exc:
                    # Another client may have created it between our look and our create (AGE
                    # says so with SQLSTATE 3F000 or 42710); anything else is an error.
                    if self.labels().get(name) != kind:
                        raise translate(exc, f"creating label {name!r}") from exc
            try:
                # The key index (sql/002_indexes.sql): lookups, upserts, and no duplicate keys.
                self._run("SELECT agefacts.index_label(%s, %s, %s)", (self.graph, name, _index_kind(name, kind)))
            except psycopg.errors.UniqueViolation as exc:
                raise DatabaseError(
                    f"label {name!r} in graph {self.graph!r} already holds duplicate keys, so its unique "
                    "key index cannot be built; remove the duplicates (or load into a new graph)",
                    exc.sqlstate,
                ) from exc
            except psycopg.Error as exc:
                raise translate(exc, f"indexing label {name!r}") from exc
            # Inside a transaction the label may yet be rolled back: remember it only when
            # it is committed.
            if self.conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                self._labels.add((name, kind))


def _index_kind(label: str, kind: str) -> str:
    """The kind sql/002_indexes.sql indexes a label as: 'e' an edge label, 'v' one of agefacts'
    own vertex labels, 'n' an entity type's (whose vertices are also found by namespace)."""
    return "n" if is_entity_label(label, kind) else kind
