"""Two kinds of time: valid time, known time, supersession and as-of queries."""

from __future__ import annotations

import pytest

from agefacts.temporal import TimeError, normalise_instant, normalise_rrule, normalise_valid


@pytest.mark.parametrize(
    "given, normal",
    [
        ("2024", "2024"),
        ("2024-06", "2024-06"),
        ("2024-06-01", "2024-06-01"),
        ("2024-06-01T10:00:00+02:00", "2024-06-01T08:00:00Z"),
        ("2024-06-01T10:00:00", "2024-06-01T10:00:00"),
        ("2024-06-01T10:00:00.5Z", "2024-06-01T10:00:00.500000Z"),
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
