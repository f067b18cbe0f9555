"""One error hierarchy for agefacts.

Every failure a user can cause or meet is an :class:`AgeFactsError`; its message names the
input (file, conversation, turn) and what to do about it. Database errors become
:class:`DatabaseError` in one place (``agefacts.db``) and keep their SQLSTATE.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AgeFactsError",
    "AgtypeError",
    "CompileError",
    "ConversationMoved",
    "DatabaseError",
    "EmbeddingError",
    "EndpointDown",
    "EngineError",
    "ExtractionError",
    "InputError",
    "LoadInterrupted",
    "NamespaceMoved",
    "NotFound",
    "OntologyError",
    "QueryError",
    "TimeError",
    "UsageError",
    "WorkerLost",
    "keys_stale_error",
    "need_text",
]


class AgeFactsError(Exception):
    """Base of every error agefacts raises on purpose."""


class EngineError(AgeFactsError):
    """The embedded engine could not be installed, started, reached or stopped."""


class DatabaseError(AgeFactsError):
    """A database operation failed. ``sqlstate`` is the server's code when it sent one;
    ``connection_lost`` says the connection itself is gone (reconnecting may help)."""

    #: Conflicts that a retry of the same idempotent work resolves: a unique key taken by a
    #: concurrent writer, a deadlock, a serialization failure.
    RETRYABLE = frozenset({"23505", "40P01", "40001"})

    def __init__(self, message: str, sqlstate: str | None = None, *, connection_lost: bool = False):
        super().__init__(message)
        self.sqlstate = sqlstate
        self.connection_lost = connection_lost

    @property
    def retryable(self) -> bool:
        # AGE reports a vertex or edge that a concurrent transaction updated first, which
        # PostgreSQL would call a serialization failure, as an internal error (XX000)
        # "Entity failed to be updated" (or deleted): the same conflict, retried the same way.
        if self.sqlstate == "XX000" and "Entity failed to be " in str(self):
            return True
        return self.sqlstate in self.RETRYABLE

    @property
    def disk_full(self) -> bool:
        """The disk that holds the database refused a write (SQLSTATE 53100, "could not
        extend file"): every later write would fail too, until space is freed."""
        return self.sqlstate == "53100"


class InputError(AgeFactsError):
    """An input file or value is not what agefacts reads; the message says which and why."""


class OntologyError(InputError):
    """An ontology file is invalid."""


class ExtractionError(AgeFactsError):
    """The model endpoint failed or replied with something that is not an extraction."""


class CompileError(AgeFactsError):
    """A result cannot be turned into Cypher (for instance text that PostgreSQL cannot store)."""


class UsageError(AgeFactsError):
    """A command was given arguments it cannot use (the CLI exits with status 2)."""


def need_text(value: object, what: str, *, optional: bool = False) -> None:
    """A library argument that must be text (or None, when ``optional``) is refused, naming it,
    before it reaches the database ("text = smallint", with SQL) or a TypeError."""
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise UsageError(f"{what} is text{' (or None)' if optional else ''}, not {value!r}")


def keys_stale_error(graph: str) -> UsageError:
    """What is said of a graph an earlier agefacts wrote, whose keys this one computes
    otherwise (agefacts.migrate)."""
    return UsageError(
        f"graph {graph!r} was written by an earlier agefacts, whose keys this one does not read: run "
        f"`agefacts migrate --graph {graph}` once, as the graph's owner (it loads the conversations the graph "
        "keeps again, in one transaction)"
    )


class QueryError(AgeFactsError):
    """A query is malformed or names something that does not exist."""


class NotFound(QueryError):
    """What a read names is not in this database: no such entity, or no such graph. Over the
    servers of a placement, those that hold it answer and the others are passed over.
    ``listing`` is the command that lists what there is, which the message names; a front
    door without a command line (the MCP server) names its own way instead, from ``bare``."""

    def __init__(self, message: str, listing: str | None = None):
        super().__init__(message + (f" (`{listing}` lists them)" if listing else ""))
        self.bare = message
        self.listing = listing


# -- what a caller can meet besides the stages' errors ----------------------------------------------
class AgtypeError(AgeFactsError, ValueError):
    """Text the database returned as agtype that is not agtype (a ``ValueError`` too)."""


class EndpointDown(ExtractionError):
    """The model endpoint failed several requests in a row, each after all its attempts: it
    is not asked again for a while."""


class ConversationMoved(AgeFactsError):
    """A conversation loaded ``based_on`` one version found another loaded meanwhile: what
    was built on the version read (an added message) must be built again on the new one."""


class NamespaceMoved(AgeFactsError):
    """A write (or a read) reached a server that a namespace left or is leaving
    (:mod:`agefacts.placement`): ``server`` is where it went, ``moving`` says the move is still
    under way (writes are refused until it is done; send them again then)."""

    def __init__(self, message: str, namespace: str, server: str, *, moving: bool):
        super().__init__(message)
        self.namespace = namespace
        self.server = server
        self.moving = moving


class WorkerLost(AgeFactsError):
    """A worker process (:mod:`agefacts.workers`) ended, stopped answering, or could not be
    started: what it was given is done elsewhere (a load prepares it in its own process)."""


class LoadInterrupted(KeyboardInterrupt):
    """A load stopped by an interrupt (Ctrl-C), with the summary of what it had done (a
    :class:`agefacts.summary.Summary`): every conversation in it is loaded entirely, and the one
    being written was rolled back whole. A ``KeyboardInterrupt``, as what caused it."""

    def __init__(self, summary: Any):
        super().__init__("interrupted")
        self.summary = summary


class EmbeddingError(ExtractionError):
    """The embeddings endpoint answered with something that is not embeddings, or the
    database cannot store them."""


class TimeError(ValueError):
    """A time that cannot be read (``agefacts.temporal``). It never reaches a caller: each
    reader turns it into its own error, naming what it read (an :class:`InputError` for a
    file's turn, a :class:`QueryError` for a query's ``valid_at``)."""
