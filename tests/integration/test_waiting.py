"""A read that waits on someone else says so after a few seconds, instead of hanging in
silence: a client idle in a transaction blocked every command, and nothing said why."""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import sys
import threading
import time

import psycopg

from agefacts.load import load_paths

from ..helpers import EXAMPLES, ONTO


def test_a_query_waiting_on_another_clients_transaction_says_so_and_then_answers(db, dsn, graph_name):
    load_paths(db, [EXAMPLES / "nina-01.json"], ONTO)
    blocker = psycopg.connect(dsn, autocommit=True)
    holder = blocker.info.backend_pid
    try:
        blocker.execute("BEGIN")
        blocker.execute(f'LOCK TABLE "{graph_name}"."Conversation" IN ACCESS EXCLUSIVE MODE')
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AGEFACTS_", "PG"))}
        env |= {"AGEFACTS_DSN": dsn, "AGEFACTS_GRAPH": graph_name}
        query = subprocess.Popen(
            [sys.executable, "-m", "agefacts", "query", "MATCH (c:Conversation) RETURN count(c)"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # Waited for as it comes (the notice follows 5 s of waiting, and a 2 s look on a
        # second connection), not for a fixed time that a busy machine may overrun.
        said: queue.Queue[str] = queue.Queue()
        reader = threading.Thread(target=lambda: [said.put(line) for line in query.stderr], daemon=True)
        reader.start()
        lines: list[str] = []
        deadline = time.monotonic() + 120
        while not any("Ctrl-C to stop" in line for line in lines):
            assert time.monotonic() < deadline, f"no notice within 120 s: {lines}"
            with contextlib.suppress(queue.Empty):
                lines.append(said.get(timeout=1))
        assert query.poll() is None  # still waiting for the blocker
        blocker.execute("COMMIT")
        out = query.stdout.read()
        query.wait(timeout=60)
        reader.join(10)
        while not said.empty():
            lines.append(said.get())
        err = "".join(lines)
    finally:
        blocker.close()
    assert query.returncode == 0, err
    assert "1\n" in out
    assert "no answer from the database for 5 s" in err
    if "nor to a second connection" in err:  # the embedded engine: one session, held by the blocker
        assert "a transaction left open makes every other client wait" in err
    else:  # a server: the lock, and who holds it
        assert f"waits for a lock held by process {holder}" in err
