"""The message queries ask runs with a list of keys are SQL functions walking the indexes: what a
found message says that was taken back since (``message_withdrawals``), and the messages that
say a question's keyphrases (``topic_messages``). The Cypher each replaced (which read every
message, statement or keyphrase for a list of keys) is kept here as the oracle, and both give
the same rows on generated conversations, on both load paths."""

from __future__ import annotations

import itertools
import os

from hypothesis import HealthCheck, given, settings, target
from hypothesis import strategies as st

from agefacts.keys import keyphrase_key, keyphrase_text, message_key
from agefacts.load import Loader
from agefacts.named import named_queries, run_named

from ..helpers import ONTO, conversation
from ..stories import ASK_KNOWN, stories
from .test_time_stories import conversations

_NAMESPACES = itertools.count()

ORACLE = """
UNWIND $keys AS key
MATCH (m:Message) WHERE m.k = key
MATCH (m)<-[e:EVIDENCED_BY]-(s:Statement)<-[:SUBJECT_OF]-(subj)
WITH m, e, s, subj, $known_at AS known_at
WHERE s.ends_fact IS NULL
OPTIONAL MATCH (s)-[:ABOUT]->(o)
WITH m, e, s, subj, o, known_at
MATCH (subj)-[:SUBJECT_OF]->(c:Statement)-[ce:EVIDENCED_BY]->(cm:Message)
WHERE c.ends_fact = true AND c.predicate = s.predicate AND ce.at > e.at AND ce.at <= known_at
OPTIONAL MATCH (c)-[:ABOUT]->(co)
WITH m, s, subj, o, c, co, ce, cm
WHERE (o IS NULL AND co IS NULL AND c.value = s.value) OR (o IS NOT NULL AND co IS NOT NULL AND o.k = co.k)
WITH m, s, subj, o, coalesce(c.corrects, false) AS corrected, min([ce.at, cm.conversation, cm.ordinal, ce.quote]) AS first
RETURN m.namespace AS namespace, m.conversation AS conversation, m.ordinal AS message, s.predicate AS predicate, coalesce(subj.name, subj.role, subj.k) AS subject, coalesce(o.name, o.k, s.value) AS what, corrected, first[0] AS at, first[1] AS by_conversation, first[2] AS by_message, first[3] AS by_quote
"""


@settings(
    max_examples=int(os.environ.get("AGEFACTS_FUZZ_EXAMPLES", "12")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(story=stories(max_size=8), data=st.data())
def test_withdrawals_are_what_the_cypher_they_replaced_gives(paths, story, data):
    ns = f"w{next(_NAMESPACES)}"
    found = 0
    convs = conversations(story, ns)
    for db, via in zip(paths, ("bulk", "cypher"), strict=True):
        for c in data.draw(st.permutations(convs), label=f"order {via}"):
            assert Loader(db, ONTO, via=via).load(c).status == "loaded"
        keys = sorted(message_key(ns, c.id, i) for c in convs for i in range(len(c.turns)))
        for known in ASK_KNOWN:
            params = {"keys": keys, "known_at": known}
            got = run_named(db, "message_withdrawals", params).rows
            want = db.cypher(ORACLE, params, named_queries()["message_withdrawals"].columns).rows
            assert sorted(map(repr, got)) == sorted(map(repr, want)), (via, known)
            found += len(want)
    target(float(found), label="withdrawals found")  # drawn towards stories with many


TOPICS_ORACLE = """
UNWIND $keys AS key
MATCH (p:Keyphrase) WHERE p.k = key
MATCH (p)-[e:APPEARS_IN]->(m:Message)
RETURN m.namespace AS namespace, m.conversation AS conversation, m.ordinal AS message, m.speaker AS speaker, m.at AS at, m.text AS message_text, p.text AS keyphrase, e.mention AS mention, e.char_start AS char_start, e.char_end AS char_end, e.byte_start AS byte_start, e.byte_end AS byte_end, e.score AS score, e.extractor AS extractor
"""
_WORDS = ["sourdough", "starter", "fado", "porto", "tram", "bread", "night", "river"]


@settings(
    max_examples=int(os.environ.get("AGEFACTS_FUZZ_EXAMPLES", "12")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_topic_messages_are_what_the_cypher_they_replaced_gives(paths, data):
    ns = f"k{next(_NAMESPACES)}"
    texts = data.draw(st.lists(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=5), min_size=1, max_size=6))
    turns = []
    for i, words in enumerate(texts):
        text = " ".join(words)
        phrases = data.draw(st.lists(st.sampled_from(sorted(set(words))), max_size=3, unique=True))
        turns.append(
            {
                "speaker": data.draw(st.sampled_from(["user", "user", "assistant"])),
                "text": text,
                "at": f"2026-01-0{1 + i % 9}T10:00:00Z",
                "keyphrases": [{"mention": p, "score": 0.5 + 0.1 * n} for n, p in enumerate(phrases)] or None,
            }
        )
    conv = conversation(f"{ns}-c", turns, namespace=ns)
    given = sorted({k["mention"] for t in turns for k in t["keyphrases"] or []})
    asked = data.draw(st.lists(st.sampled_from([*given, "nothing said"]), min_size=1, max_size=4, unique=True))
    keys = [keyphrase_key(ns, keyphrase_text(w)) for w in asked]
    columns = named_queries()["topic_messages"].columns
    found = 0
    for db, via in zip(paths, ("bulk", "cypher"), strict=True):
        assert Loader(db, ONTO, via=via).load(conv).status == "loaded"
        got = run_named(db, "topic_messages", {"keys": keys}).rows
        want = db.cypher(TOPICS_ORACLE, {"keys": keys}, columns).rows
        assert sorted(map(repr, got)) == sorted(map(repr, want)), via
        found += len(want)
    target(float(found), label="rows found")
