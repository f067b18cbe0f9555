"""Generated life stories and an interval oracle for them, written from docs/time.md's
section and independent of ``agefacts.timeline``: it paints each chain's values onto the
sorted times the story mentions and reads the value under T.

A story is a list of said statements about the user: a predicate, a target (an object's name
or a literal), a kind (``states``, ``ends`` "not any more", ``corrects`` "I'm not X, I meant",
``calls_off`` "we're not moving to X after all", a plan called off), optional valid-time
bounds, the instants it was said at (once or more), and for a correction or a plan called off,
what the same message says instead (``beside``: "not X, it's Y").
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

# predicate -> (single-valued, takes an object (a type) or a literal value, the targets)
PREDICATES = {
    "works_at": (True, "Organization", ["Acme", "Globex", "Initech"]),
    "lives_in": (True, "Place", ["Lyon", "Oslo"]),
    "likes": (False, None, ["jazz", "hiking"]),
    "allergic_to": (False, None, ["peanuts", "tree nuts"]),
}
VALID = ["2023", "2023-06", "2024-01-15", "2024-03", "2024-06", "2024-09-01", "2025", "2025-02"]
SAID = [
    "2023-03-01T10:00:00Z",
    "2023-09-10T10:00:00Z",
    "2024-01-15T10:00:00Z",
    "2024-04-02T10:00:00Z",
    "2024-06-20T10:00:00Z",
    "2024-11-05T10:00:00Z",
    "2025-03-01T10:00:00Z",
]
# Times to ask at: the story's own times, and times between and around them.
ASK_VALID = sorted(set(VALID + SAID + ["2022", "2023-01-01", "2024-05-01", "2024-12-31", "2026-06-01"]))
ASK_KNOWN = sorted(set(SAID + ["2023-01-01T00:00:00Z", "2024-05-01T00:00:00Z", "2030-01-01T00:00:00Z"]))


@dataclass(frozen=True)
class Said:
    i: int
    predicate: str
    target: str
    kind: str  # states | ends | corrects
    valid_from: str | None
    valid_until: str | None
    said: tuple[str, ...]
    beside: str | None = None  # a target the same message states (a correction's replacement)

    @property
    def single(self) -> bool:
        return PREDICATES[self.predicate][0]


@st.composite
def said(draw, i: int) -> Said:
    predicate = draw(st.sampled_from(sorted(PREDICATES)))
    target = draw(st.sampled_from(PREDICATES[predicate][2]))
    kind = draw(st.sampled_from(["states"] * 6 + ["ends"] * 2 + ["corrects", "calls_off"]))
    start = draw(st.one_of(st.none(), st.none(), st.sampled_from(VALID)))
    until = draw(st.one_of(st.none(), st.none(), st.sampled_from(VALID)))
    beside = None
    if kind in ("corrects", "calls_off"):
        start = until = None
        others = [t for t in PREDICATES[predicate][2] if t != target]
        beside = draw(st.one_of(st.none(), st.sampled_from(others)))
    if start is not None and until is not None and until <= start:
        until = None  # the gate refuses an interval that ends where it starts, or before
    times = draw(st.lists(st.sampled_from(SAID), min_size=1, max_size=2, unique=True))
    return Said(i, predicate, target, kind, start, until, tuple(sorted(times)), beside)


def taking_back(s: Said) -> bool:
    """A correction or a plan called off: each takes back what its fact was said to be."""
    return s.kind in ("corrects", "calls_off")


def each_statement(story: list[Said]) -> list[Said]:
    """The story with what a correction's message states beside it as a statement of its own
    (numbered 1000 on, said in the same message)."""
    out = []
    for s in story:
        out.append(s)
        if s.beside is not None:
            out.append(Said(s.i + 1000, s.predicate, s.beside, "states", None, None, s.said))
    return out


@st.composite
def stories(draw, max_size: int = 8) -> list[Said]:
    n = draw(st.integers(1, max_size))
    return [draw(said(i)) for i in range(n)]


def oracle(story: list[Said], valid_at: str, known_at: str) -> set[tuple[str, str]]:
    """The (predicate, target) facts that hold at ``valid_at`` as known at ``known_at``."""
    known = []
    for s in each_statement(story):
        times = [t for t in s.said if t <= known_at]
        if times:
            known.append((s, times))
    # A correction withdraws what its fact was said to be before it.
    corrected: dict[tuple[str, str], str] = {}
    for s, times in known:
        if taking_back(s):
            corrected[(s.predicate, s.target)] = max(corrected.get((s.predicate, s.target), ""), max(times))
    chains: dict[tuple[str, ...], list[tuple[str, int, str, str, Said]]] = {}
    for s, times in known:
        if taking_back(s):
            continue
        if s.kind == "states" and (s.predicate, s.target) in corrected:
            # What is said beside the correction (at its time) is what it puts right.
            times = [t for t in times if t >= corrected[(s.predicate, s.target)]]
            if not times:
                continue
        chain = chains.setdefault((s.predicate,) if s.single else (s.predicate, s.target), [])
        # At one time: ends, then starts, then "held"; then by the value's text.
        order = s.target
        if s.kind == "ends":
            for t in [s.valid_until or s.valid_from] if (s.valid_until or s.valid_from) else times:
                chain.append((t, 0, order, "neg", s))
            continue
        if s.valid_from:
            chain.append((s.valid_from, 1, order, "start", s))
        else:
            chain.extend((t, 2, order, "held", s) for t in times if s.valid_until is None or t < s.valid_until)
        if s.valid_until:
            chain.append((s.valid_until, 0, order, "end", s))
    out: set[tuple[str, str]] = set()
    for events in chains.values():
        events.sort(key=lambda e: (e[0], e[1], e[2]))
        ticks = sorted({e[0] for e in events} | {valid_at})
        at = {t: n for n, t in enumerate(ticks)}
        paint: list[str | None] = [None] * len(ticks)
        value: str | None = None  # what is open, from tick `since` (0 is the open past)
        since, unknown, last_end, runs = 0, False, None, 0

        for t, _, _, what, s in events:
            if what in ("end", "neg"):
                if value == s.target:
                    paint[since : at[t]] = [value] * (at[t] - since)
                    value, last_end, runs = None, at[t], runs + 1
                elif value is None and what == "end":
                    for n in range(last_end if last_end is not None else 0, at[t]):
                        paint[n] = s.target
                    last_end, runs = at[t], runs + 1
                elif value is not None and what == "end" and since > (last_end or 0):
                    # Another value holds from a known time: this one fills the gap before it.
                    for n in range(last_end or 0, min(at[t], since)):
                        paint[n] = s.target
                    if min(at[t], since) > (last_end or 0):
                        last_end, runs = min(at[t], since), runs + 1
                continue
            if value == s.target and not (what == "start" and unknown):
                continue
            if value is not None:
                paint[since : at[t]] = [value] * (at[t] - since)
                last_end, runs = at[t], runs + 1
            since = at[t] if (what == "start" or runs) else 0
            value, unknown = s.target, what == "held"
        if value is not None:
            paint[since:] = [value] * (len(ticks) - since)
        if paint[at[valid_at]] is not None:
            out.add((events[0][4].predicate, paint[at[valid_at]]))
    return out


def statement_rows(story: list[Said], known_at: str | None = None) -> list[dict]:
    """The statement rows the statement queries give for a story, as known at ``known_at``
    (without one: with every piece of evidence): statements that say the same words are one
    statement, as their keys make them. Each carries its evidence as ``said`` ([at, key,
    quote, conversation, message, start, end], in any order), ``said_at``, how many there are
    and the earliest, cited."""
    said: dict[tuple, list[str]] = {}
    first: dict[tuple, Said] = {}
    for s in each_statement(story):
        content = (s.predicate, s.target, taking_back(s) or s.kind, s.valid_from, s.valid_until)
        said.setdefault(content, []).extend(t for t in s.said if known_at is None or t <= known_at)
        first.setdefault(content, s)
    out = []
    for content, s in first.items():
        evidence = [
            [t, f"edge:{s.i:04d}:{n}", f"s{s.i} {n}", f"c{s.i % 1000}", n, 0, 4] for n, t in enumerate(said[content])
        ]
        if not evidence:
            continue
        cited = min(evidence)
        obj = PREDICATES[s.predicate][1] is not None
        out.append(
            {
                "statement": f"stmt:{s.i:04d}",
                "subject": "user",
                "subject_key": "ent:user",
                "predicate": s.predicate,
                "object": s.target if obj else None,
                "object_key": f"ent:{s.target}" if obj else None,
                "value": None if obj else s.target,
                "valid_from": s.valid_from,
                "stated_until": s.valid_until,
                "recurrence": None,
                "ends_fact": s.kind != "states",
                "corrects": taking_back(s),
                "single_valued": s.single,
                "namespace": "ns",
                "said": evidence[::-1],  # in any order
                "said_at": [e[0] for e in evidence][::-1],
                "evidence": len(evidence),
                "recorded_at": cited[0],
                "quoted_at": cited[0],
                "evidence_key": cited[1],
                "quote": cited[2],
            }
        )
    return out


# -- people: who is who ---------------------------------------------------------------------------
# Relatives told of over several conversations, each conversation one message: a relative is
# mentioned with their role ("my sister Ana") or by name alone ("Ana"), several in one message,
# and each mention may say where they live from a month on. What a person answers: each name is
# one person, whatever the mentions; where they live at T is the latest move on or before T; the
# owner's siblings are the names ever said with the role.
NAMES = ["Ana", "Rita", "Ravi", "Tomás"]
CITIES = ["Porto", "Faro", "Delhi", "Pune", "Lyon"]
MONTHS = ["2023-02", "2023-07", "2024-01", "2024-05", "2024-10"]


@dataclass(frozen=True)
class Mention:
    name: str
    with_role: bool
    moves: tuple[str, str] | None  # (city, month)


@st.composite
def families(draw) -> list[list[Mention]]:
    """Conversations (each a list of mentions in one message); no name moves twice in one month."""
    used: set[tuple[str, str]] = set()
    convs = []
    for _ in range(draw(st.integers(1, 4))):
        names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True))
        mentions = []
        for name in names:
            move = draw(st.one_of(st.none(), st.tuples(st.sampled_from(CITIES), st.sampled_from(MONTHS))))
            if move is not None and (name, move[1]) in used:
                move = None
            if move is not None:
                used.add((name, move[1]))
            mentions.append(Mention(name, draw(st.booleans()), move))
        convs.append(mentions)
    return convs


def home_at(convs: list[list[Mention]], name: str, month: str) -> list[str]:
    moves = sorted((m.moves[1], m.moves[0]) for c in convs for m in c if m.name == name and m.moves)
    now = [city for start, city in moves if start <= month]
    return now[-1:]
