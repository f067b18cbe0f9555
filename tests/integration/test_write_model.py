"""The write model when conversations change, race, repeat, or carry odd values: each test
here is a defect that was reproduced outside the suite, on both load paths."""

from __future__ import annotations

import json
import random
import threading

import pytest

from agefacts.consolidate import result_of
from agefacts.db import Database
from agefacts.load import Loader, load_paths
from agefacts.preparing import content_hash
from agefacts.reads import digest, facts, graph_content, history

from ..helpers import NUMBERS, ONTO, VIAS, claim, conversation, likes, numbers_conversation, place, user_turn


def user_key(db: Database, namespace: str = "test") -> str:
    from agefacts.keys import user_key as uk

    return uk(namespace)


def quotes_hold(db: Database) -> list:
    """Every evidence edge whose quote is not its message's text at its span."""
    rows = db.cypher_raw(
        "MATCH (:Statement)-[e:EVIDENCED_BY]->(m:Message) RETURN e.quote, e.char_start, e.char_end, m.text",
        columns=("q", "a", "b", "t"),
    )
    bad = []
    for q, a, b, t in rows:
        q, a, b, t = json.loads(q), json.loads(a), json.loads(b), json.loads(t)
        if t[a:b] != q:
            bad.append((q, t))
    return bad


# -- 1. replacing a conversation keeps facts of predicates that are not single-valued ----------------
@pytest.mark.parametrize("via", VIAS)
def test_replacing_a_conversation_closes_no_multi_valued_fact(db, via):
    load = Loader(db, ONTO, via=via)
    assert load.load(likes("c1", "tea", "2024-01-01T10:00:00Z")).status == "loaded"
    assert load.load(likes("c2", "jazz", "2024-02-01T10:00:00Z")).status == "loaded"
    before = digest(db)
    changed = likes("c2", "jazz", "2024-02-01T10:00:00Z", title="now with a title")
    assert Loader(db, ONTO, via=via).load(changed).status == "loaded"
    rows = facts(db, user_key(db), valid_at="2024-03-01").dicts()
    assert sorted(r["value"] for r in rows if r["predicate"] == "likes") == ["jazz", "tea"]
    # Each liking is one open version, as known now.
    assert db.cypher(
        "MATCH (f:Fact) WHERE f.predicate = 'likes' AND f.known_until IS NULL RETURN f.value, f.valid_until ORDER BY f.value",
        columns=("value", "until"),
    ).rows == [("jazz", None), ("tea", None)]
    # The title is all that changed.
    assert digest(db) != before
    fresh = Database(db.dsn, db.graph + "_fresh").connect()
    try:
        Loader(fresh, ONTO, via=via).load(likes("c1", "tea", "2024-01-01T10:00:00Z"))
        Loader(fresh, ONTO, via=via).load(changed)
        assert digest(fresh) == digest(db)
    finally:
        fresh.drop_graph()


# -- 3. loaders racing different versions of one conversation ----------------------------------------
def two_versions(cid: str = "race"):
    v1 = conversation(
        cid,
        [
            user_turn(
                "I like tea", "2024-01-01T10:00:00Z", statements=[claim("user", "likes", "I like tea", value="tea")]
            )
        ],
    )
    v2 = conversation(
        cid,
        [
            user_turn(
                "I really like coffee",
                "2024-01-01T10:00:00Z",
                statements=[claim("user", "likes", "like coffee", value="coffee")],
            )
        ],
    )
    return v1, v2


@pytest.mark.parametrize("via", VIAS)
def test_a_loader_that_read_the_ledger_before_another_wrote_still_replaces(dsn, db, via):
    """The race, made deterministic: loader B decided "new" from a ledger read taken before
    loader A committed another version. The write must see A's version and replace it."""
    v1, v2 = two_versions()
    assert Loader(db, ONTO, via=via).load(v1).status == "loaded"
    late = Loader(Database(dsn, db.graph).connect(), ONTO, via=via)
    real, reads = late._prior_hashes, []

    def first_read_is_stale(idents):
        reads.append(idents)
        return {} if len(reads) == 1 else real(idents)  # the first read came before A's commit

    late._prior_hashes = first_read_is_stale
    assert late.load(v2).status == "loaded"
    assert len(reads) == 2  # the stale read was noticed, and the ledger read again
    assert quotes_hold(db) == []
    assert [r[0] for r in db.cypher("MATCH (s:Statement) RETURN s.value").rows] == ["coffee"]
    (h,) = db.execute("SELECT content_hash FROM agefacts.ingest_log WHERE graph = %s", (db.graph,))[0]
    assert h == content_hash(v2, ONTO)


@pytest.mark.parametrize("via", VIAS)
def test_loaders_racing_two_versions_end_with_exactly_one(dsn, db, via):
    rounds = 6
    pairs = [two_versions(f"race-{i}") for i in range(rounds)]
    errors: list[BaseException] = []

    def run(versions) -> None:
        try:
            mine = Database(dsn, db.graph).connect()
            for o in Loader(mine, ONTO, via=via).load_many((f"{v.id}", v) for v in versions):
                assert o.status in ("loaded", "skipped"), o.reason
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    a = threading.Thread(target=run, args=([p[0] for p in pairs],))
    b = threading.Thread(target=run, args=([p[1] for p in pairs],))
    a.start(), b.start()
    a.join(300), b.join(300)
    assert not errors, errors
    assert quotes_hold(db) == []
    logged = dict(
        db.execute("SELECT conversation, content_hash FROM agefacts.ingest_log WHERE graph = %s", (db.graph,))
    )
    won = set()
    for v1, v2 in pairs:
        texts = [
            json.loads(t)
            for (t,) in db.cypher_raw(
                "MATCH (m:Message) WHERE m.conversation = $c RETURN m.text", {"c": v1.id}, columns=("t",)
            )
        ]
        assert texts in (["I like tea"], ["I really like coffee"])
        winner = v1 if texts == ["I like tea"] else v2
        assert logged[v1.id] == content_hash(winner, ONTO)
        won.add("tea" if winner is v1 else "coffee")
    # The losing version left nothing behind: no statement but the winners'.
    assert sorted(r[0] for r in db.cypher("MATCH (s:Statement) RETURN s.value").rows) == sorted(won)


# -- 4. the same conversation twice in one run ---------------------------------------------------------
def test_the_same_conversation_twice_in_one_run_is_refused_naming_both_places(db, tmp_path):
    v1, v2 = two_versions("twice")
    (tmp_path / "a.json").write_text(v1.model_dump_json())
    (tmp_path / "b.jsonl").write_text(v1.model_dump_json() + "\n" + v2.model_dump_json() + "\n")
    summary = load_paths(db, [tmp_path / "a.json", tmp_path / "b.jsonl"], ONTO)
    statuses = [(o.source.split("/")[-1], o.status) for o in summary.outcomes]
    assert statuses == [("a.json", "loaded"), ("b.jsonl:1", "skipped"), ("b.jsonl:2", "failed")]
    reason = summary.outcomes[2].reason
    assert "a.json" in reason and "'twice'" in reason and "own id" in reason
    assert [r[0] for r in db.cypher("MATCH (m:Message) RETURN m.text").rows] == ["I like tea"]
    # Again: the first copy is now unchanged (skipped), and the identical second copy with it.
    again = load_paths(db, [tmp_path / "a.json", tmp_path / "b.jsonl"], ONTO)
    assert [o.status for o in again.outcomes] == ["skipped", "skipped", "failed"]


# -- 5. numbers and names the two paths wrote differently ----------------------------------------------


def test_both_paths_store_every_json_number_and_name_alike(db, other_graph):
    conv = numbers_conversation(NUMBERS)
    Loader(db, ONTO, via="bulk").load(conv)
    other = other_graph("cy")
    Loader(other, ONTO, via="cypher").load(conv)
    assert graph_content(other) == graph_content(db)
    values = {
        json.loads(v) for (v,) in db.cypher_raw("MATCH (s:Statement) WHERE s.predicate = 'speaks' RETURN s.value")
    }
    # A whole float is the integer it equals (one value, one spelling: 2.0 is 2, negative zero
    # is 0); every other number keeps its value and its kind.
    assert values == {
        10**16,
        0,
        1.5,
        2,
        7,
        -3,
        1e-7,
        2**63 - 1,
        -(2**63),
        4503599627370495,
        1234567890123456.5,
        999999999999999,
    }
    kinds = dict(
        db.cypher_raw("MATCH (s:Statement) WHERE s.predicate = 'speaks' RETURN s.value, s.value", columns=("a", "b"))
    )
    assert kinds["10000000000000000"] == "10000000000000000" and "1.5" in kinds and "2" in kinds and "0" in kinds
    assert "2.0" not in kinds and "0.0" not in kinds
    # Loading it again merges into the stored properties: still the same numbers.
    d = digest(db)
    Loader(db, ONTO, via="bulk", force=True).load(conv)
    Loader(db, ONTO, via="bulk").load(numbers_conversation(NUMBERS, "numbers-again"))
    assert {
        json.loads(v) for (v,) in db.cypher_raw("MATCH (s:Statement) WHERE s.predicate = 'speaks' RETURN s.value")
    } == values
    assert d != digest(db)  # a second conversation was added; the values are unchanged


def test_numbers_agtype_cannot_hold_are_rejected_by_claim_not_by_conversation(db):
    conv = numbers_conversation([2**63, -(2**63) - 1, 6.02e23, 1.5])
    result = result_of(conv, ONTO)
    reasons = sorted(r.detail for r in result.rejected if r.reason == "invalid" and r.kind == "statement")
    assert len(reasons) == 3 and all("64 bits" in r for r in reasons)
    assert Loader(db, ONTO).load(conv).status == "loaded"
    assert [
        json.loads(v) for (v,) in db.cypher_raw("MATCH (s:Statement) WHERE s.predicate = 'speaks' RETURN s.value")
    ] == [1.5]


# -- 6. the earliest evidence is the one cited -------------------------------------------------------
@pytest.mark.parametrize("via", VIAS)
def test_facts_and_history_cite_the_earliest_evidence(db, via):
    things = ["tea", "jazz", "rain", "cats", "maps"]
    said = [
        conversation(
            f"likes-{i:02d}",
            [
                user_turn(
                    f"({i}) I like tea, I like jazz, I like rain, I like cats, I like maps",
                    f"2024-01-{i + 1:02d}T10:00:00Z",
                    statements=[claim("user", "likes", f"I like {t}", value=t) for t in things],
                )
            ],
        )
        for i in range(12)
    ]
    order = list(said)
    random.Random(7).shuffle(order)
    loader = Loader(db, ONTO, via=via)
    for conv in order:
        loader.load(conv)
    rows = facts(db, user_key(db), valid_at="2025-01-01").dicts()
    assert sorted(r["value"] for r in rows) == sorted(things)
    for r in rows:
        assert (r["conversation"], r["evidence"], r["recorded_at"]) == ("likes-00", 12, "2024-01-01T10:00:00Z"), r
        assert r[
            "char_start"
        ] == "(0) ".__len__() + "I like tea, I like jazz, I like rain, I like cats, I like maps".index(
            f"I like {r['value']}"
        )
    for t in things:
        (h,) = [x for x in history(db, user_key(db), "likes").dicts() if x["value"] == t]
        assert h["conversation"] == "likes-00"


# -- 7. a single-valued predicate has one value at any valid time --------------------------------------
@pytest.mark.parametrize("via", VIAS)
def test_undated_single_valued_facts_show_one_value_at_any_valid_time(db, via):
    titles = ["cook", "waiter", "chef", "manager", "owner", "consultant", "teacher", "retired"]
    loader = Loader(db, ONTO, via=via)
    for i, title in reversed(list(enumerate(titles))):
        loader.load(
            conversation(
                f"job-{i}",
                [
                    user_turn(
                        f"I am a {title}",
                        f"2024-0{i + 1}-01T10:00:00Z",
                        statements=[claim("user", "job_title", f"I am a {title}", value=title)],
                    )
                ],
            )
        )
    for i, title in enumerate(titles):
        for day in ("01T12:00:00Z", "20"):
            rows = facts(db, user_key(db), valid_at=f"2024-0{i + 1}-{day}").dicts()
            assert [r["value"] for r in rows if r["predicate"] == "job_title"] == [title]
    # Before anything was said the first value is the one known (its start is open).
    assert [r["value"] for r in facts(db, user_key(db), valid_at="2020-01-01").dicts()] == ["cook"]


# -- 8. no property is named after a Cypher keyword -------------------------------------------------------
def test_the_grounding_tier_is_readable_in_cypher(db):
    Loader(db, ONTO).load(likes("c1", "tea", "2024-01-01T10:00:00Z"))
    assert db.cypher("MATCH ()-[e:EVIDENCED_BY]->() RETURN e.tier").rows == [("exact",)]
    (keys,) = db.cypher("MATCH ()-[e:EVIDENCED_BY]->() RETURN keys(e)").rows[0]
    assert "tier" in keys and "match" not in keys


# -- the replaced conversation's own places ------------------------------------------------------------
@pytest.mark.parametrize("via", VIAS)
def test_a_replaced_conversation_takes_its_old_statements_and_entities_with_it(db, via, other_graph):
    old = lives("move", "Lyon", "2024-01-01T10:00:00Z")
    other = lives("move-2", "Oslo", "2024-06-01T10:00:00Z")
    new = lives("move", "Paris", "2024-01-01T10:00:00Z")
    loader = Loader(db, ONTO, via=via)
    loader.load(old), loader.load(other)
    assert Loader(db, ONTO, via=via).load(new).status == "loaded"
    names = sorted(r[0] for r in db.cypher("MATCH (p:Place) RETURN p.name").rows)
    assert names == ["Oslo", "Paris"]
    fresh = other_graph("fresh")
    Loader(fresh, ONTO, via=via).load(other)
    Loader(fresh, ONTO, via=via).load(new)
    assert digest(fresh) == digest(db)
    # Paris is read until Oslo; the statement keeps the time it gave itself (none).
    rows = facts(db, user_key(db), valid_at="2024-03-01").dicts()
    assert [(r["object"], r["valid_until"]) for r in rows] == [("Paris", "2024-06-01T10:00:00Z")]
    (h,) = history(db, user_key(db), "lives_in").dicts()[:1]
    assert (h["object"], h["valid_until"]) == ("Paris", None)


# -- fact versions follow a member whose known time moved, and --force repairs them ----------------
def lives(cid: str, city: str, at: str):
    text = f"I live in {city}"
    return conversation(
        cid, [user_turn(text, at, entities=[place("e1", city)], statements=[claim("user", "lives_in", text, obj="e1")])]
    )


@pytest.mark.parametrize("via", VIAS)
def test_a_replacement_that_moves_a_statements_recorded_at_reorders_its_group(db, via, other_graph):
    # The same statements, only the time of one conversation moves: no statement is new or
    # removed, yet which one is current changes.
    Loader(db, ONTO, via=via).load(lives("a", "Oslo", "2024-01-01T10:00:00Z"))
    Loader(db, ONTO, via=via).load(lives("b", "Bergen", "2024-02-01T10:00:00Z"))
    assert [r["object"] for r in facts(db, user_key(db), valid_at="2024-03-01").dicts()] == ["Bergen"]
    moved = lives("a", "Oslo", "2024-03-01T10:00:00Z")
    assert Loader(db, ONTO, via=via).load(moved).status == "loaded"
    assert [r["object"] for r in facts(db, user_key(db), valid_at="2024-04-01").dicts()] == ["Oslo"]
    fresh = other_graph("fresh")
    Loader(fresh, ONTO, via=via).load(lives("b", "Bergen", "2024-02-01T10:00:00Z"))
    Loader(fresh, ONTO, via=via).load(moved)
    assert digest(fresh) == digest(db)


@pytest.mark.parametrize("via", VIAS)
def test_force_repairs_fact_versions_the_graph_lost(db, via):
    convs = [lives("a", "Oslo", "2024-01-01T10:00:00Z"), lives("b", "Bergen", "2024-02-01T10:00:00Z")]
    for c in convs:
        Loader(db, ONTO, via=via).load(c)
    before = digest(db)
    # Written by hand, outside agefacts: the versions are gone (edges first: the embedded
    # engine's DETACH DELETE leaves them).
    db.cypher_raw("MATCH (:Fact)-[r]->() DELETE r")
    db.cypher_raw("MATCH ()-[r:HOLDS]->(:Fact) DELETE r")
    db.cypher_raw("MATCH (f:Fact) DELETE f")
    assert digest(db) != before
    assert all(o.status == "skipped" for o in Loader(db, ONTO, via=via).load_many([(c.id, c) for c in convs]))
    assert all(
        o.status == "loaded" for o in Loader(db, ONTO, via=via, force=True).load_many([(c.id, c) for c in convs])
    )
    assert digest(db) == before


@pytest.mark.parametrize("via", VIAS)
def test_a_negation_of_a_whole_float_ends_the_fact_stated_as_its_integer(db, via, other_graph):
    # The engine's Cypher finds 0 = 0.0 (and true <> 1); the bulk path's rule must agree.
    assert db.cypher_raw("RETURN 0 = 0.0, true = 1, 7 = 7.0", columns=("a", "b", "c")) == [("true", "false", "true")]

    def said(cid: str, value, polarity: str, at: str):
        text = "my job title, said once"
        return conversation(
            cid,
            [user_turn(text, at, statements=[claim("user", "job_title", text, value=value, polarity=polarity)])],
        )

    convs = [said("a", 0, "asserted", "2024-01-01T10:00:00Z"), said("b", 0.0, "negated", "2024-02-01T10:00:00Z")]
    for c in convs:
        Loader(db, ONTO, via=via).load(c)
    rows = facts(db, user_key(db), valid_at="2024-01-15").dicts()
    assert [(r["value"], r["valid_until"]) for r in rows] == [(0, "2024-02-01T10:00:00Z")], rows
    assert facts(db, user_key(db), valid_at="2024-03-01").dicts() == []
    other = other_graph("other")
    for c in convs:
        Loader(other, ONTO, via="cypher" if via == "bulk" else "bulk").load(c)
    assert digest(other) == digest(db)
