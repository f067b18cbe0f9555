"""Corrections mean what a person meant, on both load paths: a date put right in the same
message moves the start (it erased the fact), and a fact said again after it was taken back
is known, quoted and counted from when it was said again (it cited the words taken back)."""

from __future__ import annotations

import pytest

from agefacts.load import Loader
from agefacts.reads import digest, facts, history

from ..helpers import ONTO, VIAS, claim, conversation, user_turn
from .test_time_answers import load_all, org, said

HOOLI = [
    said(
        "a",
        "I started at Hooli in May.",
        "2024-06-03T09:00:00Z",
        [claim("user", "works_at", "I started at Hooli in May", obj="e1", valid_from="2024-05")],
        [org("e1", "Hooli")],
    ),
    said(
        "b",
        "Sorry, I started at Hooli in April, not May.",
        "2024-06-10T09:00:00Z",
        [
            claim(
                "user",
                "works_at",
                "not May",
                obj="e1",
                valid_from="2024-05",
                polarity="negated",
                tense="past",
                correction=True,
            ),
            claim("user", "works_at", "I started at Hooli in April", obj="e1", valid_from="2024-04"),
        ],
        [org("e1", "Hooli")],
    ),
]


def jobs(db, **kw) -> list[tuple]:
    return [
        (r["object"], r["valid_from"], r["valid_until"], r["quote"], r["recorded_at"], r["evidence"])
        for r in facts(db, "user", namespace="eve", **kw).dicts()
        if r["predicate"] == "works_at"
    ]


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("order", ["in order", "reversed"])
def test_a_date_corrected_in_the_same_message_moves_the_start(db, via, order):
    load_all(db, via, HOOLI if order == "in order" else HOOLI[::-1])
    april = ("Hooli", "2024-04", None, "I started at Hooli in April", "2024-06-10T09:00:00Z", 1)
    assert jobs(db, valid_at="2024-04-15") == [april]
    assert jobs(db, valid_at="2024-08-01") == [april]
    # As known before the correction, the May start stood.
    may = ("Hooli", "2024-05", None, "I started at Hooli in May", "2024-06-03T09:00:00Z", 1)
    assert jobs(db, valid_at="2024-08-01", known_at="2024-06-05T00:00:00Z") == [may]
    assert jobs(db, valid_at="2024-04-15", known_at="2024-06-05T00:00:00Z") == []
    # A correction closes nothing in valid time: no statement runs from May to May.
    for r in history(db, "user", "works_at", namespace="eve").dicts():
        assert r["valid_until"] is None or r["valid_from"] is None or r["valid_from"] < r["valid_until"], r


def allergy(cid: str, text: str, at: str, statements: list[dict]):
    return said(cid, text, at, statements)


LATEX = [
    allergy(
        "a",
        "I'm allergic to latex.",
        "2024-03-01T09:00:00Z",
        [claim("user", "allergic_to", "allergic to latex", value="latex")],
    ),
    allergy(
        "b",
        "Correction: not latex, it's nickel.",
        "2024-06-01T09:00:00Z",
        [
            claim("user", "allergic_to", "not latex", value="latex", polarity="negated", correction=True),
            claim("user", "allergic_to", "it's nickel", value="nickel"),
        ],
    ),
    allergy(
        "c",
        "Turns out I am allergic to latex after all.",
        "2025-02-01T09:00:00Z",
        [claim("user", "allergic_to", "I am allergic to latex", value="latex")],
    ),
]


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("order", ["in order", "reversed"])
def test_a_fact_said_again_after_its_correction_cites_the_words_said_again(db, via, order):
    load_all(db, via, LATEX if order == "in order" else LATEX[::-1])

    def allergies(**kw):
        return [
            (r["value"], r["quote"], r["recorded_at"], r["evidence"], r["conversation"])
            for r in facts(db, "user", namespace="eve", **kw).dicts()
            if r["predicate"] == "allergic_to"
        ]

    assert allergies(valid_at="2025-03-01") == [
        ("nickel", "it's nickel", "2024-06-01T09:00:00Z", 1, "b"),
        ("latex", "I am allergic to latex", "2025-02-01T09:00:00Z", 1, "c"),
    ]
    # Between the correction and the second saying: nickel alone.
    assert allergies(valid_at="2024-09-01", known_at="2024-09-01T00:00:00Z") == [
        ("nickel", "it's nickel", "2024-06-01T09:00:00Z", 1, "b")
    ]
    # Before the correction: latex, as first said.
    assert allergies(valid_at="2024-04-01", known_at="2024-04-01T00:00:00Z") == [
        ("latex", "allergic to latex", "2024-03-01T09:00:00Z", 1, "a")
    ]


BOTH_JOBS = [
    said(
        "a",
        "I joined Vandelay in June.",
        "2024-06-20T09:00:00Z",
        [claim("user", "works_at", "I joined Vandelay in June", obj="e1", valid_from="2024-06")],
        [org("e1", "Vandelay")],
    ),
    said(
        "b",
        "I finally quit my old job at Kramerica in October, I did both for a while.",
        "2024-11-02T09:00:00Z",
        [
            claim(
                "user",
                "works_at",
                "I finally quit my old job at Kramerica in October",
                obj="e1",
                valid_until="2024-10",
                tense="past",
            )
        ],
        [org("e1", "Kramerica")],
    ),
]


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("order", ["in order", "reversed"])
def test_an_old_jobs_end_said_while_a_newer_job_holds_keeps_the_old_job_before_it(db, via, order):
    """Its end vanished: in March nothing. A person says Kramerica (start unknown); works_at
    takes one value at a time, so Kramerica holds until Vandelay begins."""
    load_all(db, via, BOTH_JOBS if order == "in order" else BOTH_JOBS[::-1])

    def job(at, **kw):
        return [(o, vf, vu) for o, vf, vu, *_ in jobs(db, valid_at=at, **kw)]

    assert job("2024-03-01") == [("Kramerica", None, "2024-06")]
    assert job("2024-08-01") == [("Vandelay", "2024-06", None)]
    assert job("2024-12-01") == [("Vandelay", "2024-06", None)]
    # As known before the end was said, only Vandelay was known.
    assert job("2024-03-01", known_at="2024-07-01T00:00:00Z") == []


def riga(cid: str, text: str, at: str, statement: dict):
    return said(
        cid,
        text,
        at,
        [statement],
        [{"handle": "e1", "type": "Place", "mention": "Riga", "resolution": "resolved", "name": "Riga"}],
    )


PLAN = [
    riga(
        "a",
        "We move to Riga in June!",
        "2024-03-01T09:00:00Z",
        claim("user", "lives_in", "We move to Riga in June", obj="e1", valid_from="2024-06", tense="future"),
    ),
    riga(
        "b",
        "We're not moving to Riga after all.",
        "2024-04-15T09:00:00Z",
        claim(
            "user",
            "lives_in",
            "not moving to Riga after all",
            obj="e1",
            valid_from="2024-06",
            polarity="negated",
            tense="future",
        ),
    ),
]


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("order", ["in order", "reversed"])
def test_a_called_off_plan_is_off(db, via, order):
    """Refused ("polarity 'negated' is not admitted as a fact"), so July still read Riga."""
    load_all(db, via, PLAN if order == "in order" else PLAN[::-1])

    def home(at, **kw):
        return [
            r["object"]
            for r in facts(db, "user", namespace="eve", valid_at=at, **kw).dicts()
            if r["predicate"] == "lives_in"
        ]

    assert home("2024-07-01") == []
    assert home("2024-07-01", known_at="2024-04-01T00:00:00Z") == ["Riga"]  # planned, before it was called off


def test_a_number_in_words_is_the_number_in_digits(db, other_graph):
    """30 said as a number and later as "thirty" gave one row 'thirty' with one piece of
    evidence: a person says 30, told twice."""
    from agefacts.ontology import Ontology

    spec = ONTO.model_dump()
    spec["predicates"].append(
        {"name": "age", "subject": ["Person"], "value": True, "number": True, "single_valued": True}
    )
    aged = Ontology.model_validate(spec)
    told = [
        said("a", "I'm 30.", "2024-01-10T09:00:00Z", [claim("user", "age", "I'm 30", value=30)]),
        said(
            "b", "As I said, I'm thirty.", "2024-02-10T09:00:00Z", [claim("user", "age", "I'm thirty", value="thirty")]
        ),
        said(
            "c",
            "I'm about thirty-ish.",
            "2024-03-10T09:00:00Z",
            [claim("user", "age", "about thirty-ish", value="about thirty-ish")],
        ),
    ]
    graphs = {"bulk": db, "cypher": other_graph("cypher")}
    for via, target in graphs.items():
        loader = Loader(target, aged, via=via)
        outs = [loader.load(c) for c in told]
        assert [o.status for o in outs] == ["loaded"] * 3
        assert [reason for _, _, reason, _ in outs[2].rejections] == ["not_a_number"], outs[2].rejections
        ages = [
            (r["value"], r["evidence"])
            for r in facts(target, "user", namespace="eve", valid_at="2024-06-01").dicts()
            if r["predicate"] == "age"
        ]
        assert ages == [(30, 2)], via
    assert digest(graphs["bulk"]) == digest(graphs["cypher"])


PEANUTS = [
    conversation(
        "a",
        [
            user_turn(
                "Please remember I'm allergic to peanuts, it's serious.",
                "2024-03-01T09:00:00Z",
                statements=[claim("user", "allergic_to", "I'm allergic to peanuts", value="peanuts")],
            ),
            {"speaker": "assistant", "text": "Got it, no peanuts.", "at": "2024-03-01T09:00:05Z"},
        ],
        namespace="eve",
    ),
    conversation(
        "b",
        [
            user_turn(
                "Sorry, I'm not allergic to peanuts, it's sesame.",
                "2024-05-01T09:00:00Z",
                statements=[
                    claim(
                        "user",
                        "allergic_to",
                        "not allergic to peanuts",
                        value="peanuts",
                        polarity="negated",
                        correction=True,
                    ),
                    claim("user", "allergic_to", "it's sesame", value="sesame"),
                ],
            )
        ],
        namespace="eve",
    ),
]


@pytest.mark.parametrize("via", VIAS)
def test_words_taken_back_are_marked_and_a_question_about_them_answers_with_the_correction_first(
    db, dsn, graph_name, via
):
    """After peanuts was corrected to sesame, ask "Can I eat peanuts?" gave sesame and then
    the messages that say peanuts with nothing saying they were taken back."""
    import asyncio

    from agefacts.memory import AsyncMemory, Memory
    from agefacts.retrieve import ask

    load_all(db, via, PEANUTS)
    answer = ask(db, "Can I eat peanuts?", ONTO, namespace="eve")
    (correction,) = answer.corrections
    assert (correction["predicate"], correction["what"], correction["corrected"]) == ("allergic_to", "peanuts", True)
    assert correction["by_quote"] == "not allergic to peanuts" and correction["by_conversation"] == "b"
    first = answer.context().splitlines()[0]
    assert first.startswith("[!] not so: user allergic_to peanuts was taken back at 2024-05-01T09:00:00Z"), first
    said = next(m for m in answer.messages if m["text"].startswith("Please remember"))
    assert [w["what"] for w in said["withdrawn"]] == ["peanuts"]
    assert "was taken back at 2024-05-01T09:00:00Z" in next(
        line for line in answer.context().splitlines() if "Please remember" in line
    )
    # As known before the correction, nothing was taken back.
    before = ask(db, "Can I eat peanuts?", ONTO, namespace="eve", known_at="2024-04-01T00:00:00Z")
    assert before.corrections == [] and all(not m.get("withdrawn") for m in before.messages)
    # The library's memories say the same, in their typed results.
    with Memory(dsn, graph_name, ontology=ONTO) as memory:
        recalled = memory.ask("Can I eat peanuts?", namespace="eve")
    assert len(recalled.corrections) == 1 and "taken back" in recalled.corrections[0]
    assert any(m.withdrawn for m in recalled.messages)

    async def on_async():
        async with AsyncMemory(dsn, graph_name, ontology=ONTO) as memory:
            return await memory.ask("Can I eat peanuts?", namespace="eve")

    assert asyncio.run(on_async()).corrections == recalled.corrections


@pytest.mark.parametrize("via", VIAS)
def test_a_time_named_in_the_question_is_the_valid_time_asked_at(db, dsn, graph_name, via, capsys, monkeypatch):
    """ "Where did I live in March 2025?" answered today's city unless --valid-at was given."""
    import asyncio

    from agefacts.cli import main
    from agefacts.inputs import read_conversations
    from agefacts.memory import AsyncMemory, Memory
    from agefacts.retrieve import ask

    from ..helpers import EXAMPLES

    load_all(db, via, [c for _, c in read_conversations([EXAMPLES / f"nina-0{i}.json" for i in (1, 2, 3)])])

    def homes(answer):
        return [f["object"] for f in answer.facts if f["predicate"] == "lives_in"]

    then = ask(db, "Where did I live in October 2024?", ONTO, namespace="nina")
    assert homes(then) == ["Oslo"] and then.as_of == "2024-10-01"
    assert then.context().splitlines()[0] == "(facts as of 2024-10-01, the time the question names)"
    assert homes(ask(db, "Where did I live in March 2024?", ONTO, namespace="nina")) == ["Lyon"]
    now = ask(db, "Where do I live?", ONTO, namespace="nina")
    assert homes(now) == ["Bergen"] and now.as_of is None
    # A valid time given is the one read at, whatever the question names.
    given = ask(db, "Where did I live in March 2024?", ONTO, namespace="nina", valid_at="2025-06-01")
    assert homes(given) == ["Bergen"] and given.as_of is None
    with Memory(dsn, graph_name, ontology=ONTO) as memory:
        recalled = memory.ask("Where did I live in October 2024?", namespace="nina")
    assert recalled.as_of == "2024-10-01" and [f.object for f in recalled.facts if f.predicate == "lives_in"] == [
        "Oslo"
    ]

    async def on_async():
        async with AsyncMemory(dsn, graph_name, ontology=ONTO) as memory:
            return await memory.ask("Where did I live in October 2024?", namespace="nina")

    assert asyncio.run(on_async()).as_of == "2024-10-01"
    monkeypatch.setenv("AGEFACTS_DSN", dsn)
    monkeypatch.setenv("AGEFACTS_GRAPH", graph_name)
    capsys.readouterr()
    assert main(["ask", "Where did I live in October 2024?", "--namespace", "nina"]) == 0
    out = capsys.readouterr().out
    assert "As of 2024-10-01, the time the question names" in out and "Oslo" in out
