"""Bringing a graph written by an earlier agefacts up to this one's keys.

Keys now carry their namespace's key space (agefacts.keys), which the database checks for
tenants. A graph written before holds keys of the old form: this agefacts would read none of
them and write a second copy of everything beside them, so it refuses such a graph
(:meth:`agefacts.db.Database.check_keys`) until :func:`migrate` has run once. Everything in the graph is derived
from the conversations agefacts keeps as they were loaded (``agefacts export`` writes the
same), so migrating is loading them again into the emptied graph, in one transaction: a
migration that fails or is killed leaves the graph as it was.
"""

from __future__ import annotations

from collections.abc import Callable

from psycopg import sql

from . import ledger
from .db import Database
from .errors import AgeFactsError
from .load import Loader

__all__ = ["migrate"]


def migrate(db: Database, progress: Callable[[str], None] | None = None) -> int:
    """Load the graph's kept conversations again under this agefacts' keys, in one
    transaction; returns how many were loaded (0: the graph's keys were current already).
    Vectors of messages are kept (a message's key changes by its space alone); tenants keep
    their namespaces and the database's policies are renewed for them."""
    say = progress or (lambda _: None)
    if not db.graph_exists() or not db.keys_stale():
        say(f"migrate: graph {db.graph!r} holds this agefacts' keys already")
        return 0
    ontology = ledger.graph_ontology_or_shipped(db)
    logged = db.execute(
        "SELECT namespace, conversation, source FROM agefacts.ingest_log WHERE graph = %s ORDER BY 1, 2", (db.graph,)
    )
    sources = {(ns, conv): source for ns, conv, source in logged}
    # Read before anything is removed: a conversation loaded before agefacts kept them
    # cannot be loaded again, and is said here while the graph is still as it was.
    conversations = [c for ns in sorted({ns for ns, _ in sources}) for c in ledger.export(db, ns)]
    tenants = db.execute("SELECT EXISTS (SELECT 1 FROM agefacts.tenants WHERE graph = %s)", (db.graph,))[0][0]
    g = sql.Identifier(db.graph)
    with db.transaction():
        db.execute(sql.SQL("DELETE FROM {}._ag_label_edge").format(g))
        db.execute(sql.SQL("DELETE FROM {}._ag_label_vertex").format(g))
        for table in ("ingest_log", "ingest_turns"):
            db.execute(sql.SQL("DELETE FROM agefacts.{} WHERE graph = %s").format(sql.Identifier(table)), (db.graph,))
        if db.execute("SELECT to_regclass('agefacts.message_vectors') IS NOT NULL")[0][0]:
            db.execute(
                "UPDATE agefacts.message_vectors SET message = 'msg:' || agefacts.key_space(namespace) "
                "|| substr(message, 5) WHERE graph = %s AND length(message) = 4 + 32",
                (db.graph,),
            )
        say(f"migrate: graph {db.graph!r} emptied; loading its {len(conversations)} kept conversation(s) again")
        loader = Loader(db, ontology)
        pairs = [(sources.get((c.namespace, c.id)) or f"{c.namespace}:{c.id}", c) for c in conversations]
        for out in loader.load_many(pairs):
            if out.status != "loaded":
                raise AgeFactsError(
                    f"migrate: conversation {out.conversation!r} of namespace {out.namespace!r} did not load "
                    f"again ({out.reason}); graph {db.graph!r} is left as it was"
                )
        if tenants:
            db.execute("SELECT agefacts.protect_graph(%s)", (db.graph,))
    db.keys_checked = True
    say(f"migrate: graph {db.graph!r} holds {len(conversations)} conversation(s) under this agefacts' keys")
    return len(conversations)
