"""The one place where the database's errors become agefacts' own (:func:`translate`), and how
a connection string is said to a person (never its password)."""

from __future__ import annotations

import psycopg

from .errors import DatabaseError

__all__ = ["describe_dsn", "one_line", "translate", "where"]


# Lines of a server's or libpq's message that are not the error: where in a function it was
# raised (PL/pgSQL's CONTEXT, a stack of lines), and libpq's guess that repeats "refused".
_NOT_THE_ERROR = ("CONTEXT:", "Is the server running", "PL/pgSQL function", "SQL statement", "LINE ", "^")


def one_line(exc: BaseException) -> str:
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
    return f"the server at {where(dsn)}, database {parts.get('dbname') or parts.get('user') or 'postgres'}"


def _parts(dsn: str) -> dict[str, str] | None:
    try:
        return {k: str(v) for k, v in psycopg.conninfo.conninfo_to_dict(dsn).items() if v is not None}
    except psycopg.ProgrammingError:
        return None


def where(dsn: str) -> str:
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
    msg = one_line(exc)
    if isinstance(exc, psycopg.OperationalError) and (sqlstate is None or sqlstate.startswith("08")):
        return DatabaseError(f"{doing}: the database connection failed: {msg}", sqlstate, connection_lost=True)
    return DatabaseError(f"{doing}: {msg}" + (f" (SQLSTATE {sqlstate})" if sqlstate else ""), sqlstate)
