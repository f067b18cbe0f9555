"""Connections to an AGE engine, graph setup, and running Cypher.

This is the one place where psycopg errors become agefacts errors (:func:`translate`), and the
one place that wraps Cypher in SQL. Every value reaches the server as a parameter: Cypher
parameters travel as one JSON string in ``cypher()``'s third argument, and names that cannot
be parameters (the graph, labels, column names) are checked against a strict pattern first.

Engine facts this module relies on, each pinned by a test:
- The embedded engine serves every client from ONE backend session, so named prepared
  statements would collide (``prepare_threshold=None``) and ``SET`` leaks between clients.
- Every connection needs AGE's library loaded (``LOAD 'age'``, or a call into it) and the ``ag_catalog`` search path.
- ``cypher()`` takes its graph name only as a constant, never as a parameter.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import psycopg
from psycopg import sql

from .errors import DatabaseError, EngineError, NotFound, QueryError, keys_stale_error
from .names import is_entity_label, is_graph_name, is_identifier, is_label

__all__ = [
    "DEFAULT_GRAPH",
    "Database",
    "KEYS_STALE",
    "MIN_AGE",
    "STATISTICS_TARGET",
    "TENANT_READS_ONLY",
    "TESTED_AGE",
    "Table",
    "age_version_at_least",
    "age_version_supported",
    "chooses_embedded",
    "copy_value",
    "check_column",
    "check_graph_name",
    "check_label",
    "cypher_statement",
    "describe_dsn",
    "login_role",
    "resolve_dsn",
    "transaction_settings",
    "translate",
]

DEFAULT_GRAPH = "facts"
# Advisory lock keys for set-up (one bigint, and a pair for a graph by name).
_SETUP_LOCK = 0x61676566_61637473  # "agefacts"
_GRAPH_LOCK = 0x61676566

# The oldest Apache AGE the shipped queries and compiled Cypher are tested on. AGE 1.5.0 was
# measured too: it parses no list comprehension ([x IN xs WHERE ...], [x IN xs | ...]), which
# the shipped entity lookup needs, and names create_vlabel's arguments
# differently; 62 of 234 tests failed there.
MIN_AGE = (1, 6, 0)
TESTED_AGE = (
    "1.6.0 on PostgreSQL 15, 16 and 17; 1.7.0 on PostgreSQL 17 and 18 (the embedded engine too); 1.8.0 on PostgreSQL 18"
)

_log = logging.getLogger(__name__)


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


# How a session gets AGE: LOAD (a superuser's), or a call into its library (anyone's).
_LOAD_AGE = "LOAD 'age'"
_LOAD_AGE_BY_CALL = "SELECT 'null'::ag_catalog.agtype"
_SEARCH_PATH = 'SET search_path = ag_catalog, "$user", public'
# What a read of several statements sets first (``Database.reading``): every statement sees the
# graph as the first saw it, and nothing can be written.
_ONE_READ = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
# Whether the engine serves every client from one session (the embedded engine), and if so
# whether the user a connection names is a role there: its session is a superuser's, whatever
# user connected, so agefacts acts as the named role in each transaction.
_SHARED_SESSION = (
    "SELECT version() ILIKE '%%pglite%%', session_user::text, "
    "EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %s)"
)


def login_role(row: Sequence[Any], user: str) -> str | None:
    """The role a connection to a shared session acts as (None: the session's own), from
    :data:`_SHARED_SESSION`'s row; a user that is no role there is refused."""
    shared, session_user, exists = row
    if not shared or user == session_user:
        return None
    if not exists:
        raise DatabaseError(
            f"role {user!r} does not exist on the embedded engine: it serves every client from one "
            f"{session_user!r} session and acts as the role a connection names; connect as {session_user!r}, "
            "or create the role (agefacts setup --tenant ROLE=NAMESPACE grants one a namespace)",
            "28000",
        )
    return user


def transaction_settings(role: str | None) -> sql.Composed:
    """What one transaction sets for itself where a session may be another client's too (the
    embedded engine serves every client from one session, so a role or search path a client
    set outlives it, and would hold for the next client's statements): the search path agefacts
    reads AGE by, and ``role`` (None: the session's own user)."""
    return sql.SQL(_SEARCH_PATH.replace("SET ", "SET LOCAL ", 1) + "; SET LOCAL ROLE {}").format(
        sql.Identifier(role) if role is not None else sql.SQL("NONE")
    )


# Whether a graph holds keys of an earlier agefacts' form (sql/007_keys.sql), for each database kind.
KEYS_STALE = "SELECT agefacts.keys_stale(%s)"

_LABELS = (
    "SELECT l.name, l.kind FROM ag_catalog.ag_label l "
    "JOIN ag_catalog.ag_graph g ON g.graphid = l.graph "
    "WHERE g.name = %s AND l.name NOT LIKE '\\_ag\\_label\\_%%'"
)

# What configures every graph: a tenant reads it and never changes it.
TENANT_READS_ONLY = ("tenants", "moves", "graph_ontology", "schema_version")

_PG_ENV = ("PGHOST", "PGPORT", "PGDATABASE", "PGUSER", "PGSERVICE")


def check_graph_name(name: str) -> str:
    """A graph name is interpolated into SQL, so only plain identifiers are accepted."""
    if not is_graph_name(name):
        raise QueryError(
            f"graph name {name!r} is not accepted: use 3 to 63 letters, digits or underscores, "
            "starting with a letter or underscore (AGE needs at least 3 characters)"
        )
    return name


def check_label(name: str) -> str:
    """Labels are interpolated into Cypher, so they must match ``^[A-Z][A-Za-z0-9_]*$``."""
    if not is_label(name):
        raise QueryError(
            f"label {name!r} is not accepted: a label starts with an upper-case ASCII letter "
            "followed by letters, digits or underscores"
        )
    return name


def check_column(name: str) -> str:
    if not is_identifier(name):
        raise QueryError(
            f"column name {name!r} is not accepted: use letters, digits and underscores; "
            "alias the expression in RETURN (RETURN n.name AS name) or pass --columns"
        )
    return name


# Lines of a server's or libpq's message that are not the error: where in a function it was
# raised (PL/pgSQL's CONTEXT, a stack of lines), and libpq's guess that repeats "refused".
_NOT_THE_ERROR = ("CONTEXT:", "Is the server running", "PL/pgSQL function", "SQL statement", "LINE ", "^")


def _one_line(exc: BaseException) -> str:
    """The error as one line: the server's primary message and its detail, without the
    context lines a function's error carries (five of them for one refusal)."""
    diag = getattr(exc, "diag", None)
    primary = getattr(diag, "message_primary", None) if diag is not None else None
    detail = getattr(diag, "message_detail", None) if diag is not None else None
    text = primary if primary else str(exc)
    lines = [line.strip() for line in text.strip().splitlines()]
    kept = [line for line in lines if line and not line.startswith(_NOT_THE_ERROR)]
    if primary and detail:
        kept.append(" ".join(detail.split()))
    return "; ".join(kept).rstrip(".") or type(exc).__name__


def describe_dsn(dsn: str) -> str:
    """Where a connection string leads, for a person: host, port and database (never its
    password)."""
    parts = _parts(dsn)
    if parts is None:
        return "a server whose connection string is not valid"
    return f"the server at {_where(dsn)}, database {parts.get('dbname') or parts.get('user') or 'postgres'}"


def _parts(dsn: str) -> dict[str, str] | None:
    try:
        return {k: str(v) for k, v in psycopg.conninfo.conninfo_to_dict(dsn).items() if v is not None}
    except psycopg.ProgrammingError:
        return None


def _where(dsn: str) -> str:
    """host:port of a connection string, for a sentence (never its password)."""
    parts = _parts(dsn)
    if parts is None:
        return "its connection string is not valid"
    return f"{parts.get('host') or 'localhost'}:{parts.get('port') or 5432}"


def translate(exc: BaseException, doing: str) -> DatabaseError:
    """Turn a psycopg error into ours, keeping the SQLSTATE and the server's message."""
    if isinstance(exc, DatabaseError):
        return exc
    sqlstate = getattr(exc, "sqlstate", None)
    msg = _one_line(exc)
    if isinstance(exc, psycopg.OperationalError) and (sqlstate is None or sqlstate.startswith("08")):
        return DatabaseError(f"{doing}: the database connection failed: {msg}", sqlstate, connection_lost=True)
    return DatabaseError(f"{doing}: {msg}" + (f" (SQLSTATE {sqlstate})" if sqlstate else ""), sqlstate)


# The sample ANALYZE takes after a load (300 rows per unit) and the lists it keeps. A third of
# the default (100) costs a third of its CPU with facts, facts by name, history and ask as fast
# (alternated, at 100,000 statements on both engines and at 1,000,000 on PostgreSQL 17); a
# tenth cost a seventh, and at 1,000,000 statements made each of them 3 to 10 times slower: so
# small a sample counts a fifth of the distinct ends of an edge label, and the planner then
# joins whole tables (docs/performance.md).
STATISTICS_TARGET = 30

_COPY_CHUNK = 1 << 20  # characters sent to COPY at once


def copy_value(text: str) -> str:
    """A text value as COPY's text format takes it: backslash, newline, carriage return and
    tab escaped (the format's only special characters; ``\\N`` would be NULL)."""
    if "\\" in text:
        text = text.replace("\\", "\\\\")
    if "\n" in text or "\r" in text or "\t" in text:
        text = text.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return text


def chooses_embedded(dsn: str | None = None) -> bool:
    """Whether :func:`resolve_dsn` picks the embedded engine: no DSN given, no
    ``AGEFACTS_DSN``, and none of the standard ``PG*`` variables set."""
    return not dsn and not os.environ.get("AGEFACTS_DSN") and not any(os.environ.get(v) for v in _PG_ENV)


def resolve_dsn(dsn: str | None = None, *, start: bool = True, engine: Any = None, port: int | None = None) -> str:
    """Which server to use: an explicit DSN, then ``AGEFACTS_DSN``, then the standard ``PG*``
    variables (libpq reads them itself), and otherwise the embedded engine, started if needed
    (on ``port``, by default ``AGEFACTS_PORT`` or 54329)."""
    if not chooses_embedded(dsn):
        return dsn or os.environ.get("AGEFACTS_DSN") or ""
    from .engine import Engine

    engine = engine or Engine()
    state = engine.state()
    if state is None:
        if not start:
            raise EngineError("the embedded engine is not running; start it with `agefacts db start`")
        state, _ = engine.start(port=port)
    found: str = state.dsn
    return found


def _quote_dollar(text: str) -> str:
    """Dollar-quote ``text`` with a tag that does not occur in it, so no text can end it."""
    n = 0
    while True:
        tag = f"$af{n}$" if n else "$af$"
        if tag not in text:
            return f"{tag}{text}{tag}"
        n += 1


def cypher_statement(
    graph: str, query: str, columns: Sequence[str] = ("v",), with_params: bool = False, placeholder: str = "%s"
) -> sql.Composed:
    """The SQL that runs a Cypher query on a graph (its parameters, if any, as ``%s``, or as
    ``placeholder``: ``$1`` in a prepared statement)."""
    cols = sql.SQL(", ").join(sql.SQL("{} agtype").format(sql.Identifier(check_column(c))) for c in columns)
    return sql.SQL("SELECT * FROM ag_catalog.cypher({}, {}{}) AS ({})").format(
        sql.Literal(check_graph_name(graph)),
        sql.SQL(_quote_dollar(" " + query + " ")),
        sql.SQL(", " + placeholder) if with_params else sql.SQL(""),
        cols,
    )


def _cypher_call(
    graph: str, query: str, params: Mapping[str, Any] | None, columns: Sequence[str]
) -> tuple[sql.Composed, tuple[str] | None]:
    """The statement and arguments that run a Cypher query unprepared, on either connection."""
    stmt = cypher_statement(graph, query, columns, with_params=params is not None)
    return stmt, (json.dumps(params, ensure_ascii=False),) if params is not None else None


def _bad_dsn(exc: BaseException) -> DatabaseError:
    """The one message for a connection string libpq refuses, on either connection."""
    return DatabaseError(
        f"the connection string is not valid: {exc}; give one like "
        "'host=127.0.0.1 port=5432 user=me dbname=mine' or a postgresql:// URL (--dsn or AGEFACTS_DSN on the "
        "command line)"
    )


@functools.lru_cache(maxsize=256)
def _prepared_text(graph: str, query: str, columns: tuple[str, ...]) -> tuple[str, str]:
    """A named query's SQL with ``$1`` for its parameters, and the hash that names it: made
    once per text, not on every call."""
    text = cypher_statement(graph, query, columns, with_params=True, placeholder="$1").as_string(None)
    return text, hashlib.sha256(text.encode()).hexdigest()[:20]


class _Prepared:
    """Cypher queries run again and again (the named queries), prepared once per connection:
    AGE turns Cypher into SQL when a statement is parsed, and that, with planning, was most of
    a named query's time (the facts query: 5.1 ms at the median against 1.2 ms prepared on the
    embedded engine, 3.4 against 0.6 ms on PostgreSQL 17, at 100k statements). Each statement
    is named after a hash of its text, with a prefix of this object's own: the embedded engine
    serves every client from one session, so names must not meet another client's, and one
    name always means one text. A graph dropped and made again under a prepared statement is
    read again: PostgreSQL analyses the statement anew, and AGE finds the new graph's labels
    (a test holds it)."""

    def __init__(self, graph: str):
        self.graph = graph
        self.prefix = "agefacts_" + os.urandom(5).hex() + "_"
        self.names: set[str] = set()
        self.on: Any = None  # the connection they were prepared on

    def statements(self, query: str, columns: Sequence[str], conn: Any) -> tuple[str, sql.Composed | None, Any]:
        """The statement's name, the PREPARE to run first (None when it was), and a function of
        the parameters giving the EXECUTE."""
        if self.on is not conn:
            self.names, self.on = set(), conn
        text, digest = _prepared_text(self.graph, query, tuple(columns))
        name = self.prefix + digest
        prepare = None
        if name not in self.names:
            prepare = sql.SQL("PREPARE {} (ag_catalog.agtype) AS ").format(sql.Identifier(name)) + sql.SQL(text)

        def execute(params: Mapping[str, Any]) -> sql.Composed:
            arg = json.dumps(params, ensure_ascii=False)
            return sql.SQL("EXECUTE {} ({}::ag_catalog.agtype)").format(sql.Identifier(name), sql.Literal(arg))

        return name, prepare, execute


@dataclass(frozen=True)
class Table:
    """Rows with their column names; ``rows`` hold decoded Python values."""

    columns: list[str]
    rows: list[tuple[Any, ...]]

    def dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, r, strict=True)) for r in self.rows]


class Database:
    """A connection to one AGE graph.

    ``Database(dsn, graph)`` does no I/O; :meth:`connect` opens the connection, prepares the
    session for AGE and creates the graph and agefacts' SQL objects if they are missing.
    """

    def __init__(
        self,
        dsn: str,
        graph: str = DEFAULT_GRAPH,
        *,
        connect_timeout: float = 30,
        create: bool = True,
        restart_wait: float = 0.0,
        server: str | None = None,
        role: str | None = None,
    ):
        """``create=False`` is for readers: connecting to a graph that does not exist is then
        an error that says so, rather than an empty graph made to be read. ``restart_wait``:
        seconds for which a connection refused or dropped while connecting is tried again, as
        when the embedded engine restarts (Ctrl-C ends another command's statement that way);
        0 says at once that the server cannot be reached. ``server``: its name in a placement,
        which a failure to reach it says. ``role``: a role every transaction acts as (``SET LOCAL
        ROLE``; a tenant's, say, on the embedded engine, whose one session is a superuser's)."""
        self.dsn = dsn
        self.role = role
        self._login_role: str | None = None
        self.shares_session = False
        """Whether the engine serves every client from one session (the embedded engine): each
        transaction then sets what it depends on (:func:`transaction_settings`)."""
        self.graph = check_graph_name(graph)
        self.create = create
        self.connect_timeout = connect_timeout
        self.restart_wait = restart_wait
        self.server = server
        self._conn: psycopg.Connection | None = None
        self._labels: set[tuple[str, str]] = set()
        self._reopening = False
        # One connection, shared by the threads that share this object (a web application's
        # Memory): a transaction has it to itself until it ends, a statement until it is done.
        self._lock = threading.RLock()
        self._in_read = False  # inside reading(), whose thread holds the lock
        self.age_version: str | None = None  # the age extension's version, read at connect
        self._prepared = _Prepared(self.graph)
        # The digest of the ontology this connection last kept for the graph (agefacts.ledger).
        self.kept_ontology: str | None = None
        # Whether the graph's keys were found of this agefacts' form (check_keys).
        self.keys_checked = False
        self.on_wait: Callable[[str], None] | None = None
        """Told, once per connection or statement, when the database has not answered for
        ``wait_notice`` seconds, with what it is waiting for (a lock and who holds it, on a
        server), as the command line tells its user. None: nothing is watched."""
        self.wait_notice = 5.0

    # -- lifecycle -----------------------------------------------------------------------
    def __enter__(self) -> Database:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def conn(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            self.connect()
        assert self._conn is not None
        return self._conn

    def connect(self, retries: int = 0, delay: float = 0.5) -> Database:
        """Open (or reopen) the connection, retrying a refused connection ``retries`` times."""
        with self._lock:
            return self._connect(retries, delay)

    @contextlib.contextmanager
    def _watched(self) -> Iterator[None]:
        if self.on_wait is None:
            yield
            return
        pid = self._conn.info.backend_pid if self._conn is not None and not self._conn.closed else None
        timer = threading.Timer(self.wait_notice, self._tell_waiting, (pid,))
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()

    def _tell_waiting(self, pid: int | None) -> None:
        """Why the statement (or the connection) of backend ``pid`` has had no answer, asked
        on a connection of its own; said only when it is waiting for someone else."""
        waited = f"no answer from the database for {self.wait_notice:g} s"
        try:
            with psycopg.connect(self.dsn, autocommit=True, connect_timeout=2) as probe:
                row = probe.execute(
                    "SELECT wait_event_type, pg_blocking_pids(pid) FROM pg_stat_activity WHERE pid = %s", (pid,)
                ).fetchone()
        except psycopg.Error:
            # Not even a second connection is answered: the embedded engine, whose one session
            # serves every client in turn.
            text = (
                f"{waited}, nor to a second connection: another client holds it (on the embedded engine, "
                "a long statement or a transaction left open makes every other client wait); still "
                "waiting, Ctrl-C to stop"
            )
        else:
            if row is None or row[0] != "Lock":
                return  # running, not waiting for anyone
            holders = ", ".join(str(p) for p in row[1]) or "another session"
            text = (
                f"{waited}: it waits for a lock held by process {holders} (a transaction left open keeps "
                "its locks until it ends; pg_stat_activity shows what that process runs); still waiting, "
                "Ctrl-C to stop"
            )
        if self.on_wait is not None:
            self.on_wait(text)

    def _connect(self, retries: int, delay: float) -> Database:
        deadline = time.monotonic() + self.restart_wait
        pause = 0.1
        while True:
            try:
                with self._watched():
                    return self._connect_now(retries, delay)
            except DatabaseError as exc:
                # Refused, or accepted and then dropped while the session was prepared: a server
                # restarting. Tried again while the caller said one may be (restart_wait).
                if not exc.connection_lost or time.monotonic() + pause > deadline:
                    raise
                self.close()
                time.sleep(pause)
                pause = min(pause * 2, 1.0)

    def _connect_now(self, retries: int, delay: float) -> Database:
        self.close()
        last: BaseException | None = None
        for attempt in range(retries + 1):
            try:
                self._conn = psycopg.connect(
                    self.dsn,
                    autocommit=True,
                    prepare_threshold=None,
                    connect_timeout=int(self.connect_timeout),
                )
                break
            except psycopg.ProgrammingError as exc:
                # libpq refused the connection string itself (psycopg says ProgrammingError).
                raise _bad_dsn(exc) from None
            except psycopg.OperationalError as exc:
                last = exc
                if attempt < retries:
                    time.sleep(delay * (2**attempt))
        else:
            assert last is not None
            err = translate(last, "connecting to the database")
            if self.server is not None:
                err = DatabaseError(
                    f"server {self.server!r} of the placement cannot be reached ({_where(self.dsn)}): "
                    f"{_one_line(last)}; check that it runs, or name it in the placement file "
                    "as it can be reached",
                    err.sqlstate,
                    connection_lost=True,
                )
            chosen = [v for v in _PG_ENV if os.environ.get(v)] if not self.dsn else []
            if chosen:
                # With no DSN given, libpq took the server from the environment: say so, since
                # otherwise the embedded engine would have been used.
                named = ", ".join(f"{v}={os.environ[v]}" for v in chosen)
                err = DatabaseError(
                    f"{err} (the server was chosen by {named} in the environment; unset "
                    f"{'it' if len(chosen) == 1 else 'them'} to use the embedded engine, or give --dsn)",
                    err.sqlstate,
                    connection_lost=err.connection_lost,
                )
            raise err from last
        self._labels.clear()
        self.shares_session, self._login_role = False, None
        # Asked first: until it is known, a setting another client left could answer for us.
        try:
            row = self._run(_SHARED_SESSION, (self.conn.info.user,))[0]
        except psycopg.Error as exc:
            raise translate(exc, "connecting to the database") from exc
        self._login_role = login_role(row, self.conn.info.user)
        self.shares_session = bool(row[0])
        self._prepare_session()
        if self.create:
            self.ensure_graph()
        elif not self.graph_exists():
            self.close()
            raise NotFound(
                f"graph {self.graph!r} does not exist in this database: nothing was loaded into it "
                f"(load conversations with `agefacts load FILES --graph {self.graph}`, or name another graph)"
            )
        return self

    def reconnect(self, retries: int = 5, delay: float = 0.5) -> Database:
        return self.connect(retries=retries, delay=delay)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                # The embedded engine's one session outlives this client: its statements go.
                if self._prepared.on is self._conn and not self._conn.closed:
                    for name in sorted(self._prepared.names):
                        with contextlib.suppress(Exception):
                            self._conn.execute(sql.SQL("DEALLOCATE {}").format(sql.Identifier(name)))
                with contextlib.suppress(Exception):
                    self._conn.close()
            self._conn = None

    def _prepare_session(self) -> None:
        try:
            if not self._age_extension_version():
                with self._tx():
                    self._run("SELECT pg_advisory_xact_lock(%s)", (_SETUP_LOCK,))
                    self._run("CREATE EXTENSION IF NOT EXISTS age")
                self._age_extension_version()
        except psycopg.errors.InsufficientPrivilege:
            pass  # an administrator may have created it already; below says if not
        except psycopg.Error as exc:
            raise translate(exc, "creating the age extension") from exc
        if self.age_version is None:
            raise DatabaseError(
                f"Apache AGE is not installed in database {self.conn.info.dbname!r} and this role may not install "
                "it: ask a superuser to run CREATE EXTENSION age there (or use a database that has it)"
            )
        self._load_age()
        self._check_age_version()
        try:
            self._run(_SEARCH_PATH)
            if not self._run("SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user")[0][0]:
                # Said once, whole, at connect: rather than one refusal now and the next later.
                if self.missing_privileges(write=self.create):
                    raise self._lacking(DatabaseError("permission denied", "42501"))
            self._apply_sql()
        except psycopg.errors.InsufficientPrivilege as exc:
            raise self._lacking(exc) from exc
        except psycopg.Error as exc:
            raise translate(exc, "preparing the session") from exc

    def _load_age(self) -> None:
        """Load AGE's library into the session, which installs the hooks ``cypher()`` needs.
        A superuser does it with ``LOAD 'age'``; PostgreSQL refuses LOAD to other roles
        (even when a preload setting has loaded it already), but any call into the library
        loads it the same way, so for them the input function of AGE's type does it."""
        # The server reports at connection whether the role is a superuser; asking another role
        # to LOAD would only be refused, and logged as an error in the server's log each time.
        if self.conn.info.parameter_status("is_superuser") != "off":
            try:
                self._run(_LOAD_AGE)
                return
            except psycopg.errors.InsufficientPrivilege:
                pass
            except psycopg.Error as exc:
                raise translate(exc, "loading Apache AGE (is the age extension installed?)") from exc
        try:
            self._run(_LOAD_AGE_BY_CALL)
        except psycopg.errors.InsufficientPrivilege as exc:
            raise self._lacking(exc) from exc
        except psycopg.Error as exc:
            raise translate(exc, "loading Apache AGE (is the age extension installed?)") from exc

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
            self._run("SELECT pg_advisory_xact_lock(%s)", (_SETUP_LOCK,))
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

    # -- running Cypher ------------------------------------------------------------------
    def cypher_raw(
        self,
        query: str,
        params: Mapping[str, Any] | None = None,
        columns: Sequence[str] = ("v",),
    ) -> list[tuple[str | None, ...]]:
        """Run Cypher and return the rows as agtype text (``None`` for SQL NULL)."""
        stmt, args = _cypher_call(self.graph, query, params, columns)
        try:
            return self._run(stmt, args)
        except psycopg.Error as exc:
            raise translate(exc, "running Cypher") from exc

    def cypher(
        self,
        query: str,
        params: Mapping[str, Any] | None = None,
        columns: Sequence[str] = ("v",),
        *,
        prepared: bool = False,
    ) -> Table:
        """Run Cypher and decode every value (scalars, maps, lists, vertices, edges, paths);
        ``prepared``: as a prepared statement, for a query run again and again (see
        :class:`_Prepared`)."""
        from .agtype import decode

        rows = (
            self._cypher_prepared(query, params or {}, columns) if prepared else self.cypher_raw(query, params, columns)
        )
        return Table(list(columns), [tuple(decode(v) for v in row) for row in rows])

    def _cypher_prepared(
        self, query: str, params: Mapping[str, Any], columns: Sequence[str]
    ) -> list[tuple[str | None, ...]]:
        with self._lock:
            try:
                for attempt in (1, 2):
                    name, prepare, execute = self._prepared.statements(query, columns, self.conn)
                    if prepare is not None:
                        try:
                            with self._savepoint():  # in a read: a refusal aborts nothing
                                self._run(prepare)
                        except psycopg.errors.DuplicatePreparedStatement:
                            pass  # this client prepared it before a reconnect, on the same session
                        self._prepared.names.add(name)
                    try:
                        # In a read, a savepoint: a statement another client of the embedded
                        # engine's one session deallocated is prepared again in the read.
                        with self._savepoint():
                            return self._run(execute(params))
                    except psycopg.errors.InvalidSqlStatementName:
                        # Gone from the session (a reconnect, a transaction rolled back around
                        # its PREPARE, another client's DEALLOCATE): prepared again, once,
                        # outside a caller's transaction or inside a read.
                        self._prepared.names.discard(name)
                        idle = self.conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
                        if attempt == 2 or not (idle or self._in_read):
                            raise
            except psycopg.Error as exc:
                raise translate(exc, "running Cypher") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def execute(
        self, query: str | sql.Composable, params: Sequence[Any] | Mapping[str, Any] | None = None
    ) -> list[tuple[Any, ...]]:
        """Run plain SQL (our own statements only)."""
        try:
            return self._run(query, params)
        except psycopg.Error as exc:
            raise translate(exc, "running SQL") from exc

    @property
    def copies(self) -> bool:
        """Whether rows may be sent by ``COPY FROM STDIN``: on a server, not on the embedded
        engine, whose connection it breaks (pinned by a test)."""
        _ = self.conn  # connected: the engine is known then
        return not self.shares_session

    def copy(self, table: sql.Composable, columns: Sequence[str], lines: Iterable[str]) -> None:
        """``COPY table (columns) FROM STDIN`` in the text format, inside the caller's
        transaction, of ``lines``: each a row, its values made by :func:`copy_value` and
        joined by tabs, ending in a newline (put together by the caller: psycopg's own
        row-by-row writing took a tenth of a server load's client time). Only where
        :attr:`copies`."""
        stmt = sql.SQL("COPY {} ({}) FROM STDIN").format(table, sql.SQL(", ").join(map(sql.Identifier, columns)))
        try:
            with self._lock, self._watched(), self.conn.cursor() as cur, cur.copy(stmt) as cp:
                chunk: list[str] = []
                size = 0
                for line in lines:
                    chunk.append(line)
                    size += len(line)
                    if size >= _COPY_CHUNK:
                        cp.write("".join(chunk))
                        chunk, size = [], 0
                if chunk:
                    cp.write("".join(chunk))
        except psycopg.Error as exc:
            raise translate(exc, "copying rows") from exc

    def table(self, query: str | sql.Composable, params: Sequence[Any] | Mapping[str, Any] | None = None) -> Table:
        """Run plain SQL and return its rows with the column names the server reports."""
        try:
            names: list[str] = []
            rows = self._run(query, params, names)
        except psycopg.Error as exc:
            raise translate(exc, "running SQL") from exc
        return Table(names, [tuple(r) for r in rows])

    def _run(self, stmt: Any, args: Any = None, names: list[str] | None = None) -> list[tuple[Any, ...]]:
        """Execute one statement and fetch its rows. Outside a transaction it gets one of its
        own: the embedded engine queues every client's protocol messages into one session and
        keeps a client in front only while that client is in a transaction, so a statement's
        Parse, Bind and Execute from one client could otherwise be split by another client's
        ("unnamed prepared statement does not exist"). Inside the caller's transaction
        nothing is added."""

        def fetch(cur: psycopg.Cursor) -> list[tuple[Any, ...]]:
            if names is not None and cur.description:
                names.extend(d.name for d in cur.description)
            return cur.fetchall() if cur.description else []

        with self._lock:
            conn = self.conn
            with self._watched():
                if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                    with self._tx() as conn:
                        return fetch(conn.execute(stmt, args))
                return fetch(conn.execute(stmt, args))

    @contextlib.contextmanager
    def _tx(self) -> Iterator[psycopg.Connection]:
        """``conn.transaction()`` (a savepoint when nested), and, for a transaction of its own,
        on a new connection when the server closed this one while it was idle: only the BEGIN
        failed then, so nothing of the work had run. Every transaction agefacts opens goes
        through here."""
        with self._lock, contextlib.ExitStack() as stack:
            conn = self.conn
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE or self._reopening:
                with conn.transaction():
                    yield conn
                return
            try:
                stack.enter_context(conn.transaction())
            except psycopg.Error as exc:
                if not _closed_while_idle(conn):
                    raise
                _log.info("the connection to the database was closed while idle (%s); opening it again", exc)
                self._reopening = True  # once: a new connection that fails at once is an error
                try:
                    self.connect(retries=2)
                finally:
                    self._reopening = False
                conn = self.conn
                stack.enter_context(conn.transaction())
            if self.shares_session or self.role is not None:
                conn.execute(transaction_settings(self.role or self._login_role))
            yield conn

    def _savepoint(self) -> contextlib.AbstractContextManager[Any]:
        """A savepoint inside this connection's read; outside one each statement is its own
        transaction already, or the caller's transaction is theirs to keep."""
        return self._tx() if self._in_read else contextlib.nullcontext()

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Several reads as one: a read-only transaction whose statements all see the graph as
        its first statement saw it (repeatable read), so that an answer is never made of two
        moments of the graph (the messages found before a correction, what it withdrew
        after). One transaction is also cheaper than one per statement: on the embedded
        engine each of those costs three more round trips. Inside a transaction, the
        caller's."""
        with self._lock:
            if self.conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                yield
                return
            with self.transaction():
                self._run(_ONE_READ)
                self._in_read = True
                try:
                    yield
                finally:
                    self._in_read = False

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction (a savepoint when nested); errors inside become ours, a lost
        connection marked so (the loader reconnects and retries the work whole)."""
        try:
            with self._tx():
                yield
        except psycopg.Error as exc:
            err = translate(exc, "in a transaction")
            if not err.connection_lost and self._conn is not None and _closed_while_idle(self._conn):
                err = DatabaseError(str(err), err.sqlstate, connection_lost=True)
            raise err from exc


class _ClosedWhileIdle(Exception):
    def __init__(self, cause: BaseException, conn: Any):
        super().__init__(str(cause))
        self.conn = conn


def _closed_while_idle(conn: psycopg.BaseConnection[Any]) -> bool:
    """Whether a connection that was idle is gone: the server ended the session between two
    statements (a restart, an idle timeout, an administrator; AGE 1.6.0 ends idle sessions
    when it fails to flush its label cache, apache/age#2245). psycopg finds out at the next
    BEGIN, with an error that depends on how the session ended (seen: "received 2 results
    from command 'BEGIN'")."""
    return conn.broken or conn.closed


def _index_kind(label: str, kind: str) -> str:
    """The kind sql/002_indexes.sql indexes a label as: 'e' an edge label, 'v' one of agefacts'
    own vertex labels, 'n' an entity type's (whose vertices are also found by namespace)."""
    return "n" if is_entity_label(label, kind) else kind
