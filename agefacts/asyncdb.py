"""The asynchronous connection, for reading (psycopg's ``AsyncConnection``): what
:class:`AsyncMemory` and the MCP server read through. It shares the synchronous
:class:`agefacts.db.Database`'s statements, its prepared-statement names and its one place where
database errors become ours; it sets nothing up."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import psycopg
from psycopg import sql

from .db import (
    _LOAD_AGE,
    _LOAD_AGE_BY_CALL,
    _ONE_READ,
    _SEARCH_PATH,
    _SHARED_SESSION,
    DEFAULT_GRAPH,
    Table,
    _bad_dsn,
    _closed_while_idle,
    _ClosedWhileIdle,
    _cypher_call,
    _Prepared,
    check_graph_name,
    login_role,
    transaction_settings,
)
from .dberrors import translate
from .errors import DatabaseError
from .graphadmin import _LABELS, KEYS_STALE

__all__ = ["AsyncDatabase"]

_log = logging.getLogger("agefacts.db")

# The connection whose read (AsyncDatabase.reading) the running task is inside: its statements
# run in that transaction, without taking the connection's turn again (the task holds it).
_READING: contextvars.ContextVar[AsyncDatabase | None] = contextvars.ContextVar("agefacts_reading", default=None)


class AsyncDatabase:
    """An asynchronous connection to one AGE graph, for reading (psycopg's
    ``AsyncConnection``). It sets nothing up: the graph and agefacts' SQL objects are made by
    a :class:`Database` that writes (``AsyncMemory`` opens one first)."""

    def __init__(self, dsn: str, graph: str = DEFAULT_GRAPH, *, connect_timeout: float = 30, role: str | None = None):
        """``role``: as :class:`agefacts.db.Database`'s."""
        self.dsn = dsn
        self.role = role
        self._login_role: str | None = None
        self.shares_session = False
        self.graph = check_graph_name(graph)
        self.connect_timeout = connect_timeout
        self._conn: psycopg.AsyncConnection | None = None
        self.age_version: str | None = None
        self._one_at_a_time = asyncio.Lock()
        self._reopening = asyncio.Lock()
        self._prepared = _Prepared(self.graph)

    async def __aenter__(self) -> AsyncDatabase:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self) -> AsyncDatabase:
        """Open (or reopen) the connection. The new one is made ready before it replaces the
        old, so that tasks sharing this object never meet a half-made connection."""
        try:
            conn = await psycopg.AsyncConnection.connect(
                self.dsn, autocommit=True, prepare_threshold=None, connect_timeout=int(self.connect_timeout)
            )
        except psycopg.ProgrammingError as exc:
            raise _bad_dsn(exc) from None
        except psycopg.Error as exc:
            raise translate(exc, "connecting to the database") from exc

        shared, login = False, None

        async def run(stmt: str, args: Any = None) -> list[tuple[Any, ...]]:
            async with conn.transaction():
                if shared or self.role is not None:
                    await conn.execute(transaction_settings(self.role or login))
                cur = await conn.execute(stmt, args)
                return await cur.fetchall() if cur.description else []

        try:
            # Asked first: until it is known, a setting another client left could answer for us.
            try:
                row = (await run(_SHARED_SESSION, (conn.info.user,)))[0]
            except psycopg.Error as exc:
                raise translate(exc, "connecting to the database") from exc
            login = login_role(row, conn.info.user)
            shared = bool(row[0])
            rows = await run("SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'age'")
            try:
                try:
                    await run(_LOAD_AGE)
                except psycopg.errors.InsufficientPrivilege:
                    await run(_LOAD_AGE_BY_CALL)  # see Database._load_age
            except psycopg.Error as exc:
                raise translate(exc, "loading Apache AGE (is the age extension installed?)") from exc
            await run(_SEARCH_PATH)
        except BaseException:
            with contextlib.suppress(Exception):
                await conn.close()
            raise
        old, self._conn, self.shares_session, self._login_role = self._conn, conn, shared, login
        self.age_version = rows[0][0] if rows else None
        if old is not None:
            with contextlib.suppress(Exception):
                await old.close()
        return self

    async def close(self) -> None:
        if self._conn is not None:
            if self._prepared.on is self._conn and not self._conn.closed:
                for name in sorted(self._prepared.names):
                    with contextlib.suppress(Exception):
                        await self._conn.execute(sql.SQL("DEALLOCATE {}").format(sql.Identifier(name)))
            with contextlib.suppress(Exception):
                await self._conn.close()
        self._conn = None

    async def cypher(
        self,
        query: str,
        params: Mapping[str, Any] | None = None,
        columns: Sequence[str] = ("v",),
        *,
        prepared: bool = False,
    ) -> Table:
        """Run Cypher and decode every value, as :meth:`Database.cypher` does (``prepared``
        too)."""
        from .agtype import decode

        rows = (
            await self._cypher_prepared(query, params or {}, columns)
            if prepared
            else await self.cypher_raw(query, params, columns)
        )
        return Table(list(columns), [tuple(decode(v) for v in row) for row in rows])

    async def cypher_raw(
        self,
        query: str,
        params: Mapping[str, Any] | None = None,
        columns: Sequence[str] = ("v",),
    ) -> list[tuple[str | None, ...]]:
        """:meth:`Database.cypher_raw` on this connection."""
        stmt, args = _cypher_call(self.graph, query, params, columns)
        try:
            return await self._run(stmt, args)
        except psycopg.Error as exc:
            raise translate(exc, "running Cypher") from exc

    async def _cypher_prepared(
        self, query: str, params: Mapping[str, Any], columns: Sequence[str]
    ) -> list[tuple[Any, ...]]:
        """:meth:`Database._cypher_prepared` on this connection."""
        if self._conn is None or self._conn.closed:
            await self.connect()
        try:
            for attempt in (1, 2):
                name, prepare, execute = self._prepared.statements(query, columns, self._conn)
                if prepare is not None:
                    try:
                        async with self._savepoint():  # in a read: a refusal aborts nothing
                            await self._run(prepare)
                    except psycopg.errors.DuplicatePreparedStatement:
                        pass  # this client prepared it before a reconnect, on the same session
                    self._prepared.names.add(name)
                try:
                    async with self._savepoint():  # in a read: prepared again in it (as Database's)
                        return await self._run(execute(params))
                except psycopg.errors.InvalidSqlStatementName:
                    # Gone from the session (a reconnect, another client's DEALLOCATE):
                    # prepared again, once.
                    self._prepared.names.discard(name)
                    if attempt == 2:
                        raise
        except psycopg.Error as exc:
            raise translate(exc, "running Cypher") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    async def labels(self) -> dict[str, str]:
        """:meth:`Database.labels` on this connection."""
        try:
            return {name: kind for name, kind in await self._run(_LABELS, (self.graph,))}
        except psycopg.Error as exc:
            raise translate(exc, "reading the graph's labels") from exc

    async def keys_stale(self) -> bool:
        """:meth:`Database.keys_stale` on this connection."""
        return bool((await self.table(KEYS_STALE, (self.graph,))).rows[0][0])

    async def table(
        self, query: str | sql.Composable, params: Sequence[Any] | Mapping[str, Any] | None = None
    ) -> Table:
        try:
            names: list[str] = []
            rows = await self._run(query, params, names)
        except psycopg.Error as exc:
            raise translate(exc, "running SQL") from exc
        return Table(names, [tuple(r) for r in rows])

    async def _run(self, stmt: Any, args: Any = None, names: list[str] | None = None) -> list[tuple[Any, ...]]:
        # Each statement in a transaction of its own, for the reason Database._run gives, and
        # one at a time: tasks sharing the connection (an MCP server's concurrent calls) would
        # otherwise nest their transactions into each other's.
        if self._conn is None or self._conn.closed:
            await self.connect()
        assert self._conn is not None
        try:
            return await self._run_once(stmt, args, names)
        except _ClosedWhileIdle as closed:
            # As Database._tx: only the BEGIN failed. Outside the lock (connecting runs
            # statements of its own), and once for tasks that found it closed together.
            async with self._reopening:
                if self._conn is closed.conn:
                    _log.info("the connection to the database was closed while idle (%s); opening it again", closed)
                    await self.connect()
            return await self._run_once(stmt, args, names)

    async def _run_once(self, stmt: Any, args: Any, names: list[str] | None) -> list[tuple[Any, ...]]:
        if _READING.get() is self:  # inside this task's read: its transaction, its turn
            assert self._conn is not None
            return await self._fetch(self._conn, stmt, args, names)
        async with self._one_at_a_time, contextlib.AsyncExitStack() as stack:
            return await self._fetch(await self._begin(stack), stmt, args, names)

    async def _begin(self, stack: contextlib.AsyncExitStack) -> psycopg.AsyncConnection:
        """A transaction of its own on the connection (ended with ``stack``), set as every one
        is; the caller holds the connection's turn."""
        conn = self._conn  # read under the lock: another task may have opened a new one
        if conn is None:
            raise DatabaseError("the connection is closed")
        try:
            await stack.enter_async_context(conn.transaction())
        except psycopg.Error as exc:
            if _closed_while_idle(conn):
                raise _ClosedWhileIdle(exc, conn) from exc
            raise
        if self.shares_session or self.role is not None:
            await conn.execute(transaction_settings(self.role or self._login_role))
        return conn

    @staticmethod
    async def _fetch(
        conn: psycopg.AsyncConnection, stmt: Any, args: Any, names: list[str] | None
    ) -> list[tuple[Any, ...]]:
        cur = await conn.execute(stmt, args)
        if names is not None and cur.description:
            names.extend(d.name for d in cur.description)
        return await cur.fetchall() if cur.description else []

    @contextlib.asynccontextmanager
    async def _savepoint(self) -> AsyncIterator[None]:
        """A savepoint inside this task's read; outside one each statement is its own
        transaction already."""
        if _READING.get() is self and self._conn is not None:
            async with self._conn.transaction():
                yield
        else:
            yield

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[None]:
        """:meth:`Database.reading` on this connection: the task's statements inside run in one
        read-only, repeatable-read transaction, and other tasks sharing the connection wait
        for it (inside a read already, that one)."""
        if _READING.get() is self:
            yield
            return
        if self._conn is None or self._conn.closed:
            await self.connect()
        try:
            async with self._one_at_a_time, contextlib.AsyncExitStack() as stack:
                try:
                    conn = await self._begin(stack)
                except _ClosedWhileIdle as closed:
                    # As _run: only the BEGIN failed (this task holds the turn: no other reopens).
                    _log.info("the connection to the database was closed while idle (%s); opening it again", closed)
                    await self.connect()
                    conn = await self._begin(stack)
                await conn.execute(_ONE_READ)
                token = _READING.set(self)
                try:
                    yield
                finally:
                    _READING.reset(token)
        except psycopg.Error as exc:
            raise translate(exc, "reading") from exc
