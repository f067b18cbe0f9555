"""Times, normalised to one text form so that they compare as strings in Cypher.

- A message time (``at``, known time) is an instant: stored as UTC ``YYYY-MM-DDTHH:MM:SSZ``.
  An ``at`` without a zone is read as UTC.
- Every datetime is kept to the second, its fraction dropped: with the fraction kept,
  "10:00:00.5Z" would sort before "10:00:00Z" as text ("." before "Z"), and every comparison of
  times in Cypher is one of text.
- A valid time keeps the precision it was given: ``YYYY``, ``YYYY-MM``, ``YYYY-MM-DD``, or a
  datetime, stored in UTC with ``Z`` when it has a zone and without one ("floating", as said)
  when it has none. Because every form is a prefix of the longer ones, plain string
  comparison orders them: "2024-06" < "2024-06-15" < "2024-07".
- A recurrence is an iCalendar RRULE, validated by dateutil and stored upper-case without the
  ``RRULE:`` prefix, with FREQ first and the other parts sorted.
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, date, datetime

from dateutil import rrule

from .errors import TimeError

__all__ = [
    "instant_text",
    "normalise_instant",
    "normalise_rrule",
    "normalise_valid",
    "now_instant",
    "to_python",
]


_PARTIAL = re.compile(r"(\d{4})(?:-(\d{2}))?(?:-(\d{2}))?")


def _utc(dt: datetime) -> datetime:
    try:
        return dt.astimezone(UTC)
    except OverflowError:
        raise TimeError("falls outside the years 0001 to 9999 once taken to UTC") from None


def _parse_datetime(text: str) -> datetime:
    t = text.strip()
    if t.endswith(("z", "Z")):
        t = t[:-1] + "+00:00"
    try:
        return datetime.fromisoformat(t)
    except ValueError:
        raise TimeError("is not an ISO-8601 date or datetime (e.g. 2024-06-01 or 2024-06-01T09:30:00Z)") from None


def _fmt(dt: datetime) -> str:
    # Years below 1000 are zero-padded (strftime's %Y is not, on every platform), and the
    # fraction of a second is dropped (see the module's description), so every stored time
    # compares as text in time order.
    return f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}"


def instant_text(value: datetime | None) -> str | None:
    """An instant as stored (UTC, ``...Z``, whole seconds): :func:`normalise_instant`'s form,
    and the inverse of :func:`to_python` on it."""
    return None if value is None else _fmt(_utc(value) if value.tzinfo is not None else value) + "Z"


@functools.lru_cache(maxsize=65536)
def normalise_instant(text: str) -> str:
    """A message time as UTC ``...Z``; a time without a zone is taken to be UTC."""
    if not isinstance(text, str) or not text.strip():
        raise TimeError("is empty")
    if _PARTIAL.fullmatch(text.strip()):
        m = _PARTIAL.fullmatch(text.strip())
        assert m
        if m.group(3) is None:
            raise TimeError("names a year or month, not an instant; give a date or a datetime")
    dt = _parse_datetime(text)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return _fmt(_utc(dt)) + "Z"


@functools.lru_cache(maxsize=65536)
def normalise_valid(text: str) -> str:
    """A valid-time bound, at the precision it was given (see the module's description)."""
    if not isinstance(text, str) or not text.strip():
        raise TimeError("is empty")
    t = text.strip()
    m = _PARTIAL.fullmatch(t)
    if m:
        year, month, day = m.groups()
        try:
            datetime(int(year), int(month or 1), int(day or 1))
        except ValueError:
            raise TimeError("is not a real date") from None
        return t
    dt = _parse_datetime(t)
    if dt.tzinfo is None:
        return _fmt(dt)
    return _fmt(_utc(dt)) + "Z"


_RRULE_PARTS = {
    "FREQ", "UNTIL", "COUNT", "INTERVAL", "BYSECOND", "BYMINUTE", "BYHOUR", "BYDAY", "BYMONTHDAY",
    "BYYEARDAY", "BYWEEKNO", "BYMONTH", "BYSETPOS", "WKST",
}  # fmt: skip


@functools.lru_cache(maxsize=4096)
def normalise_rrule(text: str) -> str:
    """One RRULE (RFC 5545): its parts only (no DTSTART, EXDATE or second line), COUNT and
    INTERVAL positive, not both COUNT and UNTIL."""
    if not isinstance(text, str) or not text.strip():
        raise TimeError("is empty")
    body = text.strip()
    if body.upper().startswith("RRULE:"):
        body = body[6:]
    body = body.upper()
    if any(ch in body for ch in "\r\n:"):
        raise TimeError("is not one iCalendar RRULE: give only the rule's parts (FREQ=WEEKLY;BYDAY=TU), one line")
    fields: dict[str, str] = {}
    for part in (p for p in body.split(";") if p):
        key, eq, value = part.partition("=")
        if not eq or key not in _RRULE_PARTS or key in fields:
            raise TimeError(f"is not a valid iCalendar RRULE (part {part!r})")
        fields[key] = value
    for key in ("COUNT", "INTERVAL"):
        if key in fields and not (fields[key].isdigit() and int(fields[key]) > 0):
            raise TimeError(f"is not a valid iCalendar RRULE ({key} must be a positive whole number)")
    if "COUNT" in fields and "UNTIL" in fields:
        raise TimeError("is not a valid iCalendar RRULE (COUNT and UNTIL cannot both be given)")
    try:
        rrule.rrulestr(body, dtstart=datetime(2000, 1, 1))
    except (ValueError, TypeError) as exc:
        raise TimeError(f"is not a valid iCalendar RRULE ({exc})") from None
    parts = [p for p in body.split(";") if p]
    freq = [p for p in parts if p.startswith("FREQ=")]
    if len(freq) != 1:
        raise TimeError("is not a valid iCalendar RRULE (it needs exactly one FREQ)")
    return ";".join(freq + sorted(p for p in parts if not p.startswith("FREQ=")))


def now_instant() -> str:
    """Now, in the instant form (used only for query defaults, never stored on the graph)."""
    return _fmt(datetime.now(UTC)) + "Z"


def to_python(text: str | None) -> date | datetime | None:
    """A stored time as Python: a date for a date, year or month (its first day: the stored
    text keeps the precision), a datetime for a datetime (aware, in UTC, when stored with Z)."""
    if text is None:
        return None
    m = _PARTIAL.fullmatch(text)
    if m:
        year, month, day = m.groups()
        return date(int(year), int(month or 1), int(day or 1))
    return _parse_datetime(text)
