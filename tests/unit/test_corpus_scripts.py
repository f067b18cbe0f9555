"""The converters of public corpora (scripts/): what they make of a corpus's own forms."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dialogre_turns_said_by_several_speakers_keep_only_what_was_said():
    """DialogRE writes a line said together as "Speaker 1, Speaker 2: Hi": the labels are who
    said it, not words of it, with names or without (they were kept as text, and a question
    about "Speaker 1" then found these lines first)."""
    dialre = _script("dialogre")
    turns = ["Speaker 1: I like Kathy.", "Speaker 1, Speaker 2: Hi!", "Speaker 3 ,Speaker 1 : Kathy is nice."]
    relations = [{"x": "Speaker 1", "y": "Kathy", "r": ["per:positive_impression"]}]
    for names in (True, False):
        (conv,), questions = dialre.convert([(turns, relations)], names=names)
        assert [t["text"] for t in conv["turns"]] == ["I like Kathy.", "Hi!", "Kathy is nice."]
        assert [t.get("name") for t in conv["turns"]] == (
            ["Speaker 1", "Speaker 1", "Speaker 3"] if names else [None, None, None]
        )
        # A line said together is said by each of its speakers.
        assert [e["message"] for e in questions[0]["evidence"]] == [0, 2]
