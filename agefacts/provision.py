"""Setting a graph up as its owner for roles that may only load or read, and for tenants: roles
the database keeps to one namespace (:func:`setup`, ``agefacts setup``)."""

from __future__ import annotations

from collections.abc import Sequence

from psycopg import sql

from .db import Database
from .errors import UsageError, need_text
from .graphadmin import TENANT_READS_ONLY, age_version_at_least
from .names import CORE_EDGE_LABELS, CORE_VERTEX_LABELS
from .ontology import Ontology

__all__ = ["setup"]


def setup(
    db: Database,
    ontology: Ontology,
    *,
    app: Sequence[str] = (),
    reader: Sequence[str] = (),
    tenants: Sequence[tuple[str, str]] = (),
) -> tuple[list[str], list[str]]:
    """Set a graph up as its owner, for roles that may only load or read: agefacts' SQL
    objects and the graph (made by connecting), every label the ontology can write with its
    key index, then the grants each ``app`` role needs to load and each ``reader`` role needs
    to read. Each ``tenants`` (role, namespace) is a role the database keeps to that one
    namespace, by row-level security on every label and on agefacts' tables (it loads and
    reads like an app role, its own namespace only: sql/004_tenants.sql). Returns the grants
    run and those this role could not give."""
    if tenants:
        _check_tenants(db, tenants)
    db.ensure_labels(vertex=sorted(CORE_VERTEX_LABELS | set(ontology.entity_types)), edge=sorted(CORE_EDGE_LABELS))
    done: list[str] = []
    refused: list[str] = []
    for role, write in [(r, True) for r in app] + [(r, False) for r in reader] + [(r, True) for r, _ in tenants]:
        ok, no = db.grant(role, write=write)
        done += ok
        refused += no
    if tenants:
        for role, namespace in tenants:
            db.execute(
                "INSERT INTO agefacts.tenants (graph, role, namespace) VALUES (%s, %s, %s) "
                "ON CONFLICT (graph, role) DO UPDATE SET namespace = EXCLUDED.namespace",
                (db.graph, role, namespace),
            )
            done.append(f"tenant: role {role} sees and writes namespace {namespace!r} only")
            # What configures every graph is read-only to a tenant: who is a tenant of what,
            # the moves that route writes, the ontology everyone is answered by, the schema.
            db.execute(
                sql.SQL("REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON {} FROM {}").format(
                    sql.SQL(", ").join(sql.Identifier("agefacts", t) for t in TENANT_READS_ONLY), sql.Identifier(role)
                )
            )
        db.execute("SELECT agefacts.protect_graph(%s)", (db.graph,))
    return done, refused


def _check_tenants(db: Database, tenants: Sequence[tuple[str, str]]) -> None:
    found = db.age_version
    # AGE 1.6.0 applies the policies to what cypher() reads but writes past them (measured).
    if not age_version_at_least(found, (1, 7, 0)):
        raise UsageError(
            f"tenants need Apache AGE 1.7.0 or newer, where cypher() writes obey row-level security; this "
            f"server has {found or 'an unknown version'} (its reads obey it, its writes do not)"
        )
    for role, namespace in tenants:
        need_text(role, "a tenant's role")
        need_text(namespace, "a tenant's namespace")
        if not db.execute("SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %s", (role,)):
            raise UsageError(f"tenant role {role!r} does not exist: CREATE ROLE {role} LOGIN first")
        if db.execute("SELECT rolsuper OR rolbypassrls FROM pg_catalog.pg_roles WHERE rolname = %s", (role,))[0][0]:
            raise UsageError(f"tenant role {role!r} is a superuser or bypasses row-level security: no policy holds it")
