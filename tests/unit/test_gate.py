"""The gate: what becomes a fact, and why the rest does not."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agefacts.consolidate import result_of
from agefacts.ontology import default_ontology, parse_ontology

from ..helpers import claim, conversation, place, user_turn

AT = "2026-01-01T10:00:00Z"


def gate(text: str, statements, entities=(), ontology=None):
    conv = conversation("c1", [user_turn(text, AT, entities, statements)])
    return result_of(conv, ontology or default_ontology())


def reasons(result) -> list[str]:
    return [r.reason for r in result.rejected]


def test_an_asserted_current_grounded_claim_becomes_a_fact():
    r = gate("I live in Lyon.", [claim("user", "lives_in", "I live in Lyon", obj="e1")], [place("e1", "Lyon")])
    assert reasons(r) == []
    (fact,) = r.statements
    (ev,) = fact.evidence
    assert (ev.quote, ev.char_start, ev.char_end, ev.match) == ("I live in Lyon", 0, 14, "exact")
    assert ev.at == AT


@pytest.mark.parametrize(
    "statement, reason",
    [
        (claim("user", "lives_in", "I live in Lyon", obj="e1", polarity=None), "no_polarity"),
        (claim("user", "lives_in", "I live in Lyon", obj="e1", tense=None), "no_tense"),
        (claim("user", "resides", "I live in Lyon", obj="e1"), "unknown_predicate"),
        (claim("user", "lives_in", "I live in Lyon", obj="e9"), "unknown_handle"),
        (claim("e9", "lives_in", "I live in Lyon", obj="e1"), "unknown_handle"),
        (claim("user", "lives_in", "I live in Lyon", value="Lyon"), "object_expected"),
        (claim("user", "birthday", "I live in Lyon", obj="e1"), "value_expected"),
        (claim("e1", "lives_in", "I live in Lyon", obj="e1"), "subject_type"),
        (claim("user", "works_at", "I live in Lyon", obj="e1"), "object_type"),
        (claim("user", "lives_in", "I live in Lyon", obj="e1", valid_from="last spring"), "invalid_time"),
        (claim("user", "lives_in", "I live in Lyon", obj="e1", recurrence="FREQ=SOMETIMES"), "invalid_time"),
        (claim("user", "lives_in", "I live in Lyon", obj="e1", polarity="hedged"), "polarity"),
        (claim("user", "lives_in", "I live in Lyon", obj="e1", polarity="reported"), "polarity"),
        (claim("user", "lives_in", "I used to live in Lyon", obj="e1", tense="past"), "tense"),
        (claim("user", "lives_in", "I live in lyon", obj="e1"), "not_in_message"),
    ],
)
def test_refusals_carry_their_reason(statement, reason):
    r = gate("I live in Lyon.", [statement], [place("e1", "Lyon")])
    assert r.statements == []
    assert reasons(r) == [reason]
    assert r.rejected[0].detail  # says it in words too


def test_past_and_future_are_admitted_when_the_statement_carries_its_own_dates():
    text = "I left Acme in March. I start at Globex in April."
    ents = [
        {"handle": "e1", "type": "Organization", "mention": "Acme", "name": "Acme"},
        {"handle": "e2", "type": "Organization", "mention": "Globex", "name": "Globex"},
    ]
    r = gate(
        text,
        [
            claim("user", "works_at", "I left Acme in March", obj="e1", tense="past", valid_until="2026-03"),
            claim("user", "works_at", "I start at Globex in April", obj="e2", tense="future", valid_from="2026-04"),
            claim("user", "works_at", "I start at Globex", obj="e2", tense="future"),
        ],
        ents,
    )
    assert [(s.object, s.tense) for s in r.statements] == [("e1", "past"), ("e2", "future")]
    assert reasons(r) == ["tense"]


def test_an_unresolvable_subject_is_refused():
    ents = [{"handle": "e1", "type": "Person", "mention": "someone"}]
    r = gate("someone likes jazz", [claim("e1", "likes", "someone likes jazz", value="jazz")], ents)
    assert reasons(r) == ["unresolvable_subject"]


def test_a_negated_current_single_valued_fact_ends_the_fact_when_the_ontology_allows():
    r = gate(
        "I don't live in Lyon any more",
        [claim("user", "lives_in", "I don't live in Lyon", obj="e1", polarity="negated")],
        [place("e1", "Lyon")],
    )
    (fact,) = r.statements
    assert fact.ends_validity
    strict = default_ontology().model_copy(
        update={"admit": default_ontology().admit.model_copy(update={"negation_ends_validity": False})}
    )
    r = gate(
        "I don't live in Lyon any more",
        [claim("user", "lives_in", "I don't live in Lyon", obj="e1", polarity="negated")],
        [place("e1", "Lyon")],
        strict,
    )
    assert reasons(r) == ["polarity"]


def test_unknown_entity_types_are_refused_with_their_statements():
    ents = [{"handle": "e1", "type": "Spaceship", "mention": "the Rocinante", "name": "Rocinante"}]
    r = gate("I fly the Rocinante", [claim("user", "likes", "I fly the Rocinante", obj="e1")], ents)
    assert reasons(r) == ["unknown_entity_type", "unknown_entity_type"]
    assert r.entities == []


def test_times_are_normalised():
    r = gate(
        "We moved in June",
        [
            claim(
                "user",
                "lives_in",
                "We moved in June",
                obj="e1",
                valid_from="2024-06-01T10:00:00+02:00",
                recurrence="rrule:byday=mo;freq=weekly",
            )
        ],
        [place("e1", "Oslo")],
    )
    (fact,) = r.statements
    assert fact.valid_from == "2024-06-01T08:00:00Z"
    assert fact.recurrence == "FREQ=WEEKLY;BYDAY=MO"


def test_a_turn_that_asserts_nothing_is_an_empty_result_not_an_error():
    r = gate("Thanks, that worked!", [])
    assert r.statements == [] and r.rejected == []


def test_a_custom_ontology_changes_the_policy():
    onto = parse_ontology(
        {
            "name": "t",
            "entity_types": ["Person", "Place"],
            "predicates": ["lives_in"],
            "admit": {"polarity": ["asserted", "hedged"], "tense": ["current"]},
            "system_prompt": "x",
        }
    )
    r = gate(
        "I think I live in Lyon",
        [claim("user", "lives_in", "I live in Lyon", obj="e1", polarity="hedged")],
        [place("e1", "Lyon")],
        onto,
    )
    assert len(r.statements) == 1


def test_a_handle_declared_again_as_another_type_is_another_entity_refused_not_merged():
    """A model that reuses a known handle for a new entity ("e1" the place Lyon, then "e1" the
    person Tom) merged the two, so "my friend Tom" became a friendship with Lyon and Lyon was
    renamed Tom. The second declaration and what its turn says of the handle are refused,
    named; the first entity and its facts stand."""
    tom = {"handle": "e1", "type": "Person", "mention": "Tom", "resolution": "resolved", "name": "Tom"}
    conv = conversation(
        "h",
        [
            user_turn(
                "I live in Lyon.",
                "2024-01-01T10:00:00Z",
                [place("e1", "Lyon")],
                [claim("user", "lives_in", "I live in Lyon", obj="e1")],
            ),
            user_turn(
                "My friend Tom is great.",
                "2024-01-02T10:00:00Z",
                [tom],
                [claim("user", "friend_of", "My friend Tom", obj="e1")],
            ),
        ],
    )
    r = result_of(conv, default_ontology())
    assert [(e.handle, e.type, e.name) for e in r.entities] == [("e1", "Place", "Lyon")]
    assert [(s.predicate, s.object) for s in r.statements] == [("lives_in", "e1")]
    reasons = sorted((x.kind, x.reason) for x in r.rejected)
    assert reasons == [("entity", "handle_conflict"), ("statement", "handle_conflict")]
    assert all("Place" in x.detail and "Person" in x.detail for x in r.rejected)


def _in_words(n: int) -> str:
    """An English number in words, written here independently of the gate."""
    small = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
    tens = "twenty thirty forty fifty sixty seventy eighty ninety".split()

    def below_thousand(k: int) -> list[str]:
        out: list[str] = []
        if k >= 100:
            out += [small[k // 100], "hundred"]
            k %= 100
            if k:
                out.append("and")
        if k >= 20:
            out.append(tens[k // 10 - 2] + (f"-{small[k % 10]}" if k % 10 else ""))
        elif k or not out:
            out.append(small[k])
        return out

    if n >= 1000:
        rest = n % 1000
        return " ".join(below_thousand(n // 1000) + ["thousand"] + (below_thousand(rest) if rest else []))
    return " ".join(below_thousand(n))


@given(st.integers(0, 999_999), st.booleans())
def test_a_number_in_words_reads_as_its_digits(n, upper):
    from agefacts.gate import as_number

    words = _in_words(n)
    assert as_number(words.upper() if upper else words) == n, words
    assert as_number(str(n)) == n
    assert as_number(f"about {words}") is None


def test_refusals_of_a_type_or_predicate_name_the_ones_allowed():
    company = {"handle": "e1", "type": "Company", "mention": "Acme", "resolution": "resolved", "name": "Acme"}
    r = gate("I work at Acme.", [claim("user", "employed_by", "I work at Acme", obj="e1")], [company])
    details = {x.reason: x.detail for x in r.rejected}
    assert "(its types: Person, Place, Organization, Group, Event, Activity)" in details["unknown_entity_type"]
    r = gate("I work at Acme.", [claim("user", "work_at", "I work at Acme", obj="e1")], [place("e1", "Acme")])
    assert "did you mean works_at" in r.rejected[0].detail and "agefacts ontology" in r.rejected[0].detail
