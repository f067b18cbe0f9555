"""People are who they are, on both load paths and in any order: two siblings named in one
message are two people, and a person named with their role in one conversation and by name
alone in another is one person."""

from __future__ import annotations

import itertools
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agefacts.keys import user_key
from agefacts.load import Loader
from agefacts.reads import facts
from agefacts.summary import Summary

from ..helpers import ONTO, VIAS, claim, conversation, place, user_turn
from ..stories import MONTHS, families, home_at
from .test_time_answers import load_all, said


def person(handle: str, name: str | None, mention: str, rel: str | None = None) -> dict:
    ent: dict = {"handle": handle, "type": "Person", "mention": mention}
    ent |= {"resolution": "resolved", "name": name} if name else {"resolution": "nil_placeholder"}
    if rel:
        ent["attrs"] = {"rel": rel}
    return ent


SISTERS = said(
    "sisters",
    "My sister Ana lives in Porto and my sister Rita lives in Faro.",
    "2024-03-01T09:00:00Z",
    [
        claim("user", "sibling_of", "My sister Ana", obj="e1"),
        claim("e1", "lives_in", "Ana lives in Porto", obj="e2"),
        claim("user", "sibling_of", "my sister Rita", obj="e3"),
        claim("e3", "lives_in", "Rita lives in Faro", obj="e4"),
    ],
    [
        person("e1", "Ana", "My sister Ana", "sibling_of:user"),
        place("e2", "Porto"),
        person("e3", "Rita", "my sister Rita", "sibling_of:user"),
        place("e4", "Faro"),
    ],
)


def homes(db, who: str, **kw) -> list[str]:
    return [r["object"] for r in facts(db, who, namespace="eve", **kw).dicts() if r["predicate"] == "lives_in"]


@pytest.mark.parametrize("via", VIAS)
def test_two_siblings_named_in_one_message_are_two_people(db, via):
    """One entity, Ana, held both mentions: `facts Rita` said "no entity 'Rita'", and Ana lived
    in Faro and in Porto."""
    load_all(db, via, [SISTERS])
    assert homes(db, "Ana") == ["Porto"]
    assert homes(db, "Rita") == ["Faro"]
    siblings = sorted(r["object"] for r in facts(db, "user", namespace="eve").dicts() if r["predicate"] == "sibling_of")
    assert siblings == ["Ana", "Rita"]


RAVI = [
    said(
        "brother",
        "My brother Ravi lives in Delhi.",
        "2024-03-01T09:00:00Z",
        [
            claim("user", "sibling_of", "My brother Ravi", obj="e1"),
            claim("e1", "lives_in", "Ravi lives in Delhi", obj="e2"),
        ],
        [person("e1", "Ravi", "My brother Ravi", "sibling_of:user"), place("e2", "Delhi")],
    ),
    said(
        "moved",
        "Ravi moved to Pune in August.",
        "2024-09-01T09:00:00Z",
        [claim("e1", "lives_in", "Ravi moved to Pune in August", obj="e2", valid_from="2024-08")],
        [person("e1", "Ravi", "Ravi"), place("e2", "Pune")],
    ),
]


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("order", ["in order", "reversed"])
def test_a_name_met_again_is_the_person_named_with_their_role_before(db, via, order):
    """ "My brother Ravi" and a later "Ravi" were two Ravis (one keyed by the role, one by the
    name): `facts Ravi` gave two homes at once."""
    load_all(db, via, RAVI if order == "in order" else RAVI[::-1])
    assert homes(db, "Ravi", valid_at="2024-10-01") == ["Pune"]
    assert homes(db, "Ravi", valid_at="2024-05-01") == ["Delhi"]
    # The brother the owner has is that Ravi, and he is one entity.
    (brother,) = [r for r in facts(db, "user", namespace="eve").dicts() if r["predicate"] == "sibling_of"]
    assert brother["object"] == "Ravi"
    ravis = db.cypher("MATCH (p:Person) WHERE p.namespace = 'eve' AND p.name = 'Ravi' RETURN p.k", columns=["k"]).rows
    assert len(ravis) == 1


@pytest.mark.parametrize("via", VIAS)
def test_an_unnamed_role_stays_one_person_across_conversations(db, via):
    """Someone never named ("my boss") is known by the role: two conversations about my boss
    are about one person."""
    boss = person("e1", None, "my boss", "boss_of:user")
    load_all(
        db,
        via,
        [
            said(
                "b1",
                "My boss lives in Leeds.",
                "2024-03-01T09:00:00Z",
                [claim("e1", "lives_in", "My boss lives in Leeds", obj="e2")],
                [boss, place("e2", "Leeds")],
            ),
            said(
                "b2",
                "My boss moved to York in May.",
                "2024-06-01T09:00:00Z",
                [claim("e1", "lives_in", "My boss moved to York in May", obj="e2", valid_from="2024-05")],
                [boss | {"mention": "My boss"}, place("e2", "York")],
            ),
        ],
    )
    bosses = db.cypher(
        "MATCH (p:Person) WHERE p.namespace = 'eve' AND p.k <> $owner RETURN p.k", {"owner": user_key("eve")}, ["k"]
    ).rows
    assert len(bosses) == 1 and homes(db, "user") == []


@pytest.mark.parametrize("via", VIAS)
def test_the_load_says_who_it_joined_by_name_and_who_it_kept_apart(db, via):
    summary = Summary(list(Loader(db, ONTO, via=via).load_many((c.id, c) for c in [*RAVI, SISTERS])))
    assert summary.count("loaded") == 3
    assert summary.people() == [
        "one person: 'Ravi' of namespace 'eve', named with a role (sibling_of:user) and without one, "
        "in 2 conversations",
        "several people with one role: 'Ana', 'Rita' of namespace 'eve' are each sibling_of:user",
    ]
    assert summary.people()[0] in summary.text() and summary.to_json()["people"] == summary.people()


_NAMESPACES = itertools.count()


@settings(
    max_examples=int(os.environ.get("AGEFACTS_FUZZ_EXAMPLES", "12")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(convs=families(), data=st.data())
def test_generated_families_have_each_name_once_and_its_homes_in_time(paths, convs, data):
    """Relatives told of with and without their role, several in one message, loaded both ways
    in drawn orders: each name is one person, living where the latest move said, and the
    owner's siblings are the names said with the role."""
    ns = f"f{next(_NAMESPACES)}"
    items = []
    for i, mentions in enumerate(convs):
        entities, statements, parts = [], [], []
        for j, m in enumerate(mentions):
            said_as = f"my sister {m.name}" if m.with_role else m.name
            parts.append(said_as + (f" lives in {m.moves[0]}" if m.moves else " is well"))
            entities.append(person(f"e{j}", m.name, said_as, "sibling_of:user" if m.with_role else None))
            if m.with_role:
                statements.append(claim("user", "sibling_of", said_as, obj=f"e{j}"))
            if m.moves:
                entities.append(place(f"p{j}", m.moves[0]))
                statements.append(
                    claim(f"e{j}", "lives_in", f"{said_as} lives in {m.moves[0]}", obj=f"p{j}", valid_from=m.moves[1])
                )
        turn = user_turn(" and ".join(parts) + ".", f"2025-0{i + 1}-01T09:00:00Z", entities, statements)
        items.append(conversation(f"c{i}", [turn], namespace=ns))
    names = {m.name for c in convs for m in c}
    for db, via in zip(paths, VIAS, strict=True):
        for c in data.draw(st.permutations(items), label=f"{via} load order"):
            assert Loader(db, ONTO, via=via).load(c).status == "loaded", c.id
        for name in names:
            people = db.cypher(
                "MATCH (p:Person) WHERE p.namespace = $ns AND p.name = $n RETURN p.k", {"ns": ns, "n": name}, ["k"]
            ).rows
            assert len(people) == 1, (via, name)
            for month in ["2023-01", *MONTHS, "2025-12"]:
                got = [
                    r["object"]
                    for r in facts(db, name, namespace=ns, valid_at=month + "-15").dicts()
                    if r["predicate"] == "lives_in"
                ]
                assert got == home_at(convs, name, month), (via, name, month)
        siblings = [r["object"] for r in facts(db, "user", namespace=ns).dicts() if r["predicate"] == "sibling_of"]
        assert sorted(siblings) == sorted({m.name for c in convs for m in c if m.with_role}), via
