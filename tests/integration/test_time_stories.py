"""Generated life stories loaded on both load paths, in any order, answered at every valid and
known time and checked against the interval oracle in tests/stories.py."""

from __future__ import annotations

import itertools
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agefacts.load import Loader
from agefacts.named import run_named
from agefacts.reads import facts
from agefacts.timeline import fact_rows

from ..helpers import ONTO, claim, conversation, user_turn
from ..stories import ASK_KNOWN, ASK_VALID, PREDICATES, Said, each_statement, oracle, stories
from .recipes import ask

_NAMESPACES = itertools.count()


def conversations(story: list[Said], namespace: str) -> list:
    out = []
    for s in story:
        single, typ, _ = PREDICATES[s.predicate]
        turns = []
        for n, at in enumerate(s.said):
            text = f"s{s.i} said {n}: {s.predicate} {s.target}"
            kw: dict = {"valid_from": s.valid_from, "valid_until": s.valid_until}
            kw = {k: v for k, v in kw.items() if v is not None}
            if s.kind != "states":
                kw["polarity"] = "negated"
            if s.kind == "corrects":
                kw["correction"] = True
            if s.kind == "calls_off":
                kw["tense"] = "future"  # "we're not moving to Riga after all"
            target = {"obj": "e1"} if typ else {"value": s.target}
            entities = [{"handle": "e1", "type": typ, "mention": s.target, "resolution": "resolved", "name": s.target}]
            statements = [claim("user", s.predicate, text, **target, **kw)]
            if s.beside is not None:
                # the same message says what holds instead: "not X, it's Y"
                instead = f"instead {s.beside}"
                text += f"; {instead}"
                entities.append(
                    {"handle": "e2", "type": typ, "mention": s.beside, "resolution": "resolved", "name": s.beside}
                )
                statements.append(
                    claim("user", s.predicate, instead, **({"obj": "e2"} if typ else {"value": s.beside}))
                )
            turns.append(user_turn(text, at, entities=entities if typ else [], statements=statements))
        out.append(conversation(f"c{s.i}", turns, namespace=namespace))
    return out


@settings(
    max_examples=int(os.environ.get("AGEFACTS_FUZZ_EXAMPLES", "12")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(story=stories(max_size=6), data=st.data())
def test_generated_stories_answer_as_the_oracle_on_both_load_paths(paths, story, data):
    bulk, cypher = paths
    ns = f"s{next(_NAMESPACES)}"
    convs = conversations(story, ns)
    for db, via in ((bulk, "bulk"), (cypher, "cypher")):
        order = data.draw(st.permutations(convs), label=f"{via} load order")
        loader = Loader(db, ONTO, via=via)
        for c in order:
            assert loader.load(c).status == "loaded", c.id
    user = run_named(bulk, "entities", {"text": "user", "namespace": ns}).dicts()[0]["key"]
    checked = 0
    for known_at in ASK_KNOWN:
        said = [
            sorted(
                (
                    {**r, "said_at": sorted(r["said_at"]), "said": sorted(r["said"])}
                    for r in run_named(db, "fact_statements", {"entity": user, "known_at": known_at}).dicts()
                ),
                key=_by_key,
            )
            for db in (bulk, cypher)
        ]
        assert said[0] == said[1], known_at
        for valid_at in ASK_VALID:
            got = fact_rows(said[0], valid_at, about=user)
            shown = [(r["predicate"], r["object"] if r["object"] is not None else r["value"]) for r in got]
            assert len(shown) == len(set(shown)), ("a fact shown twice", valid_at, known_at, got)
            assert set(shown) == oracle(story, valid_at, known_at), (valid_at, known_at)
            # The graph answers for itself: the recipe a person copies, on both graphs.
            want = sorted(_recipe_row(r, r["object"] if r["object"] is not None else r["value"]) for r in got)
            for db in (bulk, cypher):
                rows = ask(db, "valid at T, as known at K", namespace=ns, valid=valid_at, known=known_at)
                assert sorted(_recipe_row(r, r["value"]) for r in rows) == want, (valid_at, known_at)
            checked += 1
    assert checked == len(ASK_KNOWN) * len(ASK_VALID)
    # The library's own call reads the same, about the user and about each place and employer
    # (read from the object's side: a single-valued group's other values end its facts).
    t, k = data.draw(st.sampled_from(ASK_VALID)), data.draw(st.sampled_from(ASK_KNOWN))
    expected = oracle(story, t, k)
    table = facts(cypher, "user", namespace=ns, valid_at=t, known_at=k).dicts()
    assert {(r["predicate"], r["object"] or r["value"]) for r in table} == expected
    for name in sorted({s.target for s in each_statement(story) if PREDICATES[s.predicate][1]}):
        about = facts(bulk, name, namespace=ns, valid_at=t, known_at=k).dicts()
        assert {(r["predicate"], r["object"]) for r in about} == {f for f in expected if f[1] == name}, name
    # Forgetting one conversation recomputes the versions of what it touched: the graph then
    # answers as the oracle does for the story without what that conversation said.
    if len(story) > 1:
        gone = data.draw(st.sampled_from(story), label="forgotten")
        rest = [s for s in story if s is not gone]
        for db, via in ((bulk, "bulk"), (cypher, "cypher")):
            assert Loader(db, ONTO, via=via).forget(ns, [f"c{gone.i}"]) == [f"c{gone.i}"]
            for known_at in ASK_KNOWN:
                for valid_at in ASK_VALID:
                    rows = ask(db, "valid at T, as known at K", namespace=ns, valid=valid_at, known=known_at)
                    shown = {(r["predicate"], r["value"]) for r in rows}
                    assert len(shown) == len(rows) and shown == oracle(rest, valid_at, known_at), (
                        via,
                        valid_at,
                        known_at,
                    )


def _recipe_row(r: dict, value) -> tuple:
    return tuple(
        repr(x) for x in (r["predicate"], value, r["valid_from"], r["valid_until"], r["recorded_at"], r["quote"])
    )


def _by_key(row: dict) -> str:
    return row["statement"]
