"""Fixtures of the tests that use the engine: one real embedded AGE engine for the whole
session, one graph per test (and more on request), each dropped afterwards.

The engine runs from its own home folder and a free port, so the tests never touch a user's
engine or data; under pytest-xdist (make test runs two workers) each worker starts its own.
Set AGEFACTS_TEST_DSN to run the same tests against another PostgreSQL with AGE.
"""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

import pytest

from agefacts.db import Database
from agefacts.engine import Engine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def engine_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("agefacts-home")


@pytest.fixture(scope="session")
def dsn(engine_home):
    if os.environ.get("AGEFACTS_TEST_DSN"):
        yield os.environ["AGEFACTS_TEST_DSN"]
        return
    engine = Engine(home=engine_home)
    state, _ = engine.start(data="memory", port=free_port())
    try:
        yield state.dsn
    finally:
        engine.stop()


@pytest.fixture
def graph_name() -> str:
    return "t_" + uuid.uuid4().hex[:12]


@pytest.fixture
def db(dsn, graph_name):
    """A connected Database on a graph of this test's own, dropped afterwards."""
    database = Database(dsn, graph_name).connect()
    try:
        yield database
    finally:
        database.drop_graph()
        database.close()


@pytest.fixture
def other_graph(dsn, graph_name):
    """Connected Databases on further graphs of this test's own (``other_graph("fresh")``),
    for comparing one graph with another; dropped and closed afterwards."""
    opened: list[Database] = []

    def make(suffix: str) -> Database:
        database = Database(dsn, f"{graph_name}_{suffix}").connect()
        opened.append(database)
        return database

    yield make
    for database in opened:
        database.drop_graph()
        database.close()


@pytest.fixture
def cli_env(monkeypatch, dsn, graph_name):
    """Environment for running the CLI in-process against this test's graph."""
    monkeypatch.setenv("AGEFACTS_DSN", dsn)
    monkeypatch.setenv("AGEFACTS_GRAPH", graph_name)
    Database(dsn, graph_name).connect().close()  # the graph exists, as after a first load
    yield
    Database(dsn, graph_name).connect().drop_graph()


@pytest.fixture
def paths(dsn, graph_name):
    """A graph per load path, shared by the examples (each story has a namespace of its own)."""
    with Database(dsn, graph_name + "_b") as bulk, Database(dsn, graph_name + "_c") as cypher:
        yield bulk, cypher
        bulk.drop_graph()
        cypher.drop_graph()
