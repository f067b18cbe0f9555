"""The embedded engine: PGlite (PostgreSQL in WebAssembly) with Apache AGE, served over the
PostgreSQL wire protocol by ``pglite-server``.

The npm packages are pinned by the ``package-lock.json`` beside this file and installed with
``npm ci`` into a cache folder the first time they are needed, so that a fresh machine needs
only Node.js and npm. The server runs in the background; its pid, port and data folder are kept
in a small state file under the agefacts home so that ``db status`` and ``db stop`` can find it
from another process.

Folders (each can be moved with an environment variable):
- ``AGEFACTS_HOME`` (default ``$XDG_DATA_HOME/agefacts`` or ``~/.local/share/agefacts``):
  the default data folder, the state file and the server log.
- ``AGEFACTS_CACHE`` (default ``$XDG_CACHE_HOME/agefacts`` or ``~/.cache/agefacts``): the npm
  install, one folder per lockfile so an upgrade never runs against stale packages.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import EngineError

__all__ = [
    "DATA_LOCK",
    "GROWTH",
    "RECOVERY_MB",
    "DEFAULT_PORT",
    "Engine",
    "EngineState",
    "MAX_CONNECTIONS",
    "MEMORY",
    "cache_dir",
    "check_room",
    "default_port",
    "free_mb",
    "home_dir",
    "socket_path",
]

DEFAULT_PORT = 54329
# Measured: loading 10.9 MB of conversations grew the embedded engine's data folder by 190 MB
# (93 MB of tables and indexes, 96 MB of write-ahead log it does not recycle while it runs).
GROWTH = 20
# A write-ahead log segment is 16 MB; recovering after a crash writes some.
RECOVERY_MB = 64
MEMORY = "memory"
# pglite-server serves one backend session to every client; concurrent clients are queued
# by the server and a transaction keeps its client in front, so a generous limit is safe.
MAX_CONNECTIONS = 256
_NODE_HINT = (
    "the embedded engine needs Node.js 20 or newer and npm on PATH: install them "
    "(for example `apt-get install nodejs npm`), or point --dsn / AGEFACTS_DSN at a "
    "PostgreSQL server with Apache AGE"
)


def _env_dir(var: str, xdg: str, fallback: str) -> Path:
    if os.environ.get(var):
        return Path(os.environ[var]).expanduser()
    base = os.environ.get(xdg) or str(Path.home() / fallback)
    return Path(base).expanduser() / "agefacts"


def home_dir() -> Path:
    return _env_dir("AGEFACTS_HOME", "XDG_DATA_HOME", ".local/share")


def cache_dir() -> Path:
    return _env_dir("AGEFACTS_CACHE", "XDG_CACHE_HOME", ".cache")


@dataclasses.dataclass(frozen=True)
class EngineState:
    """What a running embedded engine left in its state file."""

    pid: int
    port: int
    data: str
    host: str = "127.0.0.1"
    # The server script it runs: another cache's agefacts (AGEFACTS_CACHE) knows it by this.
    script: str | None = None

    @property
    def dsn(self) -> str:
        # A host that is a folder is where the Unix socket is (libpq's own convention).
        return f"host={self.host} port={self.port} user=postgres dbname=postgres sslmode=disable"

    @property
    def on_socket(self) -> bool:
        return self.host.startswith("/")


_STATE_FIELDS = frozenset(f.name for f in dataclasses.fields(EngineState))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child (started by this very process and exited) still answers kill(0).
    with contextlib.suppress(ChildProcessError, OSError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    # So does another process's zombie (an engine one process started and another stopped,
    # before its parent reaps it): on Linux its status says so. A leader that has exited while
    # its other threads still run (flushing the data folder) is a zombie too, and alive.
    with contextlib.suppress(OSError, ValueError):
        status = dict(
            line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
        )
        if status.get("State", "").strip().startswith("Z") and int(status.get("Threads", "1")) <= 1:
            return False
    return True


def _earlier_install(arg: str, cache: Path, script: Path) -> bool:
    """Whether a command line's argument is the server script of an installation in this
    cache (``engine-<hash>/`` then the script's own path)."""
    try:
        rel = Path(arg).relative_to(cache)
    except ValueError:
        return False
    return len(rel.parts) > 1 and rel.parts[0].startswith("engine-") and Path(*rel.parts[1:]) == script


def _command_line(pid: int) -> list[str] | None:
    """A process's arguments (Linux: /proc; elsewhere ps), or None when they cannot be read."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]
    except FileNotFoundError:
        if Path("/proc/self").exists():
            return None
    except OSError:
        return None
    try:
        out = subprocess.run(["ps", "-p", str(pid), "-o", "command="], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.split() if out.returncode == 0 and out.stdout.strip() else None


_SCRIPT = "@electric-sql/pglite-socket/dist/scripts/server.js"
DATA_LOCK = ".agefacts-engine.lock"
# What the engine writes when the files of its data folder cannot be opened as a database.
_DAMAGED = ("PGlite failed to initialize", "database files are incompatible", "invalid checkpoint", "Aborted(")


def _lock_data_folder(folder: Path) -> int:
    """Lock a data folder for one engine: an open file with an exclusive flock, whose
    descriptor the engine inherits (so the lock lasts as long as the engine, whoever started
    it). A folder another engine serves is refused, naming that engine."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / DATA_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 500).decode("utf-8", "replace").strip() or "another engine"
        os.close(fd)
        raise EngineError(
            f"the data folder {folder} is already served by an engine ({holder}); one folder is "
            "served by one engine at a time: stop that one, or give this one another folder"
        ) from None
    return fd


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def default_port() -> int:
    """The embedded engine's port when none is given: ``AGEFACTS_PORT``, or 54329."""
    raw = os.environ.get("AGEFACTS_PORT")
    if not raw:
        return DEFAULT_PORT
    if not raw.strip().isdigit() or not 0 < int(raw) < 65536:
        raise EngineError(f"AGEFACTS_PORT={raw!r} is not a port number; give one from 1 to 65535, or unset it")
    return int(raw)


def socket_path(folder: str | Path, port: int) -> Path:
    """The Unix socket a server on ``port`` listens on in ``folder`` (libpq's name for it)."""
    return Path(folder) / f".s.PGSQL.{port}"


# The longest path a Unix socket may have (sun_path, less its terminating NUL).
_SOCKET_PATH_MAX = 107


def _connect(host: str, port: int, timeout: float) -> socket.socket:
    """A connection to a server on ``port`` of ``host``: a folder (its Unix socket) or an
    address."""
    if not host.startswith("/"):
        return socket.create_connection((host, port), timeout=timeout)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(timeout)
    try:
        conn.connect(str(socket_path(host, port)))
    except OSError:
        conn.close()
        raise
    return conn


def _listened(folder: str, port: int) -> bool:
    """Whether something listens on the Unix socket of ``port`` in ``folder`` (a file left by a
    process that was killed refuses connections)."""
    try:
        _connect(folder, port, 0.5).close()
    except (FileNotFoundError, ConnectionRefusedError):
        return False
    except OSError:
        return True  # there, and busy or not ours to reach: taken either way
    return True


def _port_free(host: str, port: int) -> bool:
    if host.startswith("/"):
        return not _listened(host, port)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _answers_postgres(host: str, port: int, timeout: float = 2.0) -> bool:
    """True when something on host:port speaks the PostgreSQL protocol (answers SSLRequest)."""
    try:
        with _connect(host, port, timeout) as s:
            s.settimeout(timeout)
            s.sendall((8).to_bytes(4, "big") + (80877103).to_bytes(4, "big"))
            return s.recv(1) in (b"N", b"S")
    except OSError:
        return False


def _answers_query(dsn: str, timeout: float = 3.0) -> bool:
    """Whether the engine answers ``SELECT 1`` within ``timeout`` seconds: it serves its
    clients one statement at a time from one session, so one that runs long, or never ends
    (a wedged engine), leaves it accepting connections that no query is answered on."""
    import threading

    import psycopg

    answered: list[bool] = []

    def ask() -> None:
        try:
            with psycopg.connect(dsn, autocommit=True, connect_timeout=max(1, int(timeout))) as conn:
                answered.append(conn.execute("SELECT 1").fetchone() == (1,))
        except psycopg.Error:
            answered.append(False)

    # On a thread of its own: a query the engine never answers is left waiting there (it ends,
    # and closes, if the engine answers later), and this call returns when the time is up.
    worker = threading.Thread(target=ask, daemon=True)
    worker.start()
    worker.join(timeout)
    return bool(answered and answered[0])


class Engine:
    """The embedded engine's files and process. Constructing one does no I/O."""

    def __init__(self, home: Path | None = None, cache: Path | None = None):
        self.home = Path(home) if home else home_dir()
        self.cache = Path(cache) if cache else cache_dir()

    # -- files ---------------------------------------------------------------------------
    @property
    def state_file(self) -> Path:
        return self.home / "engine.json"

    @property
    def log_file(self) -> Path:
        return self.home / "engine.log"

    @property
    def default_data(self) -> Path:
        return self.home / "data"

    @property
    def socket_dir(self) -> Path:
        """The folder of the engine's Unix socket: only its owner may enter it, so no other
        user of the machine reaches the engine (which serves every client as its superuser)."""
        return self.home / "run"

    def _private_socket_dir(self, port: int) -> str:
        folder = self.socket_dir
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(folder, 0o700)  # made earlier by someone else's umask, or changed since
        where = str(folder.resolve())
        path = socket_path(where, port)
        if len(str(path).encode()) > _SOCKET_PATH_MAX:
            raise EngineError(
                f"the engine's socket {path} would be longer than a Unix socket's path may be "
                f"({_SOCKET_PATH_MAX} bytes): set AGEFACTS_HOME to a shorter folder, or serve on a TCP "
                "port with `agefacts db start --tcp`"
            )
        if path.exists() and not _listened(where, port):
            path.unlink()  # left by an engine that was killed: nothing listens on it
        return where

    @staticmethod
    def _lockfile_text() -> tuple[str, str]:
        pkg = resources.files(__package__)
        return (pkg / "package.json").read_text(), (pkg / "package-lock.json").read_text()

    def install_dir(self) -> Path:
        package_json, lock = self._lockfile_text()
        digest = hashlib.sha256((package_json + lock).encode()).hexdigest()[:16]
        return self.cache / f"engine-{digest}"

    def server_script(self) -> Path:
        return self.install_dir() / "node_modules" / _SCRIPT

    def _guard(self) -> Path:
        """guard.mjs (what the engine must never run) beside the installed packages, whose
        imports it resolves; written when it differs from this agefacts' own."""
        text = (resources.files(__package__) / "guard.mjs").read_text()
        path = self.install_dir() / "guard.mjs"
        if not path.exists() or path.read_text() != text:
            part = path.with_name(f"guard.mjs.{os.getpid()}")
            part.write_text(text)
            part.replace(path)  # whole, for an engine starting at the same moment
        return path

    def node(self) -> str:
        node = shutil.which("node")
        if not node:
            raise EngineError(f"Node.js was not found: {_NODE_HINT}.")
        return node

    def ensure_installed(self) -> Path:
        """Install the pinned npm packages once (``npm ci``); later calls do nothing."""
        target = self.install_dir()
        stamp = target / ".installed"
        if stamp.exists():
            return target
        self.node()
        npm = shutil.which("npm")
        if not npm:
            raise EngineError(f"npm was not found: {_NODE_HINT}.")
        target.mkdir(parents=True, exist_ok=True)
        # Two processes may start the engine for the first time at once; one installs.
        with open(target / ".lock", "w") as lockf:
            fcntl.flock(lockf, fcntl.LOCK_EX)
            if stamp.exists():
                return target
            package_json, lock = self._lockfile_text()
            (target / "package.json").write_text(package_json)
            (target / "package-lock.json").write_text(lock)
            proc = subprocess.run(
                [npm, "ci", "--omit=dev", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=target,
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                raise EngineError(
                    f"installing the embedded engine with `npm ci` in {target} failed:\n"
                    f"{proc.stderr.strip()[-2000:]}\n"
                    "Check that the npm registry can be reached, or use --dsn / AGEFACTS_DSN."
                )
            stamp.write_text("ok\n")
        return target

    # -- state ---------------------------------------------------------------------------
    def state(self) -> EngineState | None:
        """The running engine this home started, or None. The state file is removed only when
        its engine is certainly gone: the file is not one, or its process has exited, or the
        pid now runs a program that is no engine at all (used again). A process that may be an
        engine but cannot be confirmed as this one is never reported running, nor signalled,
        and its file is kept: :meth:`unconfirmed` says which, and how to stop it."""
        return self._look()[0]

    def unconfirmed(self) -> tuple[EngineState, str] | None:
        """The state file's process, and why, when it is alive and may be an engine but is not
        confirmed as this home's (see :meth:`state`)."""
        return self._look()[1]

    def _look(self) -> tuple[EngineState | None, tuple[EngineState, str] | None]:
        """The state file read once, and its process looked at once: this home's running
        engine, or the process it names that cannot be confirmed as one (and why)."""
        state = self._recorded()
        if state is None:
            return None, None
        if not _pid_alive(state.pid) or self._reused(state):
            self.state_file.unlink(missing_ok=True)
            return None, None
        why = self._foreign(state)
        return (state, None) if why is None else (None, (state, why))

    def unconfirmed_hint(self, state: EngineState, why: str) -> str:
        """A sentence for :meth:`unconfirmed`: the pid, why, and how to stop it."""
        return (
            f"the engine's state file ({self.state_file}) names pid {state.pid}, which agefacts cannot confirm "
            f"as the engine it started ({why}); it was not signalled. If it is an engine of yours, stop it with "
            f"`kill -INT {state.pid}`; if not, remove {self.state_file}"
        )

    @staticmethod
    def _reused(state: EngineState) -> bool:
        """Whether the pid certainly runs something that is not an embedded engine: its command
        line is readable and names no pglite-server script."""
        cmdline = _command_line(state.pid)
        return cmdline is not None and not any(arg.endswith(_SCRIPT) for arg in cmdline)

    def _recorded(self) -> EngineState | None:
        """The state file's engine, if the file is one: a pid above 1 (0, -1 and negative pids
        name process groups or every process), a port, a data folder."""
        self._check_home()
        try:
            raw = json.loads(self.state_file.read_text())
        except FileNotFoundError:
            return None
        except (ValueError, OSError):
            raw = None
        ok = (
            isinstance(raw, dict)
            # Keys a later agefacts may add are passed over, not taken for a broken file (an
            # agefacts that removed a file it could not read orphaned the engine it named).
            and type(raw.get("pid")) is int
            and raw["pid"] > 1
            and type(raw.get("port")) is int
            and 0 < raw["port"] < 65536
            and isinstance(raw.get("data"), str)
            and isinstance(raw.get("host", "127.0.0.1"), str)
            and isinstance(raw.get("script", ""), str)
        )
        if not ok:
            self.state_file.unlink(missing_ok=True)
            return None
        return EngineState(**{k: v for k, v in raw.items() if k in _STATE_FIELDS})

    def _foreign(self, state: EngineState) -> str | None:
        """Why the process ``state`` names is not this home's engine (None when it is): its
        command line must be this installation's server script, on the recorded port and
        data folder."""
        cmdline = _command_line(state.pid)
        if cmdline is None:
            return "its command line cannot be read"
        expected = {f"--port={state.port}", f"--db={'memory://' if state.data == MEMORY else state.data}"}
        # The script it was started with (recorded, so that an agefacts with another cache
        # knows it), this installation's, or an earlier one's in the same cache (an engine
        # started before agefacts was upgraded is still this home's, to report and to stop).
        script = self.server_script()
        inside = script.relative_to(self.install_dir())
        recorded = state.script if state.script and state.script.endswith(_SCRIPT) else None
        ours = (
            str(script) in cmdline
            or (recorded is not None and recorded in cmdline)
            or any(_earlier_install(arg, self.cache, inside) for arg in cmdline)
        )
        if not ours or not expected <= set(cmdline):
            return "it runs " + " ".join(cmdline)[:200]
        return None

    def outdated(self, state: EngineState) -> bool:
        """Whether the running engine was started from an earlier installation (its npm
        packages pinned otherwise): it serves, and `db stop` then a start runs this one."""
        cmdline = _command_line(state.pid) or []
        return str(self.server_script()) not in cmdline

    def status(self) -> dict[str, Any]:
        state, unsure = self._look()
        if state is None:
            if unsure is not None:
                return {"running": False, "unconfirmed": unsure[0].pid, "hint": self.unconfirmed_hint(*unsure)}
            return {"running": False}
        accepting = _answers_postgres(state.host, state.port)
        return {
            "running": True,
            "pid": state.pid,
            "port": state.port,
            "data": state.data,
            "accepting": accepting,
            "answering": accepting and _answers_query(state.dsn),
            "dsn": state.dsn,
            "outdated": self.outdated(state),
        }

    # -- process -------------------------------------------------------------------------
    def start(
        self,
        data: str | os.PathLike[str] | None = None,
        port: int | None = None,
        timeout: float = 120.0,
        *,
        tcp: bool = False,
    ) -> tuple[EngineState, bool]:
        """Start the server in the background and return once it accepts connections.

        It listens on a Unix socket in :attr:`socket_dir`, a folder only this user may enter
        (``port`` names the socket); with ``tcp``, on ``port`` of 127.0.0.1 instead, where any
        local user can connect (as the engine's superuser). Returns the state and whether this
        call started it. Starting a running engine is harmless: its state is returned, unless
        it serves other data or another port, which is an error rather than a silent switch.
        """
        port = default_port() if port is None else int(port)
        data_arg = self._data_arg(data)
        self.home.mkdir(parents=True, exist_ok=True)
        with open(self.home / ".start.lock", "w") as lockf:
            fcntl.flock(lockf, fcntl.LOCK_EX)
            running, unsure = self._look()
            if unsure is not None:
                raise EngineError(self.unconfirmed_hint(*unsure))
            if running is not None:
                if running.data != data_arg or running.port != port or running.on_socket == tcp:
                    raise EngineError(
                        f"the embedded engine is already running (pid {running.pid}, port "
                        f"{running.port}{'' if running.on_socket else ' on TCP'}, data {running.data}); stop it "
                        "with `agefacts db stop` before starting it with other data, another port or "
                        "another way to reach it (--tcp)"
                    )
                self._wait_ready(running, timeout)
                return running, False
            host = "127.0.0.1" if tcp else self._private_socket_dir(port)
            if not _port_free(host, port):
                # A local server answers in milliseconds; a program that says nothing is not one.
                who = "a PostgreSQL server" if _answers_postgres(host, port, timeout=0.5) else "another program"
                where = f"port {port} on 127.0.0.1" if tcp else f"the socket {socket_path(host, port)}"
                raise EngineError(
                    f"{where} is already in use by {who} that agefacts did not "
                    "start; choose another with `agefacts db start --port N`, or use that server "
                    "with --dsn if it has Apache AGE"
                )
            self.ensure_installed()
            held = None if data_arg == MEMORY else _lock_data_folder(Path(data_arg))
            if held is not None:
                self._seed(Path(data_arg))
            cmd = self._command("memory://" if data_arg == MEMORY else data_arg, port, host)
            log = open(self.log_file, "ab")
            since = log.tell()  # what this start writes to the log, not earlier runs
            proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.install_dir(),
                start_new_session=True,
                # The engine inherits the data folder's lock and holds it for as long as it runs.
                pass_fds=() if held is None else (held,),
            )
            log.close()
            if held is not None:
                os.ftruncate(held, 0)
                os.write(held, f"pid {proc.pid}, port {port}, home {self.home}\n".encode())
                os.close(held)
            state = EngineState(pid=proc.pid, port=port, data=data_arg, host=host, script=str(self.server_script()))
            self.state_file.write_text(json.dumps(dataclasses.asdict(state)))
            try:
                self._wait_ready(state, timeout, since)
            except EngineError:
                self._terminate(proc.pid)
                self.state_file.unlink(missing_ok=True)
                raise
            return state, True

    def _command(self, db: str, port: int, host: str = "127.0.0.1") -> list[str]:
        # On a socket, --port only names it (the server binds --path and no TCP port); it
        # stays on the command line, which is how an engine is known as this home's.
        where = [f"--path={socket_path(host, port)}"] if host.startswith("/") else ["--host=127.0.0.1"]
        return [
            self.node(),
            "--max-old-space-size=8192",
            f"--import={self._guard().as_uri()}",
            str(self.server_script()),
            f"--db={db}",
            f"--port={port}",
            *where,
            # pgvector serves the optional embeddings (agefacts.embed), created only when used.
            "--extensions=@electric-sql/pglite-age:age,@electric-sql/pglite-pgvector:vector",
            f"--max-connections={MAX_CONNECTIONS}",
        ]

    def template(self, timeout: float = 120.0) -> Path:
        """A data folder as the engine first makes it, kept beside the installed engine: the
        engine makes a new folder by running initdb in WebAssembly (5 s here), and opens an
        existing one in about 1 s, so a new folder starts as a copy of this one. Made once per
        installed engine (the first start of a new folder pays for it), by an engine process
        of its own, stopped cleanly so that the folder is complete."""
        tpl = self.install_dir() / "template"
        if (tpl / "PG_VERSION").exists():
            return tpl
        with open(self.install_dir() / ".template.lock", "w") as lockf:
            fcntl.flock(lockf, fcntl.LOCK_EX)
            if (tpl / "PG_VERSION").exists():
                return tpl
            part = self.install_dir() / "template.part"
            shutil.rmtree(part, ignore_errors=True)
            part.mkdir()
            port = _free_port()
            proc = subprocess.Popen(
                self._command(str(part), port),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                stdin=subprocess.DEVNULL,
                cwd=self.install_dir(),
                start_new_session=True,
            )
            try:
                deadline = time.monotonic() + timeout
                while not _answers_postgres("127.0.0.1", port, timeout=1.0):
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise EngineError("the engine could not make its template data folder")
                    time.sleep(0.1)
            finally:
                # SIGINT: pglite-server closes the database cleanly, writing the folder out.
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            os.rename(part, tpl)
        return tpl

    def _seed(self, folder: Path) -> None:
        """A new data folder (nothing in it but its lock) starts as a copy of the template.
        Anything else is left to the engine, and so is a new folder when the template cannot
        be made or copied (the engine then makes the folder itself, as it always could)."""
        if any(p.name != DATA_LOCK for p in folder.iterdir()):
            return
        try:
            shutil.copytree(self.template(), folder, dirs_exist_ok=True, ignore=shutil.ignore_patterns(DATA_LOCK))
        except (OSError, EngineError):
            for p in folder.iterdir():
                if p.is_dir():
                    shutil.rmtree(p, ignore_errors=True)
                elif p.name != DATA_LOCK:
                    p.unlink(missing_ok=True)

    def _check_home(self) -> None:
        if self.home.exists() and not self.home.is_dir():
            raise EngineError(
                f"the agefacts home {self.home} is a file, not a folder: set AGEFACTS_HOME to a folder "
                "(it holds the embedded engine's state and data; it is made when missing)"
            )

    def _data_arg(self, data: str | os.PathLike[str] | None) -> str:
        self._check_home()
        if data is None:
            folder = self.default_data
        elif str(data) in (MEMORY, "memory://"):
            return MEMORY
        else:
            folder = Path(data).expanduser()
        if folder.exists() and not folder.is_dir():
            raise EngineError(
                f"the data folder {folder} is a file: give a folder for the database (it is made when "
                f"missing), or --data {MEMORY} for a throwaway one"
            )
        return str(folder.resolve())

    def _wait_ready(self, state: EngineState, timeout: float, since: int = 0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not _pid_alive(state.pid):
                tail = self._log_tail(since=since)
                if state.data != MEMORY and any(m in tail for m in _DAMAGED):
                    free = free_mb(Path(state.data))
                    if free is not None and free < RECOVERY_MB:
                        raise EngineError(
                            f"the embedded engine could not open its data folder {state.data}: the disk that "
                            f"holds it has {free:.0f} MB free, and the engine needs room to recover what it "
                            f"was writing (at least {RECOVERY_MB} MB). Free space there and start again; what "
                            f"was committed is kept. The engine's log is {self.log_file}."
                        )
                    raise EngineError(
                        f"the embedded engine could not open its data folder {state.data}: the database "
                        "files there are damaged, or are not a database this engine wrote. Move the "
                        "folder aside (the next start makes a new, empty one there), or start with "
                        f"--data another_folder. The engine's log is {self.log_file}."
                    )
                raise EngineError(f"the embedded engine exited while starting; its log is {self.log_file}:\n" + tail)
            if _answers_postgres(state.host, state.port, timeout=1.0):
                return
            time.sleep(0.1)
        raise EngineError(
            f"the embedded engine did not accept connections on port {state.port} within "
            f"{timeout:.0f}s; its log is {self.log_file}"
        )

    def _log_tail(self, n: int = 20, since: int = 0) -> str:
        try:
            with open(self.log_file, "rb") as f:
                f.seek(since)
                text = f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-n:]) or "(the engine wrote nothing)"

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop the engine. Returns False when none was running (not an error). A state file
        that names a process not confirmed as this home's engine is an error: nothing is
        signalled (see :meth:`state`)."""
        state, unsure = self._look()
        if unsure is not None:
            raise EngineError(self.unconfirmed_hint(*unsure))
        if state is None:
            return False
        self._terminate(state.pid, timeout)
        self.state_file.unlink(missing_ok=True)
        # A killed process's leader shows as gone before its last thread has closed the
        # listening socket: a start right after would find the port taken. Waited for here.
        deadline = time.monotonic() + 10.0
        while not _port_free(state.host, state.port) and time.monotonic() < deadline:
            time.sleep(0.05)
        return True

    def restart_now(self, timeout: float = 120.0) -> EngineState | None:
        """Stop the engine at once and start it again on the same data folder and port, for
        a statement that must end now: the engine runs a statement on its one thread, so it
        sees no signal and answers no cancel request until the statement ends (a client that
        gave up left it refusing every connection meanwhile). PostgreSQL's write-ahead log
        makes the stop safe for committed work; what the statement was doing is rolled back.
        None when no engine of this home runs, or it keeps its data in memory (a restart
        would lose it: it is left running)."""
        state = self.state()
        if state is None or state.data == "memory":
            return None
        self.stop(timeout=0.0)
        started, _ = self.start(data=state.data, port=state.port, timeout=timeout, tcp=not state.on_socket)
        return started

    @staticmethod
    def _terminate(pid: int, timeout: float = 30.0) -> None:
        # SIGINT lets pglite-server close the database cleanly, which flushes a data folder.
        for sig, wait in ((signal.SIGINT, timeout), (signal.SIGKILL, 5.0)):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if not _pid_alive(pid):
                    return
                time.sleep(0.05)
        if _pid_alive(pid):  # pragma: no cover - a process that survives SIGKILL
            raise EngineError(f"the embedded engine (pid {pid}) did not stop")


def free_mb(folder: Path) -> float | None:
    """Free space, in MB, on the disk that holds ``folder`` (or its nearest existing parent)."""
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            try:
                return shutil.disk_usage(candidate).free / 2**20
            except OSError:
                return None
    return None


def check_room(dsn: str, input_bytes: int, *, home: Path | None = None) -> None:
    """Before a load into the embedded engine that serves ``dsn`` from a data folder on disk:
    refuse, with a sentence, a load that its free space cannot hold. A disk that fills during a
    write leaves the engine waiting forever (then, when its client goes away, it stops), so the
    room is asked for first: ``GROWTH`` times the input, plus ``AGEFACTS_MIN_FREE_MB`` (default
    ``RECOVERY_MB``). A server, or an engine in memory, is not checked."""
    import psycopg

    try:
        port = int(psycopg.conninfo.conninfo_to_dict(dsn).get("port") or 0)
    except (psycopg.ProgrammingError, ValueError):
        return
    state = Engine(home=home).state()
    if state is None or state.port != port or state.data == MEMORY:
        return
    try:
        headroom = float(os.environ.get("AGEFACTS_MIN_FREE_MB", RECOVERY_MB))
    except ValueError:
        raise EngineError("AGEFACTS_MIN_FREE_MB must be a number of megabytes") from None
    free = free_mb(Path(state.data))
    need = headroom + GROWTH * input_bytes / 2**20
    if free is not None and free < need:
        raise EngineError(
            f"the embedded engine's data folder {state.data} has {free:.0f} MB free, and this load needs about "
            f"{need:.0f} MB ({GROWTH} times the input's {input_bytes / 2**20:.1f} MB, and {headroom:.0f} MB to spare): "
            "free space there, or start the engine on a larger disk (agefacts db start --data FOLDER); nothing was loaded"
        )
