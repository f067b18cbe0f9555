"""Two kinds of time: valid time, known time, supersession and as-of queries."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agefacts.errors import TimeError
from agefacts.temporal import normalise_instant, normalise_rrule, normalise_valid


@pytest.mark.parametrize(
    "given, normal",
    [
        ("2024", "2024"),
        ("2024-06", "2024-06"),
        ("2024-06-01", "2024-06-01"),
        ("2024-06-01T10:00:00+02:00", "2024-06-01T08:00:00Z"),
        ("2024-06-01T10:00:00", "2024-06-01T10:00:00"),
        ("2024-06-01T10:00:00.5Z", "2024-06-01T10:00:00Z"),
        ("2024-06-01T10:00:00.999+02:00", "2024-06-01T08:00:00Z"),
        ("2024-06-01T10:00:00.25", "2024-06-01T10:00:00"),
    ],
)
def test_valid_times_normalise(given, normal):
    assert normalise_valid(given) == normal


def test_instants_and_rrules_normalise_or_explain():
    assert normalise_instant("2024-06-01") == "2024-06-01T00:00:00Z"
    assert normalise_instant("2024-06-01T12:00:00-05:00") == "2024-06-01T17:00:00Z"
    assert normalise_rrule("RRULE:byday=mo,we;freq=weekly") == "FREQ=WEEKLY;BYDAY=MO,WE"
    for bad in ("2024-13-01", "soon", ""):
        with pytest.raises(TimeError):
            normalise_valid(bad)
    with pytest.raises(TimeError, match="RRULE"):
        normalise_rrule("FREQ=FORTNIGHTLY")


# -- the whole range of years, and rules that are one rule --------------------------------------------
def test_every_year_is_four_digits_and_sorts_as_text():
    from agefacts.temporal import normalise_instant, normalise_valid

    early = normalise_instant("0999-01-01T00:00:00Z")
    assert early == "0999-01-01T00:00:00Z" and early < normalise_instant("2024-01-01T00:00:00Z")
    assert normalise_instant(early) == early  # what is stored reads back as itself
    assert normalise_valid("0999-01-01T00:00:00+00:00") == "0999-01-01T00:00:00Z"
    assert normalise_instant("0001-01-01T01:00:00+01:00") == "0001-01-01T00:00:00Z"


@pytest.mark.parametrize("text", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:30:00-01:00"])
def test_an_instant_outside_the_years_once_in_utc_is_refused_with_a_sentence(text):
    from agefacts.errors import TimeError
    from agefacts.temporal import normalise_instant, normalise_valid

    for norm in (normalise_instant, normalise_valid):
        with pytest.raises(TimeError, match="outside the years 0001 to 9999"):
            norm(text)


@pytest.mark.parametrize(
    "rule, why",
    [
        ("FREQ=WEEKLY;INTERVAL=0", "INTERVAL must be a positive"),
        ("FREQ=DAILY;COUNT=-5", "COUNT must be a positive"),
        ("FREQ=DAILY;COUNT=0", "COUNT must be a positive"),
        ("DTSTART:20240101T000000Z\nRRULE:FREQ=WEEKLY", "one iCalendar RRULE"),
        ("FREQ=WEEKLY\nEXDATE:20240108T000000Z", "one iCalendar RRULE"),
        ("FREQ=WEEKLY;COUNT=3;UNTIL=20250101T000000Z", "COUNT and UNTIL"),
        ("FREQ=WEEKLY;FREQ=DAILY", "FREQ"),
        ("FREQ=WEEKLY;COLOR=BLUE", "COLOR"),
    ],
)
def test_a_recurrence_is_one_rule_with_positive_counts(rule, why):
    from agefacts.errors import TimeError
    from agefacts.temporal import normalise_rrule

    with pytest.raises(TimeError, match=why):
        normalise_rrule(rule)


def test_good_recurrences_still_normalise():
    from agefacts.temporal import normalise_rrule

    assert normalise_rrule("rrule:byday=TU;freq=weekly;interval=2") == "FREQ=WEEKLY;BYDAY=TU;INTERVAL=2"
    assert normalise_rrule("FREQ=YEARLY;COUNT=3") == "FREQ=YEARLY;COUNT=3"


# -- text order is time order, fractions of a second included ---------------------------------------
_ZONES = st.integers(min_value=-14 * 60, max_value=14 * 60).map(lambda m: timezone(timedelta(minutes=m)))
_TIMES = st.datetimes(
    min_value=datetime(1000, 1, 2), max_value=datetime(9998, 12, 30), timezones=st.one_of(st.just(UTC), _ZONES)
)


def _spelled(dt: datetime, how: int) -> str:
    # The ways data spells a time: Python's isoformat (a fraction only when there is one),
    # JavaScript's toISOString (always milliseconds, "Z"), and whole seconds.
    if how == 0:
        return dt.isoformat()
    if how == 1:
        u = dt.astimezone(UTC)
        return u.strftime("%Y-%m-%dT%H:%M:%S.") + f"{u.microsecond // 1000:03d}Z"
    return dt.replace(microsecond=0).isoformat()


@given(_TIMES, _TIMES, st.integers(0, 2), st.integers(0, 2))
def test_stored_instants_compare_as_text_in_time_order(a, b, how_a, how_b):
    """Every comparison of times in Cypher is one of text: whatever fractions the data gives,
    a time that is earlier is never stored as text that sorts later (the fraction's "." sorts
    before the "Z" of a whole second)."""
    first, second = sorted((a, b))
    for norm in (normalise_instant, normalise_valid):
        x, y = norm(_spelled(first, how_a)), norm(_spelled(second, how_b))
        assert x <= y, (first, second, x, y)
        assert norm(x) == x  # what is stored reads back as itself
