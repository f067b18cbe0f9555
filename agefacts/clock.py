"""CPU seconds by stage of a load: the client's (the thread or worker process that ran each
stage) and the server's (the process that answered it), for ``agefacts bench``
(docs/performance.md, "Where a load's CPU goes, by stage").

A load runs without a clock unless it is given one: then each stage's start and end reads
the thread's CPU time (twice a conversation while preparing) and, for a stage that asks the
server, that process's from /proc when it is on this machine (a few times a batch)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["STAGES", "StageClock", "listening_process", "process_cpu", "stage"]

STAGES = (
    "hash",
    "parse",
    "ground and gate",
    "compile",
    "assemble",
    "ledger look-up",
    "labels",
    "lock and check",
    "retract",
    "rows",
    "key look-up",
    "vertices",
    "edges",
    "derived properties",
    "fact versions",
    "versions read",
    "reading of time",
    "versions written",
    "ingest log",
    "indexes",
    "commit",
    "statistics",
)
"""The stages in the order a load meets them: preparing (hash .. assemble, in the preparing
thread or worker processes, no server), then writing (the loading thread and the server). A
stage met inside another counts its own seconds and the outer one what is left: "rows" is
what writing rows spends besides looking keys up and writing vertices and edges; "fact
versions" what refreshing them spends besides reading the statements and the versions held,
reading time (on a thread of its own), and writing the versions; "indexes" what a first load
(agefacts.firstload) spends building the indexes after its rows."""

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_cpu(pid: int | None) -> float | None:
    """CPU seconds (user and system) that process ``pid`` has used, or None when it cannot be
    read from here (no pid, another machine's, or gone)."""
    if pid is None:
        return None
    try:
        # The command name may hold spaces and parentheses; the fields follow the last ")".
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK
    except (OSError, IndexError, ValueError):
        return None


def listening_process(host: str, port: int) -> int | None:
    """The process of this machine listening where a DSN's ``host`` and ``port`` point: a TCP
    port, or the socket ``.s.PGSQL.<port>`` in the folder ``host`` names (the embedded engine,
    say). Read from /proc; None where there is no /proc, no such process, or it is not this
    user's to read. Only read: nothing here ever signals it."""
    inodes = set()
    path = os.path.join(host, f".s.PGSQL.{port}")

    def unix(f: list[str]) -> bool:
        return len(f) > 7 and f[7] == path

    def tcp(f: list[str]) -> bool:
        # local address "0100007F:D431", state 0A (LISTEN)
        return len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port

    tables = (
        [("/proc/net/unix", unix, 6)]
        if host.startswith("/")
        else [("/proc/net/tcp", tcp, 9), ("/proc/net/tcp6", tcp, 9)]
    )
    for table, listening, inode in tables:
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        inodes |= {f"socket:[{f[inode]}]" for f in map(str.split, lines) if listening(f)}
    if not inodes:
        return None
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            for fd in (entry / "fd").iterdir():
                if os.readlink(fd) in inodes:
                    return int(entry.name)
        except OSError:  # not ours to read, or gone meanwhile
            continue
    return None


_Mark = tuple[float, float | None]

# Each thread's stages being counted, innermost last: the seconds their inner stages spent.
_nested = threading.local()


@dataclass
class _Tally:
    lock: threading.Lock = field(default_factory=threading.Lock)
    client: dict[str, float] = field(default_factory=dict)
    server: dict[str, float] = field(default_factory=dict)
    elsewhere: float = 0.0  # client seconds counted in other processes (workers)


class StageClock:
    """Adds up CPU seconds by stage, from any thread. ``server``: the pid of the process
    whose CPU is the server's work for the loading connection (the embedded engine's, or the
    backend's), or None (then only the client's is counted)."""

    def __init__(self, server: int | None = None, _tally: _Tally | None = None):
        self.server = server
        self._tally = _Tally() if _tally is None else _tally

    def client_only(self) -> StageClock:
        """This clock for a thread that never talks to the server (preparing): the server's
        CPU meanwhile is another thread's work, not this stage's."""
        return StageClock(None, self._tally)

    @property
    def elsewhere(self) -> float:
        """Client seconds counted in other processes (:meth:`add_all`)."""
        return self._tally.elsewhere

    def mark(self) -> _Mark:
        return time.thread_time(), process_cpu(self.server)

    def since(self, name: str, mark: _Mark) -> None:
        """Add what this thread and the server spent since ``mark`` to stage ``name``."""
        client, server = self.mark()
        self.add(name, client - mark[0], None if server is None or mark[1] is None else server - mark[1])

    def add(self, name: str, client: float, server: float | None = None) -> None:
        t = self._tally
        with t.lock:
            t.client[name] = t.client.get(name, 0.0) + client
            if server is not None:
                t.server[name] = t.server.get(name, 0.0) + server

    def add_all(self, client: Mapping[str, float]) -> None:
        """Add client seconds by stage counted in another process (a worker's)."""
        for name, secs in client.items():
            self.add(name, secs)
        with self._tally.lock:
            self._tally.elsewhere += sum(client.values())

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Count what this block spends to ``name``; a stage met inside another counts its
        own seconds, which the outer one does not count again."""
        inner = _nested.__dict__.setdefault("stack", [])
        inner.append([0.0, 0.0])
        mark = self.mark()
        try:
            yield
        finally:
            client, server = self.mark()
            spent_client = client - mark[0]
            spent_server = None if server is None or mark[1] is None else server - mark[1]
            within = inner.pop()
            self.add(name, spent_client - within[0], None if spent_server is None else spent_server - within[1])
            if inner:
                inner[-1][0] += spent_client
                inner[-1][1] += spent_server or 0.0

    def spent(self) -> dict[str, dict[str, float | None]]:
        """Each stage met, in :data:`STAGES` order (others after, by name): its client and
        server seconds (server None where it was not counted)."""
        t = self._tally
        with t.lock:
            names = sorted(t.client.keys() | t.server.keys(), key=_order)
            return {n: {"client_s": t.client.get(n, 0.0), "server_s": t.server.get(n)} for n in names}


def _order(name: str) -> tuple[int, str]:
    return (STAGES.index(name), "") if name in STAGES else (len(STAGES), name)


def stage(clock: StageClock | None, name: str) -> contextlib.AbstractContextManager[None]:
    """``clock.stage(name)``, or nothing when there is no clock."""
    return contextlib.nullcontext() if clock is None else clock.stage(name)
