"""The compiler: deterministic, escaped, one statement per line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agefacts.cli import main
from agefacts.compile import compile_conversation
from agefacts.cypher import literal
from agefacts.errors import CompileError
from agefacts.inputs import read_conversations
from agefacts.ontology import default_ontology

from ..helpers import EXAMPLES, claim, conversation, user_turn

GOLDEN = Path(__file__).parents[1] / "golden"


def examples():
    return [c for _, c in read_conversations([EXAMPLES])]


@pytest.mark.parametrize("conv", examples(), ids=lambda c: c.id)
def test_compiled_examples_match_the_checked_in_golden_files(conv):
    text = compile_conversation(conv, default_ontology())
    path = GOLDEN / f"{conv.id}.cypher"
    if os.environ.get("AGEFACTS_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


def test_compiling_is_identical_under_different_hash_seeds():
    outputs = set()
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run(
            [sys.executable, "-m", "agefacts", "compile", *sorted(str(p) for p in EXAMPLES.glob("*.json"))],
            capture_output=True,
            env=env,
            check=True,
        )
        outputs.add(proc.stdout)
    assert len(outputs) == 1 and len(outputs.pop()) > 10_000


def test_no_text_can_end_the_dollar_quote_or_the_line():
    hostile = "it's $$ and $tag$ and \\ and \"x\"\nnew line\u2028sep'); DROP TABLE x; --"
    conv = conversation(
        "c$$1",
        [user_turn(hostile, "2026-01-01T00:00:00Z", [], [claim("user", "likes", hostile, value=hostile)])],
        namespace="ns$'x",
        title=hostile,
    )
    text = compile_conversation(conv, default_ontology())
    assert "$" not in text
    assert all(line.startswith(("MERGE", "MATCH", "//")) for line in text.splitlines())


def test_nul_and_lone_surrogates_are_refused_not_mangled():
    with pytest.raises(CompileError, match="NUL"):
        literal("a\x00b")
    with pytest.raises(CompileError, match="surrogate"):
        literal("a\ud800b")


def test_compile_command_prints_one_statement_per_line(capsys):
    path = EXAMPLES / "ann-01.json"
    assert main(["compile", str(path)]) == 0
    out = capsys.readouterr().out
    assert out == (GOLDEN / "ann-01.cypher").read_text(encoding="utf-8")
    assert out.splitlines()[-1].startswith("// follow-up") is False  # the placeholder was named
    assert main(["compile", str(EXAMPLES / "tess-01.json")]) == 0
    tail = capsys.readouterr().out.splitlines()[-2:]
    assert all(line.startswith("// follow-up {") for line in tail)
