"""Placement: each person's memory (a namespace) lives whole on one of several PostgreSQL +
AGE servers, named in a placement file.

A placement file (TOML) names the servers and may pin namespaces to one::

    [servers.a]
    dsn = "host=db-a dbname=agefacts user=app"

    [servers.b]
    dsn = "host=db-b dbname=agefacts user=app"
    replica = "host=db-b-replica dbname=agefacts user=app"   # reads may go there

    [namespaces]
    ann = "b"

A namespace that is not pinned lives on the server that a stable hash of the namespace and the
server names ranks first (rendezvous hashing): the same server in every process, and adding a
server moves only the namespaces that now rank it first. A conversation never spans servers,
so every guarantee of one server holds per namespace.

A namespace moved to another server (:func:`agefacts.placement.move`, ``agefacts move``)
leaves a note on the server it left: writes and reads that a placement not yet told of the
move routes there follow the note, and while the move runs, writes to it are refused with a
sentence (they are not lost: the caller sends them again when the move is done).
"""

from __future__ import annotations

import hashlib
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .errors import InputError, UsageError

__all__ = [
    "PLACEMENT_ENV",
    "Placement",
    "Server",
    "placement_from",
    "read_placement",
    "toml_string",
]

PLACEMENT_ENV = "AGEFACTS_PLACEMENT"


@dataclass(frozen=True)
class Server:
    """A server of a placement: its primary's dsn, and a streaming replica's that reads may
    use (:mod:`agefacts.replica`)."""

    name: str
    dsn: str
    replica: str | None = None


@dataclass(frozen=True)
class Placement:
    """The servers by name, the namespaces pinned to one, and the file they were read from."""

    servers: dict[str, Server]
    pinned: dict[str, str] = field(default_factory=dict)
    path: Path | None = None

    def __post_init__(self) -> None:
        if not self.servers:
            raise UsageError(f"{self._where()}: name at least one server ([servers.NAME] with a dsn)")
        for ns, name in self.pinned.items():
            if name not in self.servers:
                raise UsageError(
                    f"{self._where()}: namespace {ns!r} is pinned to server {name!r}, which is not one of its "
                    f"servers ({', '.join(sorted(self.servers))})"
                )

    def _where(self) -> str:
        return f"placement {self.path}" if self.path else "the placement"

    def server(self, name: str) -> Server:
        if name not in self.servers:
            raise UsageError(f"{self._where()} has no server {name!r}; its servers: {', '.join(sorted(self.servers))}")
        return self.servers[name]

    def home(self, namespace: str) -> Server:
        """The server a namespace lives on: the one it is pinned to, else the one a stable hash
        ranks first."""
        return self.servers[self.pinned.get(namespace) or self.ranked(namespace)[0]]

    def ranked(self, namespace: str) -> list[str]:
        """The servers' names in the order a stable hash ranks them for ``namespace``."""
        return [
            s.name
            for s in sorted(self.servers.values(), key=lambda s: (_rank(namespace, s.name), s.name), reverse=True)
        ]

    def pin(self, namespace: str, server: str) -> Placement:
        """This placement with ``namespace`` pinned to ``server``; the file, when there is one,
        is rewritten with it (atomically: a reader sees the old file or the new)."""
        self.server(server)
        moved = Placement(self.servers, {**self.pinned, namespace: server}, self.path)
        if self.path is not None:
            _write_pin(self.path, namespace, server)
        return moved


def _rank(namespace: str, server: str) -> bytes:
    return hashlib.sha256(f"{namespace}\0{server}".encode()).digest()


def read_placement(path: str | os.PathLike[str]) -> Placement:
    """A placement file, checked: a clear error names the file and what to fix."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"placement {p}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"placement {p}: cannot be read ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"placement {p} is not TOML: {exc}") from None
    unknown = sorted(set(data) - {"servers", "namespaces"})
    if unknown:
        raise UsageError(f"placement {p}: unknown table {unknown[0]!r}; it has [servers.NAME] and [namespaces]")
    servers: dict[str, Server] = {}
    raw = data.get("servers", {})
    if not isinstance(raw, dict):
        raise UsageError(f"placement {p}: servers is a table of servers, [servers.NAME] with a dsn")
    for name, spec in raw.items():
        if not isinstance(spec, dict) or not isinstance(spec.get("dsn"), str) or not spec["dsn"].strip():
            raise UsageError(
                f'placement {p}: server {name!r} needs a dsn ([servers.{name}] dsn = "host=... dbname=...")'
            )
        extra = sorted(set(spec) - {"dsn", "replica"})
        if extra:
            raise UsageError(f"placement {p}: server {name!r} has {extra[0]!r}; a server has a dsn and a replica")
        replica = spec.get("replica")
        if replica is not None and (not isinstance(replica, str) or not replica.strip()):
            raise UsageError(f"placement {p}: server {name!r}: replica is the dsn of a streaming replica of it")
        servers[name] = Server(name, spec["dsn"], replica)
    pinned = data.get("namespaces", {})
    if not isinstance(pinned, dict) or not all(isinstance(v, str) for v in pinned.values()):
        raise UsageError(f'placement {p}: [namespaces] pins a namespace to a server by name (ann = "a")')
    return Placement(servers, dict(pinned), p)


def placement_from(given: str | os.PathLike[str] | Placement | None) -> Placement | None:
    """A placement given as one or a file, else the file ``$AGEFACTS_PLACEMENT`` names, else
    None (one database)."""
    if isinstance(given, Placement):
        return given
    if given is None:
        given = os.environ.get(PLACEMENT_ENV) or None
    return read_placement(given) if given is not None else None


_TABLE = re.compile(r"^\s*\[([^\]]+)\]\s*(#.*)?$")


def _write_pin(path: Path, namespace: str, server: str) -> None:
    """The file with ``namespace = "server"`` in its [namespaces] table (replacing a pin of
    that namespace, or added), the rest of the text as it was."""
    # Lines by "\n" only: splitlines() also splits at U+2028 and the like, inside a string.
    lines = path.read_text(encoding="utf-8").split("\n")
    while lines and not lines[-1]:
        lines.pop()
    line = f"{toml_string(namespace)} = {toml_string(server)}"
    table = None
    out: list[str] = []
    placed = False
    for text in lines:
        m = _TABLE.match(text)
        if m:
            if table == "namespaces" and not placed:
                _insert_before_blank(out, line)
                placed = True
            table = m.group(1).strip()
        elif table == "namespaces" and _pins(text, namespace):
            if not placed:
                out.append(line)
                placed = True
            continue
        out.append(text)
    if not placed:
        if table == "namespaces":
            _insert_before_blank(out, line)
        else:
            out += ["", "[namespaces]", line]
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    text = "\n".join(out) + "\n"
    tmp.write_text(text, encoding="utf-8")
    # Read back before it replaces the file: a file every later command refuses is never left.
    try:
        written = tomllib.loads(tmp.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(
            f"{path}: pinning {namespace!r} would make it unreadable ({exc}); it was left as it was"
        ) from None
    if written.get("namespaces", {}).get(namespace) != server:
        tmp.unlink(missing_ok=True)
        raise InputError(f"{path}: pinning {namespace!r} did not read back as written; the file was left as it was")
    os.replace(tmp, path)


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string: backslash, quote and every control character escaped
    (TOML forbids U+007F raw, which JSON allows), and the Unicode line and paragraph separators
    too, so that no reader of lines splits the file inside it."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif code < 0x20 or code == 0x7F or 0x80 <= code < 0xA0 or ch in "\u2028\u2029":
            out.append(f"\\u{code:04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _insert_before_blank(out: list[str], line: str) -> None:
    at = len(out)
    while at > 0 and not out[at - 1].strip():
        at -= 1
    out.insert(at, line)


def _pins(text: str, namespace: str) -> bool:
    try:
        got = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return False
    return namespace in got
