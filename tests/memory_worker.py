"""A process that adds messages to a memory with a model, one add at a time, and can be killed
at a drawn point of an add (for the generated kill test in tests/integration/test_paid_for.py):

    python -m tests.memory_worker DSN GRAPH URL NAMESPACE MESSAGES_JSON sync|async [POINT N]

MESSAGES_JSON is a list of [role, text, at]; after each add it prints ``added I`` (I: the
message's place). POINT is where it kills itself (SIGKILL) at the N-th time it gets there:
``kept`` (what the model answered is committed, nothing written yet), ``writing`` (inside the
write's transaction) or ``written`` (the write committed, what was kept not yet removed)."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys


def main(argv: list[str]) -> None:
    dsn, graph, url, ns, messages, how = argv[:6]
    point, nth = (argv[6], int(argv[7])) if len(argv) > 7 else (None, 0)
    import asyncio

    from agefacts import ledger
    from agefacts.memory import AsyncMemory, Memory
    from agefacts.model_client import LLMClient

    seen = {"n": 0}

    def arrived() -> None:
        seen["n"] += 1
        if seen["n"] == nth:
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)

    class Killer(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said = record.getMessage()
            if (point == "kept" and "kept until written" in said) or (
                point == "written" and "not kept any more" in said
            ):
                arrived()

    log = logging.getLogger("agefacts.memory")
    log.setLevel(logging.DEBUG)
    log.addHandler(Killer())
    if point == "writing":
        for name in ("record", "record_appended"):
            real = getattr(ledger, name)

            def writing(*a, _real=real, **kw):
                arrived()
                return _real(*a, **kw)

            setattr(ledger, name, writing)
    llm = LLMClient(url, "m", retries=1, backoff=0.01, timeout=0.5, give_up_after=0)
    said = [(i, [{"role": role, "content": text, "at": at}]) for i, role, text, at in json.loads(messages)]
    if how == "async":

        async def run() -> None:
            async with AsyncMemory(dsn, graph, llm=llm) as memory:
                for i, msg in said:
                    await memory.add(msg, namespace=ns, conversation="c")
                    print(f"added {i}", flush=True)

        asyncio.run(run())
        return
    with Memory(dsn, graph, llm=llm) as memory:
        for i, msg in said:
            memory.add(msg, namespace=ns, conversation="c")
            print(f"added {i}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
