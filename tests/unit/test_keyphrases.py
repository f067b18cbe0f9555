"""The statistical extractor and the rules of keyphrases, with no engine: determinism across
runs and hash seeds, spans that index their mention, co-occurrence counts and PMI, and the
words of a question that are looked up as a topic."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from agefacts.compile import cooccurrence
from agefacts.corpus import generate
from agefacts.gate import gate_keyphrases
from agefacts.keyphrases import StatisticalExtractor
from agefacts.keys import keyphrase_key, keyphrase_text
from agefacts.models import Conversation, Keyphrase, KeyphraseHit
from agefacts.retrieve import topic_texts

from ..helpers import EXAMPLES

EXTRACTOR = StatisticalExtractor()

WORDS = ["sourdough", "Starter", "rye", "flour", "Bergen", "Zoë", "naïve", "café", "東京", "the", "and", "I", "is"]
# Messages as people type them: words of several scripts, punctuation, line breaks, runs of
# spaces, typographic quotes and emoji.
TEXTS = st.lists(
    st.one_of(
        st.sampled_from(WORDS),
        st.sampled_from([",", ".", "!", "?", "\n", "  ", "\u2019s", "\u201cok\u201d", "\U0001f35e", "-", "\t"]),
        st.text(min_size=1, max_size=8),
    ),
    max_size=30,
).map(" ".join)


def _run(texts: list[str]) -> str:
    return json.dumps([[k.model_dump() for k in EXTRACTOR.keyphrases(t)] for t in texts], ensure_ascii=False)


@settings(max_examples=150, deadline=None)
@given(text=TEXTS)
def test_every_keyphrase_is_found_where_its_span_says_in_characters_and_bytes(text):
    found = EXTRACTOR.keyphrases(text)
    assert found == StatisticalExtractor().keyphrases(text)  # a second extractor, the same output
    assert len(found) <= EXTRACTOR.top
    assert [(-k.score, k.mention) for k in found] == sorted((-k.score, k.mention) for k in found)
    hits, refused = gate_keyphrases(0, text, found)
    assert refused == []
    for hit in hits:
        assert 0.0 < hit.score <= 1.0
        assert text[hit.char_start : hit.char_end] == hit.mention
        assert text.encode()[hit.byte_start : hit.byte_end] == hit.mention.encode()
        assert keyphrase_text(hit.mention) == hit.text != ""


SCRIPT = """
import json, sys
from agefacts.keyphrases import StatisticalExtractor
x = StatisticalExtractor()
texts = json.load(sys.stdin)
sys.stdout.write(json.dumps([[k.model_dump() for k in x.keyphrases(t)] for t in texts], ensure_ascii=False))
"""


@pytest.mark.slow
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(generated=st.lists(TEXTS, min_size=5, max_size=25))
def test_the_same_input_gives_byte_identical_output_across_runs_and_hash_seeds(generated):
    examples = [
        t.text for p in sorted(EXAMPLES.glob("*.json")) for t in Conversation.model_validate_json(p.read_text()).turns
    ]
    bench = [t["text"] for c in generate(60) for t in c["turns"]]
    texts = examples + bench + generated
    outputs = {_run(texts)}
    for seed in ("0", "4242"):
        proc = subprocess.run(
            [sys.executable, "-c", SCRIPT],
            input=json.dumps(texts),
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
            check=True,
        )
        outputs.add(proc.stdout)
    assert len(outputs) == 1
    assert any(json.loads(next(iter(outputs))))  # it found something


def test_a_run_keeps_earlier_keyphrases_and_the_model_recordings_and_redo_makes_them_again():
    conv = Conversation.model_validate_json((EXAMPLES / "ann-01.json").read_text())
    first = asyncio.run(EXTRACTOR.conversation(conv)).conversation
    users = [t for t in first.turns if t.speaker == "user"]
    assert all(t.keyphrases for t in users)
    assert [t.recorded for t in first.turns] == [t.recorded for t in conv.turns]  # the model's work is kept
    assert all(k.extractor == EXTRACTOR.provenance for t in users for k in t.keyphrases or [])
    assert EXTRACTOR.provenance.startswith("statistical:yake-")
    assert EXTRACTOR.pending(first) == 0 and EXTRACTOR.pending(first, redo=True) == len(users)
    again = asyncio.run(EXTRACTOR.conversation(first))
    assert again.kept == len(users) and again.conversation == first


def test_a_keyphrase_not_in_its_message_or_without_words_is_refused_and_a_repeat_keeps_its_best_score():
    kps = [
        Keyphrase(mention="rye bread", score=0.4),
        Keyphrase(mention="Rye  Bread", score=0.9),  # the same words: one keyphrase
        Keyphrase(mention="bagels", score=0.8),
        Keyphrase(mention="!!", score=0.8),
    ]
    hits, refused = gate_keyphrases(3, "I bake rye bread. Rye  Bread!!", kps)
    assert [(h.text, h.mention, h.score, h.extractor) for h in hits] == [("rye bread", "Rye  Bread", 0.9, "authored")]
    assert [(r.reason, r.kind, r.turn) for r in refused] == [
        ("not_in_message", "keyphrase", 3),
        ("no_words", "keyphrase", 3),
    ]
    with pytest.raises(ValidationError, match="less than or equal to 1"):
        Keyphrase(mention="x", score=1.5)


def _hit(turn: int, text: str) -> KeyphraseHit:
    return KeyphraseHit(
        turn=turn,
        text=text,
        mention=text,
        char_start=0,
        char_end=1,
        byte_start=0,
        byte_end=1,
        match="exact",
        score=1.0,
        extractor="authored",
    )


def test_cooccurrence_counts_messages_and_gives_their_pmi_over_the_conversations_messages():
    # Four messages with keyphrases: a+b, a+b, a+c, d.
    hits = [_hit(0, "a"), _hit(0, "b"), _hit(1, "a"), _hit(1, "b"), _hit(2, "a"), _hit(2, "c"), _hit(5, "d")]
    got = cooccurrence("ns", hits)
    k = {t: keyphrase_key("ns", t) for t in "abcd"}
    pair = lambda x, y: tuple(sorted((k[x], k[y])))  # noqa: E731
    assert set(got) == {pair("a", "b"), pair("a", "c")}
    assert got[pair("a", "b")] == (2, round(math.log(2 * 4 / (3 * 2)), 6))
    assert got[pair("a", "c")] == (1, round(math.log(1 * 4 / (3 * 1)), 6))
    assert cooccurrence("ns", hits[::-1]) == got


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 30), st.integers(1, 100)), max_size=80))
def test_cooccurrence_grows_with_the_messages_not_with_the_square_of_their_keyphrases(said):
    """Twenty keyphrases in one message made 190 pairs: each message now pairs its best five
    (by score, then text), so a message makes at most ten, whatever order the hits come in."""
    hits = [_hit(turn, f"w{word}").model_copy(update={"score": score / 100}) for turn, word, score in said]
    got = cooccurrence("ns", hits)
    turns = {h.turn for h in hits}
    assert sum(count for count, _ in got.values()) <= 10 * len(turns)
    assert cooccurrence("ns", hits[::-1]) == got
    for turn in turns:
        best: dict[str, float] = {}
        for h in hits:
            if h.turn == turn:
                best[h.text] = max(h.score, best.get(h.text, -1.0))
        top = sorted(best, key=lambda t: (-best[t], keyphrase_key("ns", t)))[:5]
        for a, b in itertools.combinations(top, 2):
            assert tuple(sorted((keyphrase_key("ns", a), keyphrase_key("ns", b)))) in got


def test_a_question_is_looked_up_by_its_runs_of_words_that_are_not_all_question_words():
    assert topic_texts("What did I say about sourdough?") == [
        "what did i say about sourdough",
        "did i say about sourdough",
        "i say about sourdough",
        "say about sourdough",
        "about sourdough",
        "sourdough",
    ]
    assert "sourdough starter" in topic_texts("Tell me about my Sourdough  starter")
    assert topic_texts("what did I say about it?") == []
    assert keyphrase_text("Co-op\u2019s  Bread") == "co op s bread" == topic_texts("co-op's bread")[0]


def test_the_bench_measures_the_extractor_on_the_benchmark_corpus_by_its_messages():
    from agefacts.bench import statistical_rate

    convs = [Conversation.model_validate(c) for c in generate(200)]
    users = sum(1 for c in convs for t in c.turns if t.speaker == "user")
    got = statistical_rate(convs, cap=30)
    assert got is not None and 30 <= got["messages"] < users
    assert got["keyphrases"] > got["messages"] and got["messages_per_s"] > 0


def test_a_message_the_library_fails_on_is_that_turns_error_and_the_others_go_on(monkeypatch):
    x = StatisticalExtractor()

    def extract(text: str):
        if "boom" in text:
            raise ZeroDivisionError("float division by zero")
        return [("bread", 0.1)]

    monkeypatch.setattr(x._kw, "extract_keywords", extract)
    conv = Conversation.model_validate(
        {
            "id": "c",
            "namespace": "n",
            "turns": [{"speaker": "user", "text": "boom bread"}, {"speaker": "user", "text": "more bread"}],
        }
    )
    calls: list[bool] = []
    out = asyncio.run(x.conversation(conv, on_turn=calls.append))
    assert calls == [False, True]  # the fault happened, and was counted as a failed turn
    assert out.errors == [
        "conversation 'c' turn 0: YAKE failed on this message (ZeroDivisionError: float division by zero)"
    ]
    assert [t.keyphrases for t in out.conversation.turns][0] is None  # tried again next run
    assert [k.mention for k in out.conversation.turns[1].keyphrases or []] == ["bread"]


def test_contractions_with_a_typographic_apostrophe_leave_no_fragment_keyphrases():
    """YAKE split "don’t" at the curly apostrophe: "n’t", "’re" and "’re watching" were 2.9%
    of the keyphrases of a dialogue corpus (none with straight apostrophes)."""
    x = StatisticalExtractor()
    for curly in (
        "I don’t think they’re watching the game tonight, we’re busy.",
        "Caroline isn’t coming; she’s at the LGBTQ support group’s meeting.",
        "You’ve got to see it, it’s wonderful and I’ll bring snacks.",
    ):
        straight = curly.replace("’", "'")
        got = [k.mention for k in x.keyphrases(curly)]
        assert got, curly
        assert not [m for m in got if m.startswith("’") or "n’t" in m or " ’" in m], got
        # The same phrases as with straight apostrophes, each the message's own text.
        assert [m.replace("’", "'") for m in got] == [k.mention for k in x.keyphrases(straight)]
        assert all(m in curly for m in got)


def test_extract_counts_the_turns_the_statistical_extractor_keyphrased(tmp_path, capsys):
    """On turns without a model's recording it printed "0 user turn(s) recorded ... 3 not
    asked" though all had keyphrases, and "-3 user turn(s) recorded" on a rerun."""
    from agefacts.cli import main
    from agefacts.models import Conversation

    turns = [
        {"speaker": "user", "text": f"I baked sourdough bread number {i} today.", "at": f"2024-01-0{i + 1}T10:00:00Z"}
        for i in range(3)
    ]
    src = tmp_path / "c.json"
    src.write_text(Conversation.model_validate({"id": "c", "namespace": "n", "turns": turns}).model_dump_json())
    out = tmp_path / "out"
    assert main(["extract", "--extractor", "statistical", str(src), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert ": 3 user turn(s) recorded, 0 failed, 0 kept" in said and "not asked" not in said, said
    assert main(["extract", "--extractor", "statistical", str(src), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert ": 0 user turn(s) recorded, 0 failed, 3 kept" in said and "not asked" not in said, said
