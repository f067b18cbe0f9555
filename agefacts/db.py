"""Connections to an AGE engine, and running Cypher and SQL on them.

What a connection does beyond running statements (privileges, set-up, the graph and its
labels, statistics) is its base :class:`agefacts.graphadmin.GraphAdmin`; psycopg's errors
become agefacts' in :mod:`agefacts.dberrors` alone (:func:`~agefacts.dberrors.translate`).
This is the one place that wraps Cypher in SQL. Every value reaches the server as a parameter: Cypher
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
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from .dberrors import one_line, translate, where
from .errors import DatabaseError, EngineError, NotFound
from .graphadmin import SETUP_LOCK, GraphAdmin, _accepted
from .names import is_graph_name, is_identifier

__all__ = [
    "DEFAULT_GRAPH",
    "Database",
    "Table",
    "chooses_embedded",
    "copy_value",
    "check_column",
    "check_graph_name",
    "cypher_statement",
    "login_role",
    "resolve_dsn",
    "transaction_settings",
]

DEFAULT_GRAPH = "facts"
_log = logging.getLogger(__name__)


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


_PG_ENV = ("PGHOST", "PGPORT", "PGDATABASE", "PGUSER", "PGSERVICE")


def check_graph_name(name: str) -> str:
    """A graph name is interpolated into SQL, so only plain identifiers are accepted."""
    return _accepted(
        name,
        is_graph_name,
        "graph name",
        "use 3 to 63 letters, digits or underscores, starting with a letter or underscore (AGE needs at least 3 "
        "characters)",
    )


def check_column(name: str) -> str:
    return _accepted(
        name,
        is_identifier,
        "column name",
        "use letters, digits and underscores; alias the expression in RETURN (RETURN n.name AS name) or pass --columns",
    )


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


class Database(GraphAdmin):
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
                    f"server {self.server!r} of the placement cannot be reached ({where(self.dsn)}): "
                    f"{one_line(last)}; check that it runs, or name it in the placement file "
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
                    self._run("SELECT pg_advisory_xact_lock(%s)", (SETUP_LOCK,))
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
