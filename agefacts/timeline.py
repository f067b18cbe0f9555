"""The reading of time: what holds at a valid time T, as known at a known time K.

This is the one definition of "current" (and of "valid at T"): ``facts``, ``ask``, ``show``,
``Memory``, the MCP server and the demo all read through :func:`fact_rows`. It is a pure
function of the statements known at K, so what was believed at K is the rule applied to what
had been said by then: a later statement can change how an earlier time is read, and reading
as known before it still gives what was believed then. The rule (docs/time.md
states it for people):

1. **Known at K**: a statement counts with its evidence said by K. A correction ("I'm not
   allergic to peanuts, it's tree nuts": negated, with ``correction``) withdraws the evidence
   of its fact said before it (what is said beside it, at its time, is what it puts right); a
   statement left with no evidence counts as never said, one left with some counts, is known
   from and cites only those.
2. **Events**: a fact is a subject, a predicate and an object or value (one value by
   :func:`agefacts.derive.value_ident`: ``30`` and ``30.0`` are one). Its statements give
   events in valid time: a ``valid_from`` *starts* it; a ``valid_until`` *ends* it; a
   statement without a start says it *held* each time it was said (each evidence's time),
   unless it gives an end at or before then; a negation ("I don't like jazz any more")
   *ends* it at its ``valid_until``, else its ``valid_from``, else each time it was said.
3. **A chain** is what cannot overlap: one fact, or for a single-valued predicate
   (``lives_in``, ``works_at``) every fact about the subject with that predicate. Its events
   are read in time order (at one time: ends, then starts, then "held", each by the value's
   text), one value open at a time:

   - a start or "held" of the open fact joins it (a start after a run whose start is unknown
     begins a new run there); of another fact, it closes the open one there and opens its
     own: at a start, at its start; at a "held", there, or in the open past when nothing came
     before it in the chain;
   - an end of the open fact closes it; an end of a fact said while another is open, whose
     start is known, is a run of its own in the gap before that one: from the end of the run
     before (or the open past) to that end or the open one's start, whichever is first ("I
     joined Vandelay in June", then "I quit Kramerica in October": Kramerica until June; one
     value at a time, so "I did both for a while" gives each its own stretch); an end with
     nothing open is a run from the end of the run before it (or from the open past, when
     there was none) to that end ("I left St. Luke's in October"), unless it is a negation,
     which then ends nothing.

4. **Valid at T**: a run holds at T when it starts at or before T (or in the open past) and
   ends after T (or not at all). Times compare as text: every stored form sorts in time order
   (:mod:`agefacts.temporal`).

A run is one row: its statements counted together, citing the earliest evidence,
``valid_from``/``valid_until`` its start and end as read, ``superseded_at`` when the statement
that ended it (a negation, or the next run's) became known.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .derive import value_ident

__all__ = [
    "FACT_COLUMNS",
    "Run",
    "STATEMENT_FIELDS",
    "VERSION_FIELDS",
    "Version",
    "chain_of",
    "fact_of",
    "fact_order",
    "fact_rows",
    "known_at",
    "run_rows",
    "runs",
    "versions",
]

# What a statement row carries (the ``fact_statements`` and ``statements`` queries return
# these): its key, the fact it is about, its stated times and kind, and its evidence as known
# at K (``said_at``: the time of each, in any order).
STATEMENT_FIELDS = (
    "statement",
    "subject_key",
    "predicate",
    "object_key",
    "value",
    "valid_from",
    "stated_until",
    "recurrence",
    "ends_fact",
    "corrects",
    "single_valued",
    "recorded_at",
    "said_at",
    "said",
)

# The columns of a fact as ``facts`` and ``ask`` give it: one row per run.
FACT_COLUMNS = (
    "subject",
    "predicate",
    "value",
    "object",
    "valid_from",
    "valid_until",
    "recorded_at",
    "superseded_at",
    "recurrence",
    "quote",
    "conversation",
    "message",
    "char_start",
    "char_end",
    "evidence",
    "namespace",
    "statement",
    "subject_type",
    "subject_key",
    "object_type",
    "object_key",
    "quoted_at",
)

_END, _START, _HELD = 0, 1, 2  # the order of events at one time

_Fact = tuple[str, str, str]


def fact_of(row: Mapping[str, Any]) -> _Fact:
    """The fact a statement is about: subject, predicate, and object key or value identity."""
    obj = row.get("object_key")
    return (row["subject_key"], row["predicate"], f"id:{obj}" if obj is not None else value_ident(row.get("value")))


@dataclass
class Run:
    """One stretch of valid time over which a fact holds, as read from its statements.
    ``start`` None is the open past, ``end`` None the open future (or not known yet)."""

    fact: _Fact
    start: str | None
    start_known: bool
    members: list[Mapping[str, Any]] = field(default_factory=list)
    end: str | None = None
    ended_by: Mapping[str, Any] | None = None  # the statement that ended it, if not its own

    def holds_at(self, t: str) -> bool:
        return (self.start is None or self.start <= t) and (self.end is None or t < self.end)

    def join(self, row: Mapping[str, Any]) -> None:
        if all(m is not row for m in self.members):
            self.members.append(row)

    @property
    def superseded_at(self) -> str | None:
        """When what ended this run became known (None when a statement of its own did)."""
        if self.ended_by is None:
            return None
        first: str = min(m["recorded_at"] for m in self.members)
        ended: str = self.ended_by["recorded_at"]
        return max(first, ended)


_FactOf = Callable[[Mapping[str, Any]], _Fact]


def _withdrawn_before(rows: Iterable[Mapping[str, Any]], fact: _FactOf = fact_of) -> dict[_Fact, str]:
    """Each corrected fact's latest correction: its evidence said before then is withdrawn."""
    out: dict[_Fact, str] = {}
    for r in rows:
        if r.get("corrects"):
            f = fact(r)
            out[f] = max(out.get(f, ""), *r["said_at"])
    return out


# A piece of evidence as the statement queries give it (``said``): its time, key, quote, and
# where the quote is (conversation, message, span).
_CITED = ("quoted_at", "evidence_key", "quote", "conversation", "message", "char_start", "char_end")


def _evidence_order(e: list[Any]) -> tuple[str, str]:
    return (str(e[0]), str(e[1]))


def _as_known(rows: Iterable[Mapping[str, Any]], fact: _FactOf = fact_of) -> list[Mapping[str, Any]]:
    """Rule 1: each statement with only the evidence that counts. A correction withdraws what
    was said of its fact before it; what is said beside it (in its message, at its time) is
    what it puts right, and stands. A statement left with no evidence was never said; one
    left with some is known from, cites and counts only those (said again after a
    correction, it is known since it was said again, and quotes those words)."""
    rows = list(rows)
    withdrawn = _withdrawn_before(rows, fact)
    out: list[Mapping[str, Any]] = []
    for r in rows:
        cut = withdrawn.get(fact(r)) if withdrawn and not r.get("ends_fact") else None
        if cut is None:
            out.append(r)
            continue
        kept = [t for t in r["said_at"] if t >= cut]
        if not kept:
            continue
        if len(kept) == len(r["said_at"]):
            out.append(r)
            continue
        row = dict(r, said_at=kept, recorded_at=min(kept), evidence=len(kept))
        evidence: list[list[Any]] = [list(e) for e in r.get("said") or () if e[0] >= cut]
        if evidence:
            # The earliest kept, by time then key: as the queries pick the earliest of all.
            first = min(evidence, key=_evidence_order)
            row.update(zip(_CITED, first, strict=True))
        out.append(row)
    return out


_Event = tuple[str, int, tuple[str, str], Mapping[str, Any]]


def _events(rows: Sequence[Mapping[str, Any]]) -> list[_Event]:
    return _in_order([_row_events(r) for r in rows])


def _in_order(each: Iterable[list[_Event]]) -> list[_Event]:
    """Statements' events (:func:`_row_events`, one list a statement) in the order rule 3
    reads them."""
    events = [e for evs in each for e in evs]
    events.sort(key=_event_order)
    return events


def _event_order(e: _Event) -> tuple[str, int, tuple[str, str]]:
    return e[:3]


def _row_events(r: Mapping[str, Any]) -> list[_Event]:
    """One statement's events, in the order :func:`_events` sorts them from (a stable sort:
    the same events in the same order give the same sweep)."""
    if r.get("corrects"):
        return []
    said = sorted(r["said_at"])
    # At one time, events of one rank go by the value's text (what the object is called, or the
    # literal), then by key: nothing else at hand is the same however statements of one fact
    # merged (the same words said twice are one statement).
    obj = r.get("object")
    k = (str(obj if obj is not None else r.get("value")), r["statement"])
    if r.get("ends_fact"):
        dated = r.get("stated_until") or r.get("valid_from")
        return [(t, _END, k, r) for t in ([dated] if dated else said)]
    events: list[_Event] = []
    start, until = r.get("valid_from"), r.get("stated_until")
    if start is not None:
        events.append((start, _START, k, r))
    else:
        events.extend((t, _HELD, k, r) for t in said if until is None or t < until)
    if until is not None:
        events.append((until, _END, k, r))
    return events


def _chain_runs(rows: list[Mapping[str, Any]], fact_of_row: _FactOf = fact_of) -> list[Run]:
    """Rule 3 over one chain's statements."""
    return _sweep(_events(rows), fact_of_row)


def _sweep(events: list[_Event], fact_of_row: _FactOf) -> list[Run]:
    """Rule 3 over one chain's statements' events (:func:`_events`)."""
    done: list[Run] = []
    run: Run | None = None
    for t, kind, _, r in events:
        fact = fact_of_row(r)
        if kind == _END:
            negation = bool(r.get("ends_fact"))
            if run is not None and run.fact == fact:
                run.end = t
                if negation:
                    run.ended_by = r
                else:
                    run.join(r)
                done.append(run)
                run = None
            elif run is None and not negation:
                done.append(Run(fact, done[-1].end if done else None, False, [r], end=t))
            elif run is not None and not negation and run.start is not None:
                # An earlier value's end said while a later one holds ("I joined Vandelay in
                # June", then "I quit Kramerica in October, I did both for a while"): one value
                # at a time, so it holds from the run before up to where the later one began.
                before = done[-1].end if done else None
                until = min(t, run.start)
                if before is None or before < until:
                    done.append(Run(fact, before, False, [r], end=until))
            continue
        if run is not None and run.fact == fact and not (kind == _START and not run.start_known):
            run.join(r)
            continue
        if run is not None:
            run.end, run.ended_by = t, r
            done.append(run)
        if kind == _START:
            run = Run(fact, t, True, [r])
        else:
            run = Run(fact, t if done else None, False, [r])
    if run is not None:
        done.append(run)
    return done


def chain_of(row: Mapping[str, Any]) -> tuple[str, ...]:
    """The chain a statement belongs to (rule 3): its subject and predicate when the
    predicate holds one value at a time, else its fact."""
    fact = fact_of(row)
    return fact[:2] if row.get("single_valued") else fact


def runs(rows: Iterable[Mapping[str, Any]]) -> list[Run]:
    """Every run the statements make (rules 1 to 3), those that hold at no time included."""
    chains: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
    for r in _as_known(rows):
        chains.setdefault(chain_of(r), []).append(r)
    return [run for _, chain in sorted(chains.items()) for run in _chain_runs(chain)]


def run_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every run that holds at some valid time, as a row (:data:`FACT_COLUMNS`, and
    ``statements``: the keys of the statements it rests on, sorted), from the statement rows
    known at K. A row cites its run's earliest evidence (by ``at``, then the evidence key)
    and that evidence's statement; ``evidence`` counts the evidence of every statement it
    coalesces."""
    return [_run_row(run) for run in runs(rows) if _holds_somewhere(run)]


def _holds_somewhere(run: Run) -> bool:
    return run.start is None or run.end is None or run.start < run.end


def _cited(run: Run) -> Mapping[str, Any]:
    return min(run.members, key=lambda m: (m["quoted_at"], m["evidence_key"]))


def _by_time(run: Run) -> list[Mapping[str, Any]]:
    return sorted(run.members, key=lambda m: (m["recorded_at"], m["statement"]))


def _learned(run: Run) -> tuple[str, str | None, list[str]]:
    """When a run was first known, its recurrence (the earliest said), and its statements."""
    by_time = _by_time(run)
    recurrence = next((m["recurrence"] for m in by_time if m.get("recurrence")), None)
    return by_time[0]["recorded_at"], recurrence, sorted({m["statement"] for m in run.members})


def _run_row(run: Run) -> dict[str, Any]:
    cited = _cited(run)
    recorded_at, recurrence, statements = _learned(run)
    row = {c: cited.get(c) for c in FACT_COLUMNS}
    row.update(
        valid_from=run.start,
        valid_until=run.end,
        recorded_at=recorded_at,
        superseded_at=run.superseded_at,
        recurrence=recurrence,
        evidence=sum(m["evidence"] for m in run.members),
        statements=statements,
        said_at=_said(run),
    )
    return row


def _said(run: Run) -> list[str]:
    return sorted(t for m in run.members for t in m["said_at"])


def _run_identity(run: Run) -> tuple[Any, ...]:
    """What decides a run's row but for its evidence count (:data:`VERSION_FIELDS`): its
    fact, its interval, its cited evidence, when it was learned, what ended it, its
    recurrence and its statements."""
    recorded_at, recurrence, statements = _learned(run)
    return (
        run.fact,
        run.start,
        run.end,
        _cited(run)["evidence_key"],
        recorded_at,
        run.superseded_at,
        recurrence,
        tuple(statements),
    )


def fact_rows(rows: Iterable[Mapping[str, Any]], valid_at: str, about: str | None = None) -> list[dict[str, Any]]:
    """The facts that hold at ``valid_at`` as rows (:data:`FACT_COLUMNS`), from the statement
    rows known at K; with ``about``, only those whose subject or object is that entity key."""
    out = []
    for row in run_rows(rows):
        start, end = row["valid_from"], row["valid_until"]
        if not ((start is None or start <= valid_at) and (end is None or valid_at < end)):
            continue
        if about is not None and about not in (row["subject_key"], row["object_key"]):
            continue
        del row["statements"], row["said_at"]
        out.append(row)
    return sorted(out, key=fact_order)


# -- fact versions: the reading stored ------------------------------------------------------------
# What a fact version holds besides its known interval: a run's row without the names of its
# subject and object (those are the entities', and change with them, not with what was said)
# and without its count of evidence, which ``said_at`` gives for any known time: a fact said
# again is the same version with one more time in ``said_at``, not a new version.
VERSION_FIELDS = (
    "namespace",
    "subject_key",
    "predicate",
    "object_key",
    "value",
    "valid_from",
    "valid_until",
    "recorded_at",
    "superseded_at",
    "recurrence",
    "statement",
    "quote",
    "quoted_at",
    "conversation",
    "message",
    "char_start",
    "char_end",
    "statements",
)


@dataclass(frozen=True)
class Version:
    """One fact version: a run as the rule reads it (``row``: :data:`VERSION_FIELDS`) while
    what had been said was read that way, from ``known_from`` (an evidence's time) until
    ``known_until`` (when something said next read it otherwise; None: it still is).
    ``said_at``: the times of the evidence it counts, sorted; as known at K it has as many
    pieces of evidence as are said by K."""

    row: Mapping[str, Any]
    known_from: str
    known_until: str | None
    said_at: tuple[str, ...] = ()

    def evidence(self, k: str) -> int:
        return sum(1 for t in self.said_at if t <= k)


def known_at(rows: Iterable[Mapping[str, Any]], k: str) -> list[dict[str, Any]]:
    """Statement rows with every piece of evidence (``said``) as the statement queries give
    them as known at ``k``: each with its evidence said by then (its earliest cited, the time
    of each, how many), those with none left out."""
    out = []
    for r in rows:
        said = [e for e in r["said"] if e[0] <= k]
        if not said:
            continue
        first = min(said, key=_evidence_order)
        row = dict(r, said=said, said_at=[e[0] for e in said], evidence=len(said), recorded_at=first[0])
        row.update(zip(_CITED, first, strict=True))
        out.append(row)
    return out


def _version_order(v: Version) -> tuple[Any, ...]:
    # Versions alike in these come from one chain, in the order it read them.
    return (v.known_from, fact_order(v.row))


def versions(rows: Iterable[Mapping[str, Any]]) -> list[Version]:
    """The fact versions of the statements of whole chains (every statement of each, with
    all its evidence as ``said``): the rule read as known at each time something was said,
    a run that reads alike from one such time to the next being one version. A version holds
    at K when ``known_from <= K`` and, if it has one, ``K < known_until``; at K, the versions
    that hold are the runs :func:`run_rows` reads from what was said by K."""
    rows = list(rows)
    by_chain: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
    for r in rows:
        by_chain.setdefault(chain_of(r), []).append(r)
    out: list[Version] = []
    for _, chain in sorted(by_chain.items()):
        if len(chain) == 1:
            # One statement (most chains: a fact said once, or said again in the same words):
            # what it says does not change with what is said after, only how often it was
            # said, so it is one version from when it was first said (none for a negation
            # or a correction alone, which end or withdraw nothing).
            for row in run_rows(known_at(chain, max(e[0] for e in chain[0]["said"]))):
                kept = {f: row.get(f) for f in VERSION_FIELDS}
                out.append(Version(kept, row["recorded_at"], None, tuple(row["said_at"])))
            continue
        out += _chain_versions(chain)
    return sorted(out, key=_version_order)


def _chain_versions(chain: list[Mapping[str, Any]]) -> list[Version]:
    """The versions of one chain of several statements: the rule read as known at each time one
    of them was said. What a reading reuses from the one before is an optimisation only: each
    statement's view as known at K changes only when it gains evidence, so it is made once per
    piece of evidence (and its fact once), and a run made of the same views reads the same."""
    facts = {r["statement"]: fact_of(r) for r in chain}
    fact: _FactOf = fact_of
    if len(facts) == len(chain):  # a statement's key names one fact (always, from the graph)

        def fact(r: Mapping[str, Any]) -> _Fact:
            return facts[r["statement"]]

    # Each statement's view as known at the time being read (None before it was said) and its
    # events, made again only at a time it gained evidence: the times each statement changes.
    changes: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(chain):
        for t in sorted({e[0] for e in r["said"]}):
            changes[t].append(i)
    views: list[Mapping[str, Any] | None] = [None] * len(chain)
    events: list[list[_Event]] = [[] for _ in chain]
    # Without a correction the rule's first step (_as_known) keeps every view as it is, so the
    # events made with the views are the ones it would make.
    corrected = any(r.get("corrects") for r in chain)

    # A run's identity by the objects it is made of; the value keeps them alive (so no id is
    # reused while the table holds it).
    idents: dict[tuple[Any, ...], tuple[tuple[Any, ...], Any]] = {}

    def identity(run: Run) -> tuple[Any, ...]:
        key = (run.fact, run.start, run.end, id(run.ended_by), tuple(map(id, run.members)))
        got = idents.get(key)
        if got is None:
            got = idents[key] = (_run_identity(run), (run.ended_by, run.members[:]))
        return got[0]

    out: list[Version] = []
    times = sorted({e[0] for r in chain for e in r["said"]})
    # Open versions by identity: when each began and its row. The runs of the reading before,
    # by identity: the nth open version of an identity was last read as its nth run (whose
    # evidence is all of the readings before, and what was said since).
    open_: dict[tuple[Any, ...], list[tuple[str, dict[str, Any]]]] = {}
    last: dict[tuple[Any, ...], list[Run]] = {}
    for t in times:
        now: dict[tuple[Any, ...], list[Run]] = {}
        for i in changes[t]:
            views[i] = got = known_at([chain[i]], t)[0]
            events[i] = _row_events(got)
        if corrected:
            read = _chain_runs(_as_known([v for v in views if v is not None], fact), fact)
        else:
            read = _sweep(_in_order(events), fact)
        for run in read:
            if _holds_somewhere(run):
                now.setdefault(identity(run), []).append(run)
        for ident, before in list(open_.items()):
            # The first of each kind stay open; more of a kind now than before open below.
            stays = len(now.get(ident, ()))
            if stays >= len(before):
                continue
            for n in range(stays, len(before)):
                since, was = before[n]
                out.append(Version(was, since, t, tuple(_said(last[ident][n]))))
            if stays:
                del before[stays:]
            else:
                del open_[ident]
        for ident, runs_now in now.items():
            have = len(open_.get(ident, ()))
            for run in runs_now[have:]:
                row = _run_row(run)
                open_.setdefault(ident, []).append((t, {f: row.get(f) for f in VERSION_FIELDS}))
        last = now
    out += [
        Version(was, since, None, tuple(_said(last[ident][n])))
        for ident, before in open_.items()
        for n, (since, was) in enumerate(before)
    ]
    return out


def fact_order(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """The order facts are listed in: by predicate, start (the open past last), known time, key."""
    return (row["predicate"], row["valid_from"] is None, row["valid_from"] or "", row["recorded_at"], row["statement"])
