"""Differential tests of the write model: generated corpora, then random replacements of their
conversations, loaded through the bulk path and through the Cypher path; after every step the
two graphs and a fresh load of the current versions have one digest. Generated corpora cover
multi-valued and single-valued predicates, negations, facts that state only their end, dates
at every precision, numbers of every JSON shape and names with trailing whitespace."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agefacts.db import Database
from agefacts.load import Loader
from agefacts.models import Conversation
from agefacts.reads import digest, graph_content

from ..helpers import ONTO, claim, fresh, fuzz, user_turn

NAMES = ["Oslo", "Oslo ", "oslo\n", "Lyon", "Bergen", "Acme", "Acme\t", "Tom", "Tom "]
VALUES = st.one_of(
    st.sampled_from(["tea", "jazz", "Tea ", "cook", "chef", "a\u00a0b"]),
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([0, 1, -1, 2**53 + 1, 2**63 - 1, -(2**63)]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1e16, -0.0, 0.0, 1.5, 6.02e23, 1e-7, 2.0, 1e300]),
    st.booleans(),
)
DATES = st.sampled_from(["2023", "2024-06", "2024-06-01", "2024-06-01T09:00:00Z", "2024-06-15", "2025", "2025-03-01"])
TOPICS = ["first", "again", "edited", "Rye bread", "rye  bread", "sourdough", "Zoë's café"]
SCORES = st.sampled_from([0.0, 0.25, 0.5, 1.0, 0.3333])
SINGLE = ["lives_in", "works_at", "job_title"]
MULTI = ["likes", "speaks", "from_place"]


@st.composite
def version(draw, cid: str, month: int) -> Conversation:
    """One version of conversation ``cid``: a few user turns of statements about the
    namespace's owner, each statement's quote the whole of its own sentence."""
    entities: list[dict] = []
    sentences: list[str] = []
    statements = []
    for i in range(draw(st.integers(1, 5))):
        pred = draw(st.sampled_from(SINGLE + MULTI))
        kw: dict = {}
        when = draw(st.sampled_from(["none", "from", "until", "both"]))
        if when in ("from", "both"):
            kw["valid_from"] = draw(DATES)
        if when in ("until", "both"):
            kw["valid_until"] = draw(DATES)
        if when == "both" and kw["valid_until"] < kw["valid_from"]:
            kw["valid_from"], kw["valid_until"] = kw["valid_until"], kw["valid_from"]
        polarity = "negated" if pred in SINGLE and draw(st.integers(0, 5)) == 0 else "asserted"
        sentence = f"s{i} {pred} {draw(st.sampled_from(['first', 'again', 'edited']))}."
        sentences.append(sentence)
        if pred in ("lives_in", "works_at", "from_place"):
            handle = f"e{len(entities)}"
            typ = "Organization" if pred == "works_at" else "Place"
            name = draw(st.sampled_from(NAMES))
            entities.append(
                {"handle": handle, "type": typ, "mention": name.strip() or "it", "resolution": "resolved", "name": name}
            )
            statements.append(claim("user", pred, sentence, obj=handle, polarity=polarity, **kw))
        else:
            statements.append(claim("user", pred, sentence, value=draw(VALUES), polarity=polarity, **kw))
    text = " ".join(sentences)
    turns = [user_turn(text, f"2024-{month:02d}-0{draw(st.integers(1, 9))}T10:00:00Z", entities, statements)]
    # Keyphrases: words of the message (some said by several conversations, some in two of
    # this one's messages, so co-occurrence has something to count), and one it does not say.
    topics = st.lists(st.sampled_from(TOPICS), max_size=4)
    turns[0]["keyphrases"] = [{"mention": t, "score": draw(SCORES)} for t in draw(topics) if t in text]
    turns[0]["text"] += " " + " ".join(draw(topics))
    turns[0]["keyphrases"] += [{"mention": t, "score": draw(SCORES)} for t in draw(topics) if t in turns[0]["text"]]
    if draw(st.booleans()):
        more = draw(topics)
        said = " and ".join(more) or "nothing"
        phrases = [{"mention": t, "score": draw(SCORES)} for t in more + ["absent topic"]]
        turns.append(
            {"speaker": "user", "text": f"also {said}", "at": f"2024-{month:02d}-09T11:00:00Z", "keyphrases": phrases}
        )
    if draw(st.booleans()):
        turns.append({"speaker": "assistant", "text": "Noted.", "at": f"2024-{month:02d}-10T10:00:00Z"})
    return Conversation.model_validate(
        {"id": cid, "namespace": "fz", "title": draw(st.sampled_from([None, "t", "t2"])), "turns": turns}
    )


@st.composite
def histories(draw):
    ids = [f"c{i}" for i in range(draw(st.integers(2, 4)))]
    first = [draw(version(cid, 1 + n)) for n, cid in enumerate(ids)]
    steps = []
    for _ in range(draw(st.integers(1, 3))):
        cid = draw(st.sampled_from(ids))
        steps.append(draw(version(cid, 1 + ids.index(cid) + draw(st.sampled_from([0, 0, 5])))))
    return first, steps


@fuzz(8)
@given(story=histories())
def test_bulk_and_cypher_paths_and_a_fresh_load_agree_after_every_replacement(dsn, graph_name, story):
    first, steps = story
    bulk = fresh(Database(dsn, graph_name + "_b").connect())
    cypher = fresh(Database(dsn, graph_name + "_c").connect())
    final = fresh(Database(dsn, graph_name + "_f").connect())
    try:
        current = {c.id: c for c in first}
        for db, via in ((bulk, "bulk"), (cypher, "cypher")):
            outcomes = list(Loader(db, ONTO, via=via).load_many((c.id, c) for c in first))
            assert all(o.status == "loaded" for o in outcomes), [o.reason for o in outcomes]
        assert graph_content(bulk) == graph_content(cypher)
        for conv in steps:
            current[conv.id] = conv
            for db, via in ((bulk, "bulk"), (cypher, "cypher")):
                (o,) = Loader(db, ONTO, via=via).load_many([(conv.id, conv)])
                assert o.status in ("loaded", "skipped"), o.reason
            assert graph_content(bulk) == graph_content(cypher)
            fresh(final)
            list(Loader(final, ONTO).load_many((c.id, c) for c in sorted(current.values(), key=lambda c: c.id)[::-1]))
            assert digest(final) == digest(bulk)
        # A load reads again only the facts it touched of a predicate of many values (not all of
        # them): reading every chain whole from the statements changes nothing.
        for db in (bulk, cypher):
            before = digest(db)
            Loader(db, ONTO).derive()
            assert digest(db) == before
        # Every fact still cites text that is in its message.
        for q, a, b, t in bulk.cypher_raw(
            "MATCH (:Statement)-[e:EVIDENCED_BY]->(m:Message) RETURN e.quote, e.char_start, e.char_end, m.text",
            columns=tuple("qabt"),
        ):
            assert json.loads(t)[json.loads(a) : json.loads(b)] == json.loads(q)
    finally:
        for db in (bulk, cypher, final):
            db.drop_graph()


@pytest.mark.parametrize("via", ["bulk", "cypher"])
def test_a_predicate_whose_statements_hold_one_value_is_read_whole_after_the_ontology_changed(dsn, graph_name, via):
    """A predicate of many values has its facts read one by one; where its statements were
    written when it held one value at a time (the ontology changed since), the new value
    ends the old one as before, so the predicate is read whole."""
    from agefacts.reads import facts

    single = ONTO.model_copy(
        update={
            "predicates": [
                p.model_copy(update={"single_valued": True}) if p.name == "likes" else p for p in ONTO.predicates
            ]
        }
    )
    db = fresh(Database(dsn, graph_name).connect())

    def likes(cid: str, thing: str, at: str) -> Conversation:
        said = f"I like {thing}"
        turn = user_turn(said + ".", at, [], [claim("user", "likes", said, value=thing)])
        return Conversation.model_validate({"id": cid, "namespace": "w", "turns": [turn]})

    first, then = likes("a", "tea", "2024-01-01T10:00:00Z"), likes("b", "jazz", "2024-03-01T10:00:00Z")
    assert Loader(db, single, via=via).load(first).status == "loaded"
    assert Loader(db, single, via=via).load(then).status == "loaded"  # written whole; then a statement alone
    later = then.model_copy(update={"id": "c"})
    assert Loader(db, ONTO, via=via).load(later).status == "loaded"
    before = digest(db)
    Loader(db, ONTO).derive()
    assert digest(db) == before
    assert [f["value"] for f in facts(db, "user", namespace="w").dicts()] == ["jazz"]
