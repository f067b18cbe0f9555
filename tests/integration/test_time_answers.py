"""Answers a person would give about time, on both load paths: an end said without its start,
a correction, one value at a time, one meaning of "current", a fact taken back by hand."""

from __future__ import annotations

import pytest

from agefacts.inputs import read_conversations
from agefacts.load import Loader
from agefacts.ontology import Ontology
from agefacts.reads import current_facts, digest, facts, history

from ..helpers import EXAMPLES, ONTO, VIAS, claim, conversation, user_turn


def org(handle: str, name: str) -> dict:
    return {"handle": handle, "type": "Organization", "mention": name, "resolution": "resolved", "name": name}


def said(cid: str, text: str, at: str, statements: list[dict], entities=()) -> object:
    return conversation(cid, [user_turn(text, at, entities=list(entities), statements=statements)], namespace="eve")


def load_all(db, via: str, items, ontology: Ontology = ONTO) -> None:
    loader = Loader(db, ontology, via=via)
    for c in items:
        assert loader.load(c).status == "loaded", c.id


def rows(db, predicate: str, **kw) -> list[tuple]:
    return [
        (r["object"] if r["object"] is not None else r["value"], r["valid_from"], r["valid_until"])
        for r in facts(db, "user", namespace="eve", **kw).dicts()
        if r["predicate"] == predicate
    ]


NURSE = [
    said(
        "a",
        "I'm a nurse at Northwind Hospital.",
        "2024-05-10T09:00:00Z",
        [claim("user", "works_at", "nurse at Northwind Hospital", obj="e1")],
        [org("e1", "Northwind Hospital")],
    ),
    said(
        "b",
        "I started at St. Luke's this June.",
        "2025-06-20T09:00:00Z",
        [claim("user", "works_at", "I started at St. Luke's this June", obj="e1", valid_from="2025-06")],
        [org("e1", "St. Luke's")],
    ),
    said(
        "c",
        "I left St. Luke's in October.",
        "2025-11-03T09:00:00Z",
        [claim("user", "works_at", "I left St. Luke's in October", obj="e1", valid_until="2025-10", tense="past")],
        [org("e1", "St. Luke's")],
    ),
]


@pytest.mark.parametrize("via", VIAS)
def test_an_end_said_without_its_start_is_one_fact_with_the_start_said_before(db, via):
    """Northwind, then St. Luke's from June, then "I left St. Luke's in October": in March one
    job, in August St. Luke's once (June to October), in December none."""
    load_all(db, via, reversed(NURSE))
    assert rows(db, "works_at", valid_at="2025-03-01") == [("Northwind Hospital", None, "2025-06")]
    assert rows(db, "works_at", valid_at="2025-08-01") == [("St. Luke's", "2025-06", "2025-10")]
    assert rows(db, "works_at", valid_at="2025-12-01") == []
    # As known before the end was said, St. Luke's was current with no end.
    assert rows(db, "works_at", valid_at="2025-12-01", known_at="2025-07-01") == [("St. Luke's", "2025-06", None)]

    # Read from the employer's side, the same: Northwind's job ends where St. Luke's begins.
    def employer(name: str, at: str) -> list:
        return [(r["object"], r["valid_until"]) for r in facts(db, name, namespace="eve", valid_at=at).dicts()]

    assert employer("Northwind Hospital", "2025-03-01") == [("Northwind Hospital", "2025-06")]
    assert employer("Northwind Hospital", "2025-08-01") == []
    assert employer("St. Luke's", "2025-12-01") == []
    # The graph keeps every statement as said.
    assert len(history(db, "user", "works_at", namespace="eve").rows) == 3


@pytest.mark.parametrize("via", VIAS)
def test_the_shipped_examples_show_each_fact_once(db, via):
    load_all(db, via, [c for _, c in read_conversations([EXAMPLES])])
    dan = [r for r in facts(db, "user", namespace="dan", valid_at="2026-01-01").dicts() if r["predicate"] == "works_at"]
    assert [(r["object"], r["valid_until"], r["evidence"]) for r in dan] == [("Acme", "2026-03", 2)]
    tom = [r for r in facts(db, "Tom", namespace="ann").dicts() if r["predicate"] == "works_at"]
    assert [(r["object"], r["quote"]) for r in tom] == [("Acme", "starts at Acme on Monday")]
    listed = [(r["namespace"], r["subject"], r["predicate"], r["object"]) for r in current_facts(db).dicts()]
    assert len(listed) == len(set(listed)), "a current fact listed twice"
    for ns in ("nina", "omar", "dan"):
        lives = [r["object"] for r in current_facts(db, ns).dicts() if r["predicate"] == "lives_in"]
        assert len(lives) <= 1, (ns, lives)


def _allergies(extra: list[dict]) -> list:
    return [
        said(
            "d",
            "I'm allergic to peanuts. I like jazz and hiking.",
            "2024-01-10T09:00:00Z",
            [
                claim("user", "allergic_to", "allergic to peanuts", value="peanuts"),
                claim("user", "likes", "I like jazz and hiking", value="jazz"),
                claim("user", "likes", "I like jazz and hiking", value="hiking"),
            ],
        ),
        said(
            "e",
            "Correction: I'm not allergic to peanuts, it's tree nuts. And I don't like jazz any more.",
            "2024-03-01T09:00:00Z",
            [
                claim(
                    "user",
                    "allergic_to",
                    "I'm not allergic to peanuts",
                    value="peanuts",
                    polarity="negated",
                    correction=True,
                ),
                claim("user", "allergic_to", "it's tree nuts", value="tree nuts"),
                claim("user", "likes", "I don't like jazz any more", value="jazz", polarity="negated"),
            ]
            + extra,
        ),
    ]


@pytest.mark.parametrize("via", VIAS)
def test_a_correction_withdraws_and_a_negation_ends_a_many_valued_fact(db, via):
    load_all(db, via, reversed(_allergies([])))
    assert rows(db, "allergic_to") == [("tree nuts", None, None)]
    kinds = sorted((r["value"], r["kind"]) for r in history(db, "user", "allergic_to", namespace="eve").dicts())
    assert kinds == [("peanuts", "corrects"), ("peanuts", "states"), ("tree nuts", "states")]
    # Believed before the correction: peanuts.
    assert rows(db, "allergic_to", known_at="2024-02-01") == [("peanuts", None, None)]
    # A correction says it was never so, at any valid time.
    assert rows(db, "allergic_to", valid_at="2024-01-15") == [("tree nuts", None, None)]
    # "Not any more" ends jazz when it was said; hiking stays; jazz held before.
    assert rows(db, "likes") == [("hiking", None, None)]
    assert sorted(rows(db, "likes", valid_at="2024-02-01")) == [
        ("hiking", None, None),
        ("jazz", None, "2024-03-01T09:00:00Z"),
    ]
    assert sorted(rows(db, "likes", valid_at="2024-02-01", known_at="2024-02-01")) == [
        ("hiking", None, None),
        ("jazz", None, None),
    ]


AGE = Ontology.model_validate(
    {
        **ONTO.model_dump(exclude_none=True),
        "predicates": [p.model_dump(exclude_none=True) for p in ONTO.predicates]
        + [{"name": "age", "subject": ["Person"], "value": True, "single_valued": True}],
    }
)


@pytest.mark.parametrize("via", VIAS)
def test_one_number_said_as_an_integer_and_as_a_float_is_one_value(db, via):
    load_all(
        db,
        via,
        [
            said("a", "I'm 30.", "2024-01-10T09:00:00Z", [claim("user", "age", "I'm 30", value=30)]),
            said("b", "I'm 30 now.", "2024-05-10T09:00:00Z", [claim("user", "age", "I'm 30 now", value=30.0)]),
        ],
        AGE,
    )
    assert rows(db, "age") == [(30, None, None)]
    assert len(history(db, "user", "age", namespace="eve").rows) == 1


@pytest.mark.parametrize("via", VIAS)
def test_current_facts_agree_with_facts_on_what_ended(db, via):
    """A fact that ended in 2020 is current nowhere: not in the listing of current facts
    (what `agefacts demo` prints), not in `facts`."""
    load_all(
        db,
        via,
        [
            said(
                "a",
                "I lived in Amman until 2020, and I like tea.",
                "2024-01-10T09:00:00Z",
                [
                    claim(
                        "user", "lives_in", "I lived in Amman until 2020", obj="e1", valid_until="2020", tense="past"
                    ),
                    claim("user", "likes", "I like tea", value="tea"),
                ],
                [{"handle": "e1", "type": "Place", "mention": "Amman", "resolution": "resolved", "name": "Amman"}],
            )
        ],
    )
    listed = sorted((r["predicate"], r["object"] or r["value"]) for r in current_facts(db, "eve").dicts())
    assert listed == [("likes", "tea")]
    assert (
        sorted((r["predicate"], r["object"] or r["value"]) for r in facts(db, "user", namespace="eve").dicts())
        == listed
    )
    assert rows(db, "lives_in", valid_at="2019-06-01") == [("Amman", None, "2020")]


def test_the_reading_does_not_depend_on_the_load_path(dsn, graph_name):
    """Both paths, and a load in another order, give one digest for the stories above."""
    from agefacts.db import Database

    items = [*NURSE, *_allergies([])]
    digests = set()
    for i, (via, order) in enumerate((("bulk", items), ("cypher", items[::-1]), ("bulk", items[1::2] + items[::2]))):
        with Database(dsn, f"{graph_name}_p{i}") as other:
            load_all(other, via, order)
            digests.add(digest(other))
            other.drop_graph()
    assert len(digests) == 1


def test_one_fact_is_taken_back_as_data_and_forgotten_like_a_conversation(dsn, graph_name, other_graph, capsys):
    """Memory.correct records an authored correction: the fact is withdrawn from its known
    time on (believed before it), the right value stands, the correction is exported and
    replayed like any conversation, and forgetting it brings the fact back."""
    import asyncio

    from agefacts import AsyncMemory, Memory
    from agefacts.cli import main
    from agefacts.errors import QueryError

    with Memory(dsn, graph_name) as memory:
        for c in _allergies([]):
            memory.add(c)
        before = digest(memory.db)
        with pytest.raises(QueryError, match="has no likes 'opera'.*'hiking', 'jazz'"):
            memory.correct("user", "likes", "opera", namespace="eve", by="assistant")
        added = memory.correct(
            "user", "likes", "Hiking", namespace="eve", by="assistant", instead="climbing", at="2024-04-01T00:00:00Z"
        )
        assert added.status == "loaded" and added.conversation.startswith("correction-")
        now = {(f.predicate, f.value) for f in memory.facts("user", namespace="eve")}
        assert ("likes", "hiking") not in now and ("likes", "climbing") in now
        believed = {(f.predicate, f.value) for f in memory.facts("user", namespace="eve", known_at="2024-03-15")}
        assert ("likes", "hiking") in believed and ("likes", "climbing") not in believed
        (fix,) = memory.export("eve", [added.conversation])
        assert fix.title == "correction by assistant" and fix.model is None
        assert [s.correction for s in fix.turns[0].recorded.statements] == [True, None]
        assert added.correction == fix.turns[0].text  # its words, as the command line prints them
        # Replayed into an empty graph, the export gives the same graph.
        fresh = other_graph("replay")
        load_all(fresh, "cypher", memory.export("eve"))
        assert digest(fresh) == digest(memory.db)
        memory.forget("eve", [added.conversation])
        assert digest(memory.db) == before

    async def twin():
        async with AsyncMemory(dsn, graph_name) as m:
            return await m.correct("user", "likes", "hiking", namespace="eve", by="assistant", at="2024-04-01")

    twin_added = asyncio.run(twin())
    assert twin_added.status == "loaded" and "assistant corrects: user likes hiking" in str(twin_added.correction)
    # From the command line: said, undone with the command it prints.
    capsys.readouterr()
    env_graph = ["--graph", graph_name, "--dsn", dsn]
    assert main(["correct", "user", "allergic_to", "tree nuts", "--namespace", "eve", "--by", "Eve", *env_graph]) == 0
    out = capsys.readouterr().out
    assert "Eve corrects: user allergic_to tree nuts is not so" in out
    undo = out.split("undo it: ")[1].rstrip(")\n").split()
    assert main([*undo[1:], *env_graph]) == 0
    assert main(["correct", "user", "allergic_to", "dust", "--namespace", "eve", "--by", "Eve", *env_graph]) == 1
    assert "has no allergic_to 'dust'" in capsys.readouterr().err


def test_the_demo_prints_each_fact_once_as_the_readme_shows(cli_env, capsys):
    from pathlib import Path

    from agefacts.cli import main

    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    after = readme.split("`make demo` ends with facts and the words they were read from:\n\n")[1]
    block = after.split("```\n", 1)[1].split("```")[0]
    shown = [line for line in block.splitlines() if line != "..."]
    printed = out.splitlines()
    assert printed[: len(shown)] == shown
    rows = [line for line in printed if "|" in line][1:]
    assert len(rows) == len(set(rows)) and any("works_at" in r and "Acme" in r for r in rows)
