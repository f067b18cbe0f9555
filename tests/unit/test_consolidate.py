"""Consolidation of per-turn results."""

from __future__ import annotations

from agefacts.consolidate import result_of
from agefacts.ontology import default_ontology

from ..helpers import claim, conversation, user_turn


def test_a_placeholder_named_later_is_one_entity_and_its_followup_is_dropped():
    husband = {
        "handle": "e1",
        "type": "Person",
        "mention": "my husband",
        "resolution": "nil_placeholder",
        "attrs": {"rel": "spouse_of:user"},
    }
    named = {"handle": "e1", "type": "Person", "mention": "Tom", "resolution": "resolved", "name": "Tom"}
    conv = conversation(
        "c",
        [
            user_turn(
                "My husband cooks.",
                "2026-01-01T10:00:00Z",
                [husband],
                [claim("user", "spouse_of", "My husband", obj="e1")],
                [
                    {"gap": "e1.name", "priority": "banked", "question": "Name?"},
                    {"gap": "e1.name", "priority": "immediate", "question": "What's his name?"},
                ],
            ),
            user_turn("Tom.", "2026-01-01T10:01:00Z", [named], []),
        ],
    )
    r = result_of(conv, default_ontology())
    (e,) = r.entities
    assert (e.name, e.resolution, e.mention, e.attrs) == ("Tom", "resolved", "my husband", {"rel": "spouse_of:user"})
    assert r.mentions == {"e1": ["my husband", "Tom"]}
    assert r.followups == []


def test_the_same_statement_in_two_turns_is_one_with_both_evidence():
    place = {"handle": "e1", "type": "Place", "mention": "Lyon", "name": "Lyon"}
    conv = conversation(
        "c",
        [
            user_turn(
                "I live in Lyon.",
                "2026-01-01T10:00:00Z",
                [place],
                [claim("user", "lives_in", "I live in Lyon", obj="e1", confidence=0.5)],
            ),
            user_turn(
                "Yes, I live in Lyon!",
                "2026-01-01T10:05:00Z",
                [],
                [claim("user", "lives_in", "I live in Lyon", obj="e1", confidence=0.9)],
            ),
        ],
    )
    (fact,) = result_of(conv, default_ontology()).statements
    assert [e.turn for e in fact.evidence] == [0, 1]
    assert fact.confidence == 0.9


def test_followups_dedupe_by_gap_keeping_the_strongest_priority():
    person = {"handle": "e1", "type": "Person", "mention": "a friend"}
    conv = conversation(
        "c",
        [
            user_turn(
                "A friend called.",
                "2026-01-01T10:00:00Z",
                [person],
                [],
                [{"gap": "e1.name", "priority": "banked", "question": "Who?"}],
            ),
            user_turn(
                "She was upset.",
                "2026-01-01T10:01:00Z",
                [],
                [],
                [{"gap": "e1.name", "priority": "immediate", "question": "Who called?"}],
            ),
        ],
    )
    (f,) = result_of(conv, default_ontology()).followups
    assert (f.priority, f.question) == ("immediate", "Who called?")
