"""Least privilege: an owner role sets a graph up, an app role loads, a read-only role reads,
each with only its grants, and a role lacking one is told every grant it lacks."""

from __future__ import annotations

import os
import uuid

import psycopg

from agefacts.cli import main
from agefacts.db import Database

from ..helpers import EXAMPLES

SERVER = bool(os.environ.get("AGEFACTS_TEST_DSN"))


def _as(dsn: str, **fields: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    info.update(fields)
    return psycopg.conninfo.make_conninfo(**info)


def test_three_roles_each_with_only_its_grants(dsn, capsys):
    """On a server: the three roles. The embedded engine serves every client as one superuser
    whatever user it names, so there the test pins that quirk instead (roles cannot be told
    apart on it; the grants themselves are tested on both engines below)."""
    if not SERVER:
        with psycopg.connect(_as(dsn, user="af_someone_else"), autocommit=True) as other:
            assert other.execute("SELECT current_user, session_user").fetchone() == ("postgres", "postgres")
        return
    tag = uuid.uuid4().hex[:8]
    owner, app, reader, nobody = (f"af_{who}_{tag}" for who in ("owner", "app", "reader", "nobody"))
    database = f"af_roles_{tag}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        for role in (owner, app, reader, nobody):
            admin.execute(psycopg.sql.SQL("CREATE ROLE {} LOGIN PASSWORD 'pw'").format(psycopg.sql.Identifier(role)))
        admin.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(database)))
    try:
        with psycopg.connect(_as(dsn, dbname=database), autocommit=True) as admin:
            # What only a superuser can give: the extension, and AGE's catalog to the roles.
            admin.execute("CREATE EXTENSION age")
            for role in (owner, app, reader):
                ident = psycopg.sql.Identifier(role)
                admin.execute(psycopg.sql.SQL("GRANT USAGE ON SCHEMA ag_catalog TO {}").format(ident))
                admin.execute(psycopg.sql.SQL("GRANT SELECT ON ag_catalog.ag_graph, ag_catalog.ag_label TO {}").format(ident))  # fmt: skip
            admin.execute(
                psycopg.sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(
                    psycopg.sql.Identifier(database), psycopg.sql.Identifier(owner)
                )
            )
        at = {role: _as(dsn, dbname=database, user=role, password="pw") for role in (owner, app, reader, nobody)}
        graph = ["--graph", "roles_graph"]
        # Before the owner set the graph up, the app is told that, and who does it.
        assert main(["load", str(EXAMPLES), "--dsn", at[app], *graph]) == 1
        err = capsys.readouterr().err
        assert "graph 'roles_graph' is not set up in this database" in err and "agefacts setup" in err
        assert "GRANT CREATE ON DATABASE" not in err
        # The owner sets up and grants; the app loads; the reader reads.
        assert main(["setup", "--dsn", at[owner], *graph, "--app", app, "--reader", reader]) == 0
        assert "granted: GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA" in capsys.readouterr().out
        assert main(["load", str(EXAMPLES), "--dsn", at[app], *graph]) == 0
        assert capsys.readouterr().out.startswith("conversations: 25 loaded")
        assert main(["facts", "user", "--namespace", "nina", "--dsn", at[reader], *graph, "--format", "json"]) == 0
        assert '"Bergen"' in capsys.readouterr().out
        # The reader's forget names what forgetting needs, not the table that refused it.
        assert main(["forget", "--namespace", "nina", "--dsn", at[reader], *graph]) == 1
        err = capsys.readouterr().err
        assert "this role may not change graph 'roles_graph'" in err and "permission denied for table" not in err
        assert f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "roles_graph" TO "{reader}"' in err
        # A role that is no superuser is not asked to LOAD the library (refused, and logged
        # as an error by the server at every connection): no statement of its connect fails.
        refused: list[str] = []
        real_run = Database._run

        def run(self, stmt, args=None, names=None):
            try:
                return real_run(self, stmt, args, names)
            except psycopg.Error as exc:
                refused.append(str(exc))
                raise

        Database._run = run  # type: ignore[method-assign]
        try:
            Database(at[reader], "roles_graph", create=False).connect().close()
        finally:
            Database._run = real_run  # type: ignore[method-assign]
        assert refused == []
        # An index that only speeds reading up (an edge end, an entity label's namespace), gone
        # from a graph (one AGE 1.6.0 made, before agefacts made them): the app, which may not
        # make one, still loads, and the owner's set-up makes them again.
        dropped = _drop_speed_indexes(_as(dsn, dbname=database))
        assert main(["load", str(EXAMPLES), "--dsn", at[app], *graph, "--force"]) == 0
        assert capsys.readouterr().out.startswith("conversations: 25 loaded")
        assert _drop_speed_indexes(_as(dsn, dbname=database), drop=False) == []
        assert main(["setup", "--dsn", at[owner], *graph, "--app", app, "--reader", reader]) == 0
        capsys.readouterr()
        assert len(_drop_speed_indexes(_as(dsn, dbname=database), drop=False)) == len(dropped) == 2
        # The reader may not load; a role with nothing is told all it lacks, in one sentence.
        assert main(["load", str(EXAMPLES), "--dsn", at[reader], *graph]) == 1
        err = capsys.readouterr().err
        assert "may not load into graph 'roles_graph'" in err and "Traceback" not in err
        assert f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "roles_graph" TO "{reader}"' in err
        assert main(["facts", "user", "--namespace", "nina", "--dsn", at[nobody], *graph]) == 1
        err = capsys.readouterr().err
        assert f'GRANT USAGE ON SCHEMA ag_catalog TO "{nobody}"' in err and "Traceback" not in err
        assert f'GRANT SELECT ON ALL TABLES IN SCHEMA "roles_graph" TO "{nobody}"' in err
        # No role but the owner ran DDL: the app loaded into the labels the owner made.
        with psycopg.connect(_as(dsn, dbname=database), autocommit=True) as admin:
            owners = admin.execute(
                "SELECT DISTINCT pg_get_userbyid(c.relowner) FROM pg_class c JOIN pg_namespace n "
                "ON n.oid = c.relnamespace WHERE n.nspname IN ('roles_graph', 'agefacts') AND c.relkind = 'r'"
            ).fetchall()
        assert owners == [(owner,)]
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(psycopg.sql.Identifier(database)))  # fmt: skip
            for role in (owner, app, reader, nobody):
                admin.execute(psycopg.sql.SQL("DROP ROLE IF EXISTS {}").format(psycopg.sql.Identifier(role)))


def _drop_speed_indexes(dsn: str, drop: bool = True) -> list[str]:
    """The index on SUBJECT_OF's start_id and on Person's namespace in roles_graph, dropped
    (as the superuser ``dsn`` names) unless ``drop`` is false; returns their names."""
    with psycopg.connect(dsn, autocommit=True) as admin:
        names = [
            name
            for (name,) in admin.execute(
                "SELECT i.indexrelid::regclass::text FROM pg_index i "
                "JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
                "JOIN pg_class ic ON ic.oid = i.indexrelid "
                "LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] "
                "WHERE n.nspname = 'roles_graph' AND ((c.relname = 'SUBJECT_OF' AND a.attname = 'start_id') "
                "OR (c.relname = 'Person' AND pg_get_indexdef(i.indexrelid) LIKE '%\"namespace\"%'))"
            ).fetchall()
        ]
        if drop:
            for name in names:
                admin.execute(f"DROP INDEX {name}")
    return names


def test_the_grants_a_role_lacks_are_named_and_given(db):
    """On both engines: a new role lacks AGE's catalog, agefacts' tables and the graph's; the
    owner's grant gives what it may, and afterwards nothing is missing."""
    role = f"af_new_{uuid.uuid4().hex[:8]}"
    db.execute(psycopg.sql.SQL("CREATE ROLE {}").format(psycopg.sql.Identifier(role)))
    try:
        db.ensure_labels(vertex=["Person"])
        missing = db.missing_privileges(write=True, role=role)
        assert f'GRANT USAGE ON SCHEMA ag_catalog TO "{role}"' in missing
        assert f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "{db.graph}" TO "{role}"' in missing
        assert f'GRANT USAGE ON ALL SEQUENCES IN SCHEMA "{db.graph}" TO "{role}"' in missing
        assert db.missing_privileges(write=False, role=role) != missing
        done, refused = db.grant(role, write=True)  # the test's role is a superuser: it may grant all
        assert refused == [] and set(missing) <= set(done)
        assert db.missing_privileges(write=True, role=role) == []
    finally:
        with psycopg.connect(db.dsn, autocommit=True) as admin:
            admin.execute(psycopg.sql.SQL("DROP OWNED BY {}").format(psycopg.sql.Identifier(role)))
            admin.execute(psycopg.sql.SQL("DROP ROLE {}").format(psycopg.sql.Identifier(role)))
