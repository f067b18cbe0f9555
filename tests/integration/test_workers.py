"""Preparing in worker processes (agefacts.workers): a load, or a compile, in several processes
writes what one process writes, and runs nothing of the caller's but agefacts."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given

from agefacts.cli import main
from agefacts.compile import compile_conversation
from agefacts.corpus import edit, generate
from agefacts.load import Loader
from agefacts.models import Conversation
from agefacts.reads import digest

from ..helpers import NUMBERS, ONTO, VIAS, fuzz, numbers_conversation
from .test_robustness import conversations


def _outcomes(outs):
    return [(o.source, o.status, o.reason, o.counts, o.written, o.rejections) for o in outs]


@pytest.mark.parametrize("via", VIAS)
def test_a_load_prepared_in_worker_processes_writes_what_one_process_writes(db, other_graph, via):
    raw = generate(900, 6, seed=3)
    convs = [Conversation.model_validate(c) for c in raw]
    # Edited versions of some (each replaces what its old version wrote), one unchanged
    # (skipped), and another version of an edited one in the same run (refused, in its place).
    edited = [Conversation.model_validate(edit(raw[i], i)) for i in (3, 40, 77)]
    again = Conversation.model_validate(edit(raw[3], 99))
    runs = [
        [(f"a:{c.id}", c) for c in convs],
        [(f"b:{c.id}", c) for c in [*edited, convs[9], again]],
    ]
    results = {}
    for workers, target in ((1, db), (2, other_graph("two"))):
        got = []
        for items in runs:
            loader = Loader(target, ONTO, via=via, batch_statements=150, workers=workers)
            got.append(_outcomes(loader.load_many(items)))
            assert not loader.fallbacks
        results[workers] = (got, digest(target))
    assert results[1] == results[2]
    assert {o[1] for o in results[2][0][0]} == {"loaded"}
    assert [o[1] for o in results[2][0][1]] == ["loaded"] * 3 + ["skipped", "failed"]


def test_worker_processes_do_not_run_the_callers_script_again(dsn, graph_name, tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(c) + "\n" for c in generate(1_200, 6)))
    # A script without an `if __name__ == "__main__"` guard: a worker that imported it again
    # would say so, and load again.
    script = tmp_path / "mine.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import os
            print("script ran in", os.getpid(), flush=True)
            from agefacts import Database, load_paths, default_ontology
            db = Database({dsn!r}, {graph_name!r}).connect()
            summary = load_paths(db, [{str(corpus)!r}], default_ontology(), batch_statements=200, workers=2)
            print(summary.count("loaded"))
            """
        )
    )
    run = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=os.environ.copy(), timeout=300
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert [line for line in lines if line.startswith("script ran in")] == [f"script ran in {lines[0].split()[-1]}"]
    assert lines[-1] == "200", run.stdout


def test_compile_in_worker_processes_prints_what_one_process_prints(tmp_path, capsys):
    corpus = tmp_path / "corpus.jsonl"
    good = [json.dumps(c) for c in generate(600, 6, seed=4)]
    # A line that is not JSON and one that is no conversation: said, in order, after the rest.
    corpus.write_text("\n".join([*good[:30], "{not json", *good[30:60], '{"id": 3}', *good[60:]]) + "\n")
    printed = {}
    for n in ("1", "2"):
        code = main(["compile", "--workers", n, str(corpus)])
        printed[n] = (code, *capsys.readouterr())
    assert printed["1"] == printed["2"]
    code, out, err = printed["2"]
    assert code == 1 and out.count("MERGE (n:Conversation ") == 100
    assert re.findall(r"corpus.jsonl:(\d+)", err) == ["31", "62"], err


def test_a_load_whose_worker_process_is_killed_prepares_the_rest_itself(db, other_graph, monkeypatch, caplog):
    import signal

    from agefacts import workers

    convs = [Conversation.model_validate(c) for c in generate(900, 6, seed=8)]
    pools = []
    real_start = workers.start

    def start(n, onto, **kw):
        pool = real_start(n, onto, **kw)
        pools.append(pool)
        return pool

    monkeypatch.setattr(workers, "start", start)
    loader = Loader(db, ONTO, batch_statements=150, workers=2)
    # Outcomes batch by batch: a first load (agefacts.firstload) reports none before its end.
    loader.first_load = False
    outs = []
    for o in loader.load_many((c.id, c) for c in convs):
        outs.append(o)
        if len(outs) == 1:
            # The pool this load started (from its second batch on): its processes are killed.
            procs = pools[0].processes
            assert procs
            for p in procs:
                os.kill(p.pid, signal.SIGKILL)
    assert len(pools) == 1 and {o.status for o in outs} == {"loaded"} and len(outs) == len(convs)
    assert "a worker process that prepares batches ended" in caplog.text
    for p in procs:  # the fault happened (its status comes through the fork server: waited for)
        p.join(30)
        # Killed; 255 is what multiprocessing says when the fork server could not pass the
        # status of a process killed under it (seen once in 50 runs on a busy machine).
        assert not p.is_alive() and p.exitcode in (-signal.SIGKILL, 255), [q.exitcode for q in procs]
    one = other_graph("one")
    list(Loader(one, ONTO, batch_statements=150).load_many((c.id, c) for c in convs))
    assert digest(db) == digest(one)


def test_a_load_whose_worker_process_stops_answering_prepares_the_rest_itself(db, other_graph, monkeypatch, caplog):
    import signal

    from agefacts import workers

    convs = [Conversation.model_validate(c) for c in generate(600, 6, seed=9)]
    pools = []
    real_start = workers.start

    def start(n, onto, **kw):
        pool = real_start(n, onto, **kw)
        pools.append(pool)
        # Stopped as a process is by a debugger, or by a system short of memory swapping it out:
        # alive, holding its batch, answering nothing.
        for p in pool.processes:
            os.kill(p.pid, signal.SIGSTOP)
        return pool

    monkeypatch.setattr(workers, "start", start)
    loader = Loader(db, ONTO, batch_statements=150, workers=2, worker_timeout=3.0)
    outs = list(loader.load_many((c.id, c) for c in convs))
    assert len(pools) == 1 and {o.status for o in outs} == {"loaded"} and len(outs) == len(convs)
    assert "no answer within 3 s" in caplog.text
    for p in pools[0].processes:
        p.join(5)
        assert p.exitcode == -signal.SIGKILL  # killed, not left stopped
    one = other_graph("one")
    list(Loader(one, ONTO, batch_statements=150).load_many((c.id, c) for c in convs))
    assert digest(db) == digest(one)


@fuzz(60)
@given(conversations("sent"))
def test_a_conversation_sent_to_a_worker_as_its_json_compiles_as_itself(conv):
    # A worker gets the JSON that was hashed, not the model: it must be the same conversation.
    again = Conversation.model_validate_json(conv.model_dump_json())
    assert again == conv
    assert compile_conversation(again, ONTO) == compile_conversation(conv, ONTO)


def test_numbers_sent_to_a_worker_as_json_compile_as_themselves():
    conv = numbers_conversation(NUMBERS)
    again = Conversation.model_validate_json(conv.model_dump_json())
    assert compile_conversation(again, ONTO) == compile_conversation(conv, ONTO)
