"""The write model when conversations change, race, repeat, or carry odd values: each test
here is a defect that was reproduced outside the suite, on both load paths."""

from __future__ import annotations

from agefacts.compile import plan
from agefacts.consolidate import result_of
from agefacts.names import is_identifier

from ..helpers import ONTO, likes, numbers_conversation


def test_identifiers_do_not_end_in_a_newline():
    assert not is_identifier("rel\n") and not is_identifier("name\n") and is_identifier("rel")
    conv = numbers_conversation([1])
    ent = result_of(conv, ONTO).entities[0]
    assert ent.attrs == {"nick": "T"}  # "rel\n" is not an attribute name: dropped, with a rejection


def test_the_plan_names_the_tier_not_match():
    p = plan(
        likes("c1", "tea", "2024-01-01T10:00:00Z"), result_of(likes("c1", "tea", "2024-01-01T10:00:00Z"), ONTO), ONTO
    )
    (ev,) = [e for e in p.edges if e.label == "EVIDENCED_BY"]
    assert ev.props["tier"] == "exact" and "match" not in ev.props
