"""Reads from a streaming replica, with a memory's own writes in them. Against servers, give
``AGEFACTS_TEST_REPLICA_DSN`` (a streaming replica of ``AGEFACTS_TEST_DSN``): the replica's
replay is paused after a write, and the memory still reads that write (from the primary, once
the replica has not caught up in time), then from the replica again once it has. Without one
(CI has no replica), the engine itself stands as its replica: a server not in recovery is
always caught up, so reads go there."""

from __future__ import annotations

import os

from agefacts import AsyncMemory, Memory
from agefacts.db import Database

from ..helpers import ONTO, user_turn
from .conftest import free_port


def _said(value: str, at: str):
    from agefacts.models import Turn

    from ..helpers import claim

    return Turn.model_validate(
        user_turn(f"I like {value}.", at, (), [claim("user", "likes", f"I like {value}", value=value)])
    )


def _likes(memory: Memory, ns: str = "rr") -> set:
    return {f.value for f in memory.facts(namespace=ns) if f.predicate == "likes"}


def test_a_memory_reads_its_own_writes_through_its_replica(dsn, graph_name, db):
    real = os.environ.get("AGEFACTS_TEST_REPLICA_DSN")
    replica = real or dsn
    with Memory(dsn, graph_name, ontology=ONTO, replica=replica) as memory:
        memory.add([_said("tea", "2024-01-01T10:00:00Z")], namespace="rr", conversation="c")
        assert _likes(memory) == {"tea"}
        assert memory._reads is not None and memory._reads.served["replica"] >= 1
        if real:
            memory._reads.wait = 0.3
            standby = Database(real, graph_name, create=False).connect()
            standby.execute("SELECT pg_wal_replay_pause()")
            try:
                import time

                while standby.execute("SELECT pg_get_wal_replay_pause_state()")[0][0] != "paused":
                    time.sleep(0.01)
                memory.add([_said("jazz", "2024-01-02T10:00:00Z")], namespace="rr", conversation="c")
                written = memory._reads._written
                behind = standby.execute("SELECT pg_last_wal_replay_lsn() < %s::pg_lsn", (written,))[0][0]
                before = dict(memory._reads.served)
                assert _likes(memory) == {"tea", "jazz"}  # its own write, though the replica lags
                assert behind and memory._reads.served["primary"] == before["primary"] + 1
            finally:
                standby.execute("SELECT pg_wal_replay_resume()")
                standby.close()
            assert _likes(memory) == {"tea", "jazz"}
            assert memory._reads.served["replica"] >= 2  # caught up: the replica again


def test_a_replica_that_cannot_be_reached_leaves_reads_on_the_primary(dsn, graph_name, db):
    gone = f"host=127.0.0.1 port={free_port()} user=postgres dbname=postgres connect_timeout=2"
    with Memory(dsn, graph_name, ontology=ONTO, replica=gone) as memory:
        memory.add([_said("tea", "2024-01-01T10:00:00Z")], namespace="rr", conversation="c")
        assert _likes(memory) == {"tea"}
        assert memory._reads is not None and memory._reads.served == {"replica": 0, "primary": 1}


def test_an_async_memory_reads_through_its_replica_alike(dsn, graph_name, db):
    import asyncio

    replica = os.environ.get("AGEFACTS_TEST_REPLICA_DSN") or dsn

    async def run() -> None:
        async with AsyncMemory(dsn, graph_name, ontology=ONTO, replica=replica) as memory:
            await memory.add([_said("tea", "2024-01-01T10:00:00Z")], namespace="rr", conversation="c")
            facts = await memory.facts(namespace="rr")
            assert {f.value for f in facts if f.predicate == "likes"} == {"tea"}
            assert memory._reads is not None and memory._reads.served["replica"] >= 1

    asyncio.run(run())
