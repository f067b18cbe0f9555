"""Reads from a streaming replica, with a memory's own writes in them.

A memory given a replica (``Memory(dsn, replica=...)``, or ``replica = "..."`` beside a
server's ``dsn`` in a placement) reads from it, and writes to the primary. After each write the
memory keeps the primary's WAL position; its next read waits for the replica to have replayed
that far (``SELECT pg_last_wal_replay_lsn() >= ...``, every 10 ms) for at most ``wait`` seconds,
and reads from the primary when the replica is further behind than that (or cannot be
reached). So a memory always reads its own writes; another process's writes reach its reads
when the replica replays them, as with any streaming replica. A replica that is not in
recovery (a primary given as its own replica, or one promoted) is always caught up.
"""

from __future__ import annotations

import asyncio
import logging
import time

from .asyncdb import AsyncDatabase
from .db import Database
from .errors import AgeFactsError

__all__ = ["DEFAULT_REPLICA_WAIT", "ReplicaReads", "AsyncReplicaReads", "wal_position"]

DEFAULT_REPLICA_WAIT = 1.0
"""Seconds a read waits for the replica to replay the memory's last write."""

_CAUGHT_UP = "SELECT NOT pg_is_in_recovery() OR coalesce(pg_last_wal_replay_lsn() >= %s::pg_lsn, false)"
_POLL = 0.01
_log = logging.getLogger("agefacts.replica")


def wal_position(db: Database) -> str:
    """Where the primary's WAL is now (after a write committed)."""
    return str(db.execute("SELECT pg_current_wal_lsn()::text")[0][0])


class ReplicaReads:
    """The database a read goes to: the replica once it holds this memory's writes, else the
    primary."""

    def __init__(self, primary: Database, replica_dsn: str, graph: str, wait: float = DEFAULT_REPLICA_WAIT):
        self.primary = primary
        self.dsn = replica_dsn
        self.graph = graph
        self.wait = wait
        self._replica: Database | None = None
        self._written: str | None = None
        self.served = {"replica": 0, "primary": 0}  # reads by where they went

    def wrote(self, position: str) -> None:
        """The primary's WAL position after a write (:func:`wal_position`), which the next read
        waits for the replica to have replayed."""
        self._written = position

    def db(self) -> Database:
        written = self._written
        deadline = time.monotonic() + self.wait
        while True:
            try:
                # Connected once; a replica that has not replayed the graph's creation yet
                # says the graph does not exist, which waiting mends too.
                replica = self._replica or Database(self.dsn, self.graph, create=False).connect()
                self._replica = replica
                if written is None or replica.table(_CAUGHT_UP, (written,)).rows[0][0]:
                    break
                why = "it has not replayed this memory's last write"
            except AgeFactsError as exc:
                why = str(exc)
            if time.monotonic() >= deadline:
                _log.info("reading from the primary: the replica cannot serve it yet (%s)", why)
                self.served["primary"] += 1
                return self.primary
            time.sleep(_POLL)
        if self._written == written:
            self._written = None  # caught up: later reads need no check until the next write
        self.served["replica"] += 1
        return replica

    def close(self) -> None:
        if self._replica is not None:
            self._replica.close()
            self._replica = None


class AsyncReplicaReads:
    """:class:`ReplicaReads` for :class:`agefacts.AsyncMemory`: the asynchronous reader of the
    replica, or of the primary."""

    def __init__(self, primary: AsyncDatabase, replica_dsn: str, graph: str, wait: float = DEFAULT_REPLICA_WAIT):
        self.primary = primary
        self.dsn = replica_dsn
        self.graph = graph
        self.wait = wait
        self._replica: AsyncDatabase | None = None
        self._written: str | None = None
        self.served = {"replica": 0, "primary": 0}

    def wrote(self, position: str) -> None:
        """See :meth:`ReplicaReads.wrote` (the position is read by the caller, in a thread)."""
        self._written = position

    async def db(self) -> AsyncDatabase:
        written = self._written
        deadline = time.monotonic() + self.wait
        while True:
            try:
                replica = self._replica or await AsyncDatabase(self.dsn, self.graph).connect()
                self._replica = replica
                if written is None or (await replica.table(_CAUGHT_UP, (written,))).rows[0][0]:
                    break
                why = "it has not replayed this memory's last write"
            except AgeFactsError as exc:
                why = str(exc)
            if time.monotonic() >= deadline:
                _log.info("reading from the primary: the replica cannot serve it yet (%s)", why)
                self.served["primary"] += 1
                return self.primary
            await asyncio.sleep(_POLL)
        if self._written == written:
            self._written = None
        self.served["replica"] += 1
        return replica

    async def close(self) -> None:
        if self._replica is not None:
            await self._replica.close()
            self._replica = None
