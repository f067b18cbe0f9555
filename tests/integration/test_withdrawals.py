"""What a found message says that was taken back since (``message_withdrawals``) is one SQL
function walking the indexes; the Cypher it replaced (which read every message and statement
for a list of keys) is kept here as the oracle, and both give the same rows on generated
stories with corrections and negations, at every known time, on both load paths."""

from __future__ import annotations

import itertools
import os

from hypothesis import HealthCheck, given, settings, target
from hypothesis import strategies as st

from agefacts.keys import message_key
from agefacts.load import Loader
from agefacts.named import named_queries, run_named

from ..helpers import ONTO
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
