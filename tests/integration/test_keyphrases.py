"""Keyphrases in the graph: the statistical extractor's output loads idempotently, in any
order, to one digest on both load paths; replacing and forgetting a conversation takes its
keyphrases and co-occurrences with it; ``ask`` finds messages by topic."""

from __future__ import annotations

import asyncio
import json
import math

import pytest

from agefacts.db import Database
from agefacts.inputs import read_conversations
from agefacts.keyphrases import StatisticalExtractor
from agefacts.load import Loader
from agefacts.models import Conversation
from agefacts.reads import digest
from agefacts.retrieve import ask

from ..helpers import EXAMPLES, ONTO, VIAS, conversation


def _statistical(conversations: list[Conversation]) -> list[Conversation]:
    x = StatisticalExtractor()
    return [asyncio.run(x.conversation(c)).conversation for c in conversations]


def _examples() -> list[Conversation]:
    return [Conversation.model_validate_json(p.read_text()) for p in sorted(EXAMPLES.glob("*.json"))]


def _load(db: Database, convs: list[Conversation], via: str) -> None:
    outcomes = list(Loader(db, ONTO, via=via).load_many((c.id, c) for c in convs))
    assert all(o.status in ("loaded", "skipped") for o in outcomes), [o.reason for o in outcomes]


def _count(db: Database, pattern: str) -> int:
    (row,) = db.cypher_raw(f"MATCH {pattern} RETURN count(*)")
    return int(row[0])


def test_statistical_extractions_load_to_one_digest_twice_in_any_order_on_both_paths(other_graph):
    convs = _statistical(_examples())
    bulk, cypher = other_graph("b"), other_graph("c")
    _load(bulk, convs, "bulk")
    _load(cypher, convs[::-1], "cypher")
    assert digest(bulk) == digest(cypher)
    first = digest(bulk)
    _load(bulk, convs[::-1], "bulk")
    _load(cypher, convs, "cypher")
    assert digest(bulk) == digest(cypher) == first
    # What was loaded is there: one vertex per phrase and namespace, spans that index the text.
    assert _count(bulk, "(:Keyphrase)") > 50
    assert _count(bulk, "(:Keyphrase)-[:CO_OCCURS]->(:Keyphrase)") > 50
    rows = bulk.cypher_raw(
        "MATCH (:Keyphrase)-[e:APPEARS_IN]->(m:Message) "
        "RETURN e.mention, e.char_start, e.char_end, e.byte_start, e.byte_end, m.text, e.extractor",
        columns=tuple("abcdefg"),
    )
    assert len(rows) > 100
    for row in rows:
        mention, cs, ce, bs, be, text, who = (json.loads(x) for x in row)
        assert text[cs:ce] == mention
        assert text.encode()[bs:be] == mention.encode()
        assert who.startswith("statistical:yake-")


def _said(cid: str, texts: list[str], ns: str = "kp") -> Conversation:
    """A conversation of user turns, each with authored keyphrases: the words in brackets."""
    turns = []
    for i, text in enumerate(texts):
        phrases = [w.strip("[]") for w in text.split() if w.startswith("[")]
        turns.append(
            {
                "speaker": "user",
                "text": text.replace("[", "").replace("]", ""),
                "at": f"2024-05-0{i + 1}T10:00:00Z",
                "keyphrases": [{"mention": p, "score": 0.5} for p in phrases],
            }
        )
    return conversation(cid, turns, namespace=ns)


A = ["I bake [sourdough] with rye [flour]", "my [sourdough] [starter] is alive", "We hiked near [Bergen]"]
B = ["the [starter] needs [flour] daily", "more [sourdough] please"]


@pytest.mark.parametrize("via", VIAS)
def test_replacing_and_forgetting_take_a_conversations_keyphrases_with_it(other_graph, via):
    a, b = _said("a", A), _said("b", B)
    a2 = _said("a", ["now I only bake [bagels]"])
    db, fresh = other_graph("g"), other_graph("fresh")
    _load(db, [a, b], via)
    # Counts and PMI are the conversation's own: "sourdough" is in 2 of a's 3 messages.
    edges = db.cypher_raw(
        "MATCH (x:Keyphrase)-[r:CO_OCCURS]->(y:Keyphrase) RETURN x.text, y.text, r.conversation, r.messages, r.pmi",
        columns=tuple("abcde"),
    )
    got = {
        (*sorted((json.loads(x), json.loads(y))), json.loads(c)): (json.loads(n), json.loads(p))
        for x, y, c, n, p in edges
    }
    assert got[("flour", "sourdough", "a")] == (1, round(math.log(1 * 3 / (1 * 2)), 6))
    assert got[("flour", "starter", "b")] == (1, round(math.log(1 * 2 / (1 * 1)), 6))
    assert ("bergen", "sourdough", "a") not in got
    _load(db, [a2], via)  # a changed: its old phrases that b does not say go
    _load(fresh, [b, a2], via)
    assert digest(db) == digest(fresh)
    assert _count(db, "(k:Keyphrase) WHERE k.text = 'bergen'") == 0
    assert _count(db, "(k:Keyphrase) WHERE k.text = 'sourdough'") == 1  # b still says it
    Loader(db, ONTO, via=via).forget("kp", ["a"])
    fresh.drop_graph()
    fresh.ensure_graph()
    _load(fresh, [b], via)
    assert digest(db) == digest(fresh)
    Loader(db, ONTO, via=via).forget("kp")
    assert _count(db, "(:Keyphrase)") == 0
    assert _count(db, "()-[:CO_OCCURS]->()") == 0


def test_ask_finds_the_messages_about_a_topic_with_their_spans(db):
    _load(db, [_said("a", A), _said("b", B), _said("c", ["[sourdough] is great"], ns="other")], "bulk")
    answer = ask(db, "What did I say about sourdough?", ONTO, namespace="kp")
    assert answer.facts == []
    said = {(m["conversation"], m["message"]) for m in answer.messages if m["words"]}
    assert said == {("a", 0), ("a", 1), ("b", 1)}  # not the other namespace's
    # a's third message is found too, replying to the turns that say it, and b's first, which
    # the turn after it answers with sourdough
    assert sorted((m["conversation"], m["message"], m["around"]) for m in answer.messages if not m["words"]) == [
        ("a", 2, ["sourdough"]),
        ("b", 0, ["sourdough"]),
    ]
    for m in answer.messages:
        if not m["words"]:
            continue
        (hit,) = [h for h in m["keyphrases"] if h["text"] == "sourdough"]
        assert m["text"][hit["char_start"] : hit["char_end"]] == hit["mention"]
    # Two words of the question, one message that says both, first.
    answer = ask(db, "tell me about the sourdough starter", ONTO, namespace="kp")
    assert (answer.messages[0]["conversation"], answer.messages[0]["message"]) == ("a", 1)
    nothing = ask(db, "what about kayaks?", ONTO, namespace="kp")
    assert nothing.messages == [] and nothing.facts == []
    assert nothing.reason == "no message says 'kayaks' and it names no known entity"
    assert "[1]" in ask(db, "what did I say about flour?", ONTO, namespace="kp").context()


def test_every_message_ask_returns_lists_the_question_keyphrases_it_says(db):
    """A keyphrase many messages say: the message the words rank first lists it with its span,
    however many later messages say it too (they were read by topic, the latest few kept, and
    an older message the words found showed none)."""
    texts = ["I bake [sourdough] with rye and caraway"] + [f"[sourdough] batch {i} came out flat" for i in range(6)]
    _load(db, [_said("d", texts, ns="bread")], "bulk")
    answer = ask(db, "Did I bake sourdough with caraway?", ONTO, namespace="bread", k=2)
    first = answer.messages[0]
    assert (first["conversation"], first["message"]) == ("d", 0)
    (hit,) = first["keyphrases"]
    assert hit["text"] == "sourdough" and first["text"][hit["char_start"] : hit["char_end"]] == "sourdough"
    assert all(m["keyphrases"] for m in answer.messages)


def test_the_readmes_statistical_example_runs_offline_from_extract_to_ask(cli_env, dsn, graph_name, tmp_path, capsys):
    """The README's commands: extract keyphrases of the shipped conversations with no model
    endpoint, load them, and ask about a topic no entity names."""
    from agefacts.cli import main
    from agefacts.memory import Memory

    out = tmp_path / "keyphrased"
    files = sorted(str(p) for p in EXAMPLES.glob("*.json"))
    env_url = "http://127.0.0.1:9/v1"  # nothing listens there: the statistical run must not ask
    assert main(["extract", "--extractor", "statistical", *files, "--out", str(out), "--llm-url", env_url]) == 0
    users = sum(1 for _, c in read_conversations([EXAMPLES]) for t in c.turns if t.speaker == "user")
    said = capsys.readouterr().out
    # Counted as keyphrased: it said "0 user turn(s) recorded ... 13 not asked" on turns
    # without a model's recording, and "-1 user turn(s) recorded" on a rerun.
    assert f"25 conversation(s) into {out}: {users} user turn(s) recorded, 0 failed, 0 kept" in said, said
    assert "not asked" not in said
    assert main(["load", str(out)]) == 0
    assert "keyphrases" in capsys.readouterr().out
    assert main(["ask", "What did I say about the dentist?", "--namespace", "ann"]) == 0
    said = capsys.readouterr().out
    assert "Messages:" in said and "Can you remind me what time the dentist is?" in said
    # What docs/extract.md shows is what it prints.
    import re
    from pathlib import Path

    page = (Path(__file__).parents[2] / "docs" / "extract.md").read_text()
    (shown,) = re.findall(r"```\n(Messages:\n.*?)```", page, re.S)
    assert shown.strip() in said, (shown, said)
    with Memory(dsn, graph_name) as memory:
        recall = memory.ask("What did I say about the dentist?", namespace="ann")
    # The user's message says it as a keyphrase (with where); the assistant's reply says the word.
    (message,) = [m for m in recall.messages if m.spans]
    assert message.speaker == "user" and any(m.speaker == "assistant" and "dentist" in m.words for m in recall.messages)
    (span,) = message.spans
    assert span[0] == "dentist" and message.text[span[2] : span[3]] == span[1] == "dentist"
    assert message.conversation == "ann-03" and message.at is not None
    assert "(matched: dentist)" in recall.context
    # A second run keeps what the first recorded; --top 0 is a usage error.
    assert main(["extract", "--extractor", "statistical", *files, "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert f": 0 user turn(s) recorded, 0 failed, {users} kept" in said and "not asked" not in said, said
    assert main(["extract", "--extractor", "statistical", files[0], "--out", str(out), "--top", "0"]) == 2
