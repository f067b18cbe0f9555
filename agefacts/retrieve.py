"""Retrieval for an assistant: link a question to known entities, return the facts about
them with their citations, and never serve a fact the ontology does not allow.

Linking matches each entity's names, mentions and role words ("my husband") as token
sequences in the question, longest first, and a matched span cannot link again: "new york
city" links before "york", and "york" then finds nothing left to match. A first-person word
left over ("I", "me", "my") links the namespace's owner ("Where do I live?"), but "my" in
"my sister" is the sister's, and "me" in "tell me about Kyoto" is the one asking. A question
that names nobody links nobody and returns nothing rather than guessing, with the reason.

Facts are ranked by the question: those whose predicate its words name (the predicate's
name and the ``words`` the ontology gives it: "live", "home", "moved" for ``lives_in``)
first, then the most recent on the valid-time axis; ``k`` bounds the answer.

When the question's other words name a topic, the messages that say it are returned too: each
run of one to six words that is not all question words ("what did I say about") is looked up
as a keyphrase (by key, in the namespace asked about), and the messages that say the most of
them come first, each with the spans where it says them. This is how a conversation is found
by topic when no entity links ("what did I say about sourdough?").

A fact is served only when its predicate is in the ontology, its subject and object types fit
the predicate's signature, and it has the right kind of object (entity or value). The rest is
listed under ``rejected`` with the reason, so a store written by an older or careless loader
cannot pass a schema-violating fact off as evidence.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .asyncdb import AsyncDatabase
from .db import Database
from .embed import Embedder
from .errors import UsageError, need_text
from .keys import keyphrase_text, message_key
from .limits import QUESTION_CHARS
from .names import ROLE_WORDS
from .ontology import Ontology
from .plans import Named, Nearest, Plan, one_read, run_plan, run_plan_async
from .reads import TimeArg, as_of, check_scope, facts_of_each_plan
from .temporal import to_python

__all__ = [
    "Answer",
    "FIRST_PERSON",
    "Found",
    "FUSION_K",
    "Gathered",
    "FUSION_WEIGHTS",
    "SELECTING_DAYS",
    "Linked",
    "about",
    "add_scopes",
    "check_question",
    "answer_from",
    "answer_gathered",
    "ask",
    "ask_async",
    "ask_plan",
    "check",
    "context_line",
    "correction_line",
    "fuse",
    "gather",
    "gather_async",
    "gather_plan",
    "named_times",
    "nothing_found",
    "question_time",
    "message_line",
    "link",
    "link_async",
    "link_plan",
    "link_rows",
    "mark_withdrawn",
    "rank",
    "relevance",
    "search_depth",
    "search_scope",
    "search_scope_async",
    "search_scope_plan",
    "topic_texts",
    "valid_words",
    "withdrawal",
    "wording",
]

_TOKEN = re.compile(r"\w+", re.UNICODE)


# Pronouns and determiners are not names: a mention like "it" alone links nothing.
_STOP = {"it", "he", "she", "they", "them", "this", "that", "someone", "somebody", "the", "a", "an", "i", "me", "you"}


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(unicodedata.normalize("NFC", text).casefold())


@dataclass(frozen=True)
class Linked:
    key: str
    namespace: str
    name: str | None
    surface: str  # the words of the question that linked it


@dataclass
class Answer:
    question: str
    entities: list[Linked] = field(default_factory=list)
    facts: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    reason: str | None = None  # why nothing is served, when nothing is
    messages: list[dict[str, Any]] = field(default_factory=list)
    """The messages that answer best, best first (:func:`fuse`): namespace, conversation,
    message (ordinal), speaker, name, at, text, score, and why each is there: ``words`` (the
    question's words it says), ``keyphrases`` (each with its text, mention, spans and score)
    and ``facts`` (the statements it is evidence of); ``withdrawn``: what it said that was
    taken back or ended since (:func:`mark_withdrawn`)."""
    as_of: str | None = None
    """The valid time the facts were read at when the question named it ("Where did I live in
    March 2025?": the start of March 2025) and no valid time was given; None otherwise."""
    corrections: list[dict[str, Any]] = field(default_factory=list)
    """What the question asks about that was taken back (or ended) since it was said: these
    come first in the context, before any message that still says it."""

    def message_refs(self) -> list[tuple[str, int]]:
        """The messages found, best first, as (conversation, ordinal)."""
        return [(m["conversation"], m["message"]) for m in self.messages]

    def to_json(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "entities": [e.__dict__ for e in self.entities],
            "facts": self.facts,
            "rejected": self.rejected,
            "messages": self.messages,
            "corrections": self.corrections,
            "as_of": self.as_of,
            "reason": self.reason,
        }

    def context(self) -> str:
        """A prompt-ready block: one line per fact with what it says, when it was true, and
        the words it was read from (conversation, message and the time it was sent), so an
        assistant can cite it; then one line per message found by topic."""
        if not self.facts and not self.messages:
            return f"(no facts: {self.reason or 'nothing found'})"
        # Over several memories each line says whose it is ("user" is every owner).
        several = len({r["namespace"] for r in [*self.facts, *self.messages]}) > 1
        # What was taken back comes first: a model reading a message that still says it
        # must already know (an allergy corrected from peanuts to sesame).
        lines = [f"(facts as of {self.as_of}, the time the question names)"] if self.as_of else []
        lines += [correction_line(c) for c in self.corrections]
        lines += [context_line(i, f, several) for i, f in enumerate(self.facts, 1)]
        # A fact's line already cites its message: that message is not said twice.
        cited = {(f["namespace"], f["conversation"], f["message"]) for f in self.facts}
        rest = [m for m in self.messages if (m["namespace"], m["conversation"], m["message"]) not in cited]
        lines += [message_line(i, m, several) for i, m in enumerate(rest, len(lines) + 1)]
        return "\n".join(lines)

    def linked(self) -> str:
        """The entities the question linked, each said once: "user ('i') in 15 namespaces"
        rather than the owner fifteen times."""
        spaces: dict[tuple[str, str], set[str]] = {}
        for e in self.entities:
            spaces.setdefault((e.name or e.key, e.surface), set()).add(e.namespace)
        return ", ".join(
            f"{name} ({surface!r})" + (f" in {len(ns)} namespaces" if len(ns) > 1 else "")
            for (name, surface), ns in spaces.items()
        )


def valid_words(since: str | None, until: str | None) -> str:
    """When a fact held, as a reader says it: "from 2024-06 until 2025-03-01"."""
    return f"from {since or 'the start'}" + (f" until {until}" if until else "")


def context_line(n: int, f: dict[str, Any], namespaced: bool = False) -> str:
    """One fact as one line of a prompt-ready block (saying its namespace when ``namespaced``)."""
    what = f["object"] if f.get("object_key") is not None else json.dumps(f["value"], ensure_ascii=False)
    valid = valid_words(f.get("valid_from"), f.get("valid_until"))
    if f.get("recurrence"):
        valid += f", repeating {f['recurrence']}"
    said = json.dumps(f.get("quote"), ensure_ascii=False)
    return (
        f"[{n}] {f['subject']} {f['predicate']} {what} ({valid}; known since {f['recorded_at']}) "
        f"- said {said} in conversation {f['conversation']}"
        + (f" of namespace {f['namespace']}" if namespaced else "")
        + f" message {f['message']} at {f.get('quoted_at')}"
    )


def message_line(n: int, m: dict[str, Any], namespaced: bool = False) -> str:
    """One message found as one line of a prompt-ready block: who said it, where, when, and
    what of the question it says; and what of it was taken back or ended since."""
    said = json.dumps(m["text"], ensure_ascii=False)
    who = m.get("name") or m.get("speaker")
    return (
        f"[{n}] {who} said {said} in conversation {m['conversation']}"
        + (f" of namespace {m['namespace']}" if namespaced else "")
        + f" message {m['message']} at {m.get('at')} (matched: {about(m)})"
        + "".join(f" [{withdrawal(w)}]" for w in m.get("withdrawn") or ())
    )


def withdrawal(w: Mapping[str, Any]) -> str:
    """What of a message was taken back, or ended, and by which words: for a reader."""
    how = "taken back" if w["corrected"] else "ended"
    return (
        f"{w['subject']} {w['predicate']} {w['what']} was {how} at {w['at']}: "
        f"{json.dumps(w['by_quote'], ensure_ascii=False)} in conversation {w['by_conversation']} "
        f"message {w['by_message']}"
    )


def correction_line(w: Mapping[str, Any]) -> str:
    """A correction the question is about, as the first line of a prompt-ready block."""
    return f"[!] {'not so: ' if w['corrected'] else 'no longer: '}{withdrawal(w)}"


def mark_withdrawn(answer: Answer, rows: Sequence[Mapping[str, Any]]) -> Answer:
    """Each message found says what of it was taken back or ended since
    (``message_withdrawals`` rows, as known at the time asked), and the answer lists first
    those the question's words name (the withdrawn value: "Can I eat peanuts?" after peanuts
    was corrected to sesame)."""
    by_message: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for r in rows:
        w = {c: r[c] for c in _WITHDRAWAL}
        by_message.setdefault((r["namespace"], r["conversation"], r["message"]), []).append(w)
    asked = set(_tokens(answer.question))
    seen: set[tuple[Any, ...]] = set()
    for m in answer.messages:
        marks = sorted(by_message.get((m["namespace"], m["conversation"], m["message"]), []), key=_withdrawal_order)
        m["withdrawn"] = marks
        for w in marks:
            ident = (w["namespace"], w["subject"], w["predicate"], str(w["what"]), w["corrected"])
            if ident not in seen and set(_tokens(str(w["what"]))) & asked:
                seen.add(ident)
                answer.corrections.append(w)
    return answer


_WITHDRAWAL = (
    "namespace",
    "predicate",
    "subject",
    "what",
    "corrected",
    "at",
    "by_conversation",
    "by_message",
    "by_quote",
)


def _withdrawal_order(w: Mapping[str, Any]) -> tuple[str, ...]:
    return (str(w["at"]), w["predicate"], str(w["what"]))


def about(m: dict[str, Any]) -> str:
    """What of the question a found message says: its words, keyphrases, the words said in
    the turns around it (those it replies to, and the one answering it), and the number of
    facts it is evidence of."""
    parts = list(m.get("words") or [])
    parts += sorted({h["text"] for h in m.get("keyphrases") or []} - set(parts))
    if m.get("around"):
        parts.append("around: " + " ".join(m["around"]))
    if m.get("facts"):
        parts.append(f"{len(m['facts'])} fact" + ("s" if len(m["facts"]) > 1 else ""))
    return ", ".join(parts)


FIRST_PERSON = frozenset({"i", "me", "my", "mine", "myself"})
"""Words by which the namespace's owner speaks of themself: a question that uses one (not as
part of a role such as "my sister") is about the owner."""

# "Tell me about Kyoto" asks about Kyoto: "me" after a verb of asking is the one asking.
_ASKING = frozenset({"tell", "show", "remind", "give", "let", "help", "ask", "teach", "explain"})

_NAME_PARTS_IGNORED = {"in", "at", "of", "to", "from", "has"}


def _surfaces(rows: list[dict[str, Any]]) -> list[tuple[list[str], dict[str, Any]]]:
    """What each entity can be called, as token sequences."""
    names: list[tuple[list[str], dict[str, Any]]] = []
    for r in rows:
        if r["role"] == "user":
            continue  # the owner is found by first-person words, below
        surfaces = set()
        if r["name"]:
            surfaces.add(r["name"])
        for m in r["mentions"] or []:
            surfaces.add(m)
        rel = (r["attrs"] or {}).get("rel", "") if isinstance(r["attrs"], dict) else ""
        pred, _, target = rel.partition(":")
        if target == "user":
            for word in ROLE_WORDS.get(pred, []):
                surfaces.add(f"my {word}")
        for s in surfaces:
            toks = _tokens(s)
            if toks and not (len(toks) == 1 and toks[0] in _STOP):
                names.append((toks, r))
    return names


def link_rows(question: str, rows: list[dict[str, Any]], namespace: str | None) -> list[Linked]:
    """The entities a question names, given every entity's names (the ``entity_names``
    query's rows), in the order they were matched: longest names first, then the owner when
    the question speaks in the first person (whose: the namespace given, or that of what else
    it names, or else every namespace's owner, for the caller's scope check)."""
    q = _tokens(question)
    claimed = [False] * len(q)
    out: list[Linked] = []
    seen: set[str] = set()
    inventory = sorted(_surfaces(rows), key=lambda item: (-len(item[0]), -len(" ".join(item[0])), item[1]["key"]))
    spans: set[tuple[int, int]] = set()
    for toks, ent in inventory:
        n = len(toks)
        for i in range(len(q) - n + 1):
            # A span already matched links again only by the very same words: every entity
            # that "my husband" names (in several namespaces, say) is linked, none chosen.
            if q[i : i + n] == toks and ((i, n) in spans or not any(claimed[i : i + n])):
                spans.add((i, n))
                for j in range(i, i + n):
                    claimed[j] = True
                if ent["key"] not in seen:
                    seen.add(ent["key"])
                    out.append(Linked(ent["key"], ent["namespace"], ent["name"], " ".join(toks)))
    said = [
        w
        for i, (w, used) in enumerate(zip(q, claimed, strict=True))
        if w in FIRST_PERSON and not used and not (w == "me" and i > 0 and q[i - 1] in _ASKING)
    ]
    if said:
        # Without a namespace, "I" is the owner of the namespace of what else the question
        # names ("my friend Begoña"), or else every namespace's owner: the caller's scope check
        # then asks whose, unless there is one namespace or all were asked for.
        owners = {namespace} if namespace is not None else {e.namespace for e in out}
        for r in rows:
            if r["role"] == "user" and (not owners or r["namespace"] in owners) and r["key"] not in seen:
                seen.add(r["key"])
                out.append(Linked(r["key"], r["namespace"], r["name"] or "user", said[0]))
    return out


def link(db: Database, question: str, namespace: str | None = None) -> list[Linked]:
    """The entities the question names (see :func:`link_rows`)."""
    return run_plan(db, link_plan(question, namespace))


async def link_async(db: AsyncDatabase, question: str, namespace: str | None = None) -> list[Linked]:
    """:func:`link` on an asynchronous connection."""
    return await run_plan_async(db, link_plan(question, namespace))


def link_plan(question: str, namespace: str | None) -> Plan[list[Linked]]:
    """:func:`link` as a plan (:mod:`agefacts.plans`)."""
    return link_rows(question, (yield Named("entity_names", {"namespace": namespace})).dicts(), namespace)


def _vocabulary(ontology: Ontology) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for p in ontology.predicates:
        words = {w.casefold() for w in p.words}
        words |= {part for part in p.name.split("_") if part not in _NAME_PARTS_IGNORED}
        out[p.name] = words
    return out


def _same_word(token: str, word: str) -> bool:
    # "work" is "works" and "working": a shared start of four letters or more counts.
    if token == word:
        return True
    short, long_ = sorted((token, word), key=len)
    return len(short) >= 4 and long_.startswith(short)


def _score(tokens: set[str], words: set[str]) -> int:
    return sum(1 for t in tokens if any(_same_word(t, w) for w in words))


def wording(question: str, ontology: Ontology) -> list[str]:
    """The words of the predicates the question names, sorted (``"Who is Ross married to?"``
    names spouse_of: "husband", "married", "spouse", "wife"): the search looks for them too,
    each weighed below a word of the question's own (``wording`` of
    ``agefacts.search_messages``), so that a message that says "my wife" answers "married"."""
    tokens = set(_tokens(question))
    return sorted({w for words in _vocabulary(ontology).values() if _score(tokens, words) for w in words})


def relevance(question: str, predicate: str, ontology: Ontology) -> int:
    """How many of the question's words name the predicate (its name's parts and the
    ``words`` the ontology gives it)."""
    return _score(set(_tokens(question)), _vocabulary(ontology).get(predicate, set()))


def rank(question: str, facts: list[dict[str, Any]], ontology: Ontology) -> list[dict[str, Any]]:
    """Facts in the order an assistant wants them: those whose predicate the question's
    words name first, then the most recent on the valid-time axis (its start as stated, or
    when it became known), then as they came."""
    vocabulary = _vocabulary(ontology)
    tokens = set(_tokens(question))

    def score(f: dict[str, Any]) -> int:
        return _score(tokens, vocabulary.get(f["predicate"], set()))

    by_time = sorted(facts, key=lambda f: str(f.get("valid_from") or f.get("recorded_at") or ""), reverse=True)
    return sorted(by_time, key=lambda f: -score(f))


def check(fact: dict[str, Any], ontology: Ontology) -> str | None:
    """Why the ontology does not allow this fact, or None when it does."""
    spec = ontology.predicate(fact["predicate"])
    if spec is None:
        return f"predicate {fact['predicate']!r} is not in the ontology"
    if spec.subject is not None and fact.get("subject_type") not in spec.subject:
        return f"{spec.name!r} takes a subject of type {'|'.join(spec.subject)}, not {fact.get('subject_type')}"
    if fact.get("object_key") is not None:
        if not spec.takes_object:
            return f"{spec.name!r} takes a literal value, not an entity"
        if spec.object is not None and fact.get("object_type") not in spec.object:
            return f"{spec.name!r} takes an object of type {'|'.join(spec.object)}, not {fact.get('object_type')}"
    elif not spec.takes_value:
        return f"{spec.name!r} takes an entity as its object, not a literal"
    return None


# Words that ask rather than name a topic: a run of only these is not looked up.
_QUESTION_WORDS = frozenset(
    """a about after again all also am an and any anything are as at be been before but by can
    could did do does done ever for from had has have how i if in into is it its just know last
    me mention mentioned more most my of on or our remind s said say says should so some
    something talk talked tell than that the their them then there these they this those to told
    us was we were what when where which who whom why will with would you your""".split()
)
# YAKE phrases have at most three words, but "co-op's bread" is four once cut into words.
_MAX_TOPIC_WORDS = 6


def topic_texts(question: str) -> list[str]:
    """The keyphrase texts a question could be asking about: every run of one to six of its
    words (cut as keyphrases are, :func:`agefacts.keys.keyphrase_text`) that is not all
    question words, longest first."""
    words = keyphrase_text(question).split()
    out: dict[str, None] = {}
    for n in range(_MAX_TOPIC_WORDS, 0, -1):
        for i in range(len(words) - n + 1):
            run = words[i : i + n]
            if not all(w in _QUESTION_WORDS for w in run):
                out[" ".join(run)] = None
    return list(out)


def _keyphrase_order(m: dict[str, Any]) -> tuple[Any, ...]:
    """How a message's keyphrases rank it: the most of the question's phrases first, then the
    longer phrases, then the higher scores."""
    hits = m["keyphrases"]
    return (
        -len(hits),
        -sum(len(h["text"].split()) for h in hits),
        -max(float(h["score"] or 0) for h in hits),
    )


def _message(r: dict[str, Any], text: str | None) -> dict[str, Any]:
    return {
        "namespace": r["namespace"],
        "conversation": r["conversation"],
        "message": r["message"],
        "speaker": r["speaker"],
        "name": r.get("name"),
        "at": r["at"],
        "text": text,
        "score": 0.0,
        "words": [],
        "around": [],
        "keyphrases": [],
        "facts": [],
    }


_MONTHS = {
    m: i
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        1,
    )
    for m in names
}
_MONTH = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"
_TIMES = [
    ("dmy", re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b")),
    ("mdy", re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b")),
    ("my", re.compile(rf"\b{_MONTH},?\s+(?:of\s+)?{_YEAR}\b")),
    ("y", re.compile(rf"\b(?:in|during|of|since|by)\s+{_YEAR}\b")),
    ("rel", re.compile(r"\b(today|yesterday|(?:this|last)\s+(?:week|month|year))\b")),
    ("season", re.compile(r"\b(this|last)\s+(spring|summer|autumn|fall|winter)\b")),
    (
        "ago",
        re.compile(
            r"\b(a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|\d{1,2})\s+(year|month)s?\s+ago\b"
        ),
    ),
]
# A season's first month and how many months it lasts (the northern hemisphere's, by month).
_SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}
_COUNTS = {w: n for n, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve".split())}
_COUNTS |= {"a": 1, "an": 1}


def named_times(question: str, now: dt.datetime | None = None) -> list[tuple[str, str]]:
    """The times a question names, as [start, end) instants (``2023-07-01T00:00:00Z``):
    "on 8 May 2023", "May 8, 2023", "in July 2023", "in 2023", and, counted back from ``now``
    (the time asked at: the known time given, else the clock), "today", "yesterday", "this" or
    "last" week, month, year or season ("last summer": the latest that has ended), and "two
    years ago", "three months ago" (that year, that month). A date said once is one time,
    however many patterns see it."""
    text = unicodedata.normalize("NFC", question).casefold()
    out: list[tuple[str, str]] = []
    taken: list[tuple[int, int]] = []
    for kind, pattern in _TIMES:
        for m in pattern.finditer(text):
            if any(a < m.end() and m.start() < b for a, b in taken):
                continue
            span = _interval(kind, m.groups(), now or dt.datetime.now(dt.UTC))
            if span is not None:
                taken.append((m.start(), m.end()))
                out.append(span)
    return out


def _interval(kind: str, g: tuple[str | Any, ...], now: dt.datetime) -> tuple[str, str] | None:
    try:
        if kind == "dmy":
            start = dt.datetime(int(g[2]), _MONTHS[g[1]], int(g[0]))
            end = start + dt.timedelta(days=1)
        elif kind == "mdy":
            start = dt.datetime(int(g[2]), _MONTHS[g[0]], int(g[1]))
            end = start + dt.timedelta(days=1)
        elif kind == "my":
            start = dt.datetime(int(g[1]), _MONTHS[g[0]], 1)
            end = dt.datetime(start.year + start.month // 12, start.month % 12 + 1, 1)
        elif kind == "y":
            start, end = dt.datetime(int(g[0]), 1, 1), dt.datetime(int(g[0]) + 1, 1, 1)
        elif kind == "season":
            # "last summer": the latest summer that has ended; "this summer": this year's.
            first = _SEASONS[g[1]]
            # In January and February, "this winter" is the one that began in December.
            start = dt.datetime(now.year - (first == 12 and now.month < 3), first, 1)
            if g[0] == "last":
                while _months_after(start, 3) > now.replace(tzinfo=None):
                    start = start.replace(year=start.year - 1)
            end = _months_after(start, 3)
        elif kind == "ago":
            n = _COUNTS[g[0]] if g[0] in _COUNTS else int(g[0])
            if g[1] == "year":
                start = dt.datetime(now.year - n, 1, 1)
                end = dt.datetime(start.year + 1, 1, 1)
            else:
                start = _months_after(dt.datetime(now.year, now.month, 1), -n)
                end = _months_after(start, 1)
        else:
            today = dt.datetime(now.year, now.month, now.day)
            what = " ".join(g[0].split())
            if what in ("today", "yesterday"):
                start = today - dt.timedelta(days=what == "yesterday")
                end = start + dt.timedelta(days=1)
            elif what.endswith("week"):
                start = today - dt.timedelta(days=today.weekday() + (7 if what.startswith("last") else 0))
                end = start + dt.timedelta(days=7)
            elif what.endswith("month"):
                start = today.replace(day=1)
                if what.startswith("last"):
                    start = (start - dt.timedelta(days=1)).replace(day=1)
                end = dt.datetime(start.year + start.month // 12, start.month % 12 + 1, 1)
            else:
                start = dt.datetime(today.year - what.startswith("last"), 1, 1)
                end = dt.datetime(start.year + 1, 1, 1)
    except ValueError:  # "31 February 2023" names no day
        return None
    return start.strftime("%Y-%m-%dT%H:%M:%SZ"), end.strftime("%Y-%m-%dT%H:%M:%SZ")


def _months_after(start: dt.datetime, months: int) -> dt.datetime:
    """The first of the month ``months`` after (or, negative, before) ``start``'s month."""
    index = start.year * 12 + start.month - 1 + months
    return dt.datetime(index // 12, index % 12 + 1, 1)


FUSION_K = 10
"""Reciprocal-rank fusion's constant: a message's score is the sum over the lists that hold
it of ``weight / (FUSION_K + rank)``."""

FUSION_WEIGHTS = {"words": 1.0, "keyphrases": 0.05, "facts": 1.0, "time": 1.0, "meaning": 1.0}
"""How much each list counts in the fusion: the question's words (BM25), its keyphrases,
the evidence of the facts about what it names, the words' matches sent inside a time the
question names, and the messages nearest in meaning (with embeddings only)."""
_LISTS = ("words", "keyphrases", "facts", "time", "meaning")


def fuse(
    words: list[dict[str, Any]],
    facts: list[dict[str, Any]],
    texts: dict[tuple[str, str, int], dict[str, Any]],
    k: int,
    times: list[tuple[str, str]] | None = None,
    meaning: list[dict[str, Any]] | None = None,
    timed: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """One ranked list of messages from up to five: ``words`` (the ``search_messages`` rows,
    best first), the keyphrases those rows say (each row's ``keyphrases``), ``facts`` (the
    served facts, best first: each one's evidence message; ``texts`` holds those messages by
    (namespace, conversation, ordinal)); when the question names ``times``
    (:func:`named_times`), the words' matches sent inside one, in the words' order, then the
    other messages sent then (``timed``: ``time_messages`` rows, a named person's when any); and
    ``meaning``, the messages nearest in meaning when embeddings are used (``messages``
    rows, nearest first). Reciprocal-rank fusion (:data:`FUSION_WEIGHTS`),
    ties by the words' own order, cut to ``k``. Each message says why it is there: ``words``
    (the question's words it says, as folded), ``keyphrases`` and ``facts`` (statement ids)."""
    out: dict[tuple[str, str, int], dict[str, Any]] = {}
    first: dict[tuple[str, str, int], tuple[int, int]] = {}

    def add(
        list_no: int, rank: int, ident: tuple[str, str, int], row: dict[str, Any], text: str | None
    ) -> dict[str, Any]:
        m = out.get(ident)
        if m is None:
            m = out[ident] = _message(row, text)
            first[ident] = (list_no, rank)
        m["score"] += FUSION_WEIGHTS[_LISTS[list_no]] / (FUSION_K + rank)
        return m

    for rank, r in enumerate(words, 1):
        m = add(0, rank, (r["namespace"], r["conversation"], r["message"]), r, r["message_text"])
        m["words"] = list(r["words"] or [])
        m["around"] = list(r.get("around") or [])
    # A keyphrase ranks up a message the words found, never adds one (every keyphrase is
    # words of its message, so the words find what it would); one that is only a speaker's
    # name ("Congrats, Gina!") counts for nothing, as the name does in the words' ranking.
    names = {keyphrase_text(r["name"]) for r in words if r.get("name")}
    said = []
    for r in words:
        m = out[(r["namespace"], r["conversation"], r["message"])]
        m["keyphrases"] = [h for h in r.get("keyphrases") or [] if keyphrase_text(h["text"]) not in names]
        if m["keyphrases"]:
            said.append(m)
    said.sort(key=lambda m: (str(m["at"] or ""), m["namespace"], m["conversation"], m["message"]), reverse=True)
    for rank, m in enumerate(sorted(said, key=_keyphrase_order), 1):  # ties: the latest first
        add(1, rank, (m["namespace"], m["conversation"], m["message"]), m, m["text"])
    rank = 0
    for f in facts:
        ident = (f["namespace"], f["conversation"], f["message"])
        row = texts.get(ident)
        if row is None:
            continue
        if ident not in out or not out[ident]["facts"]:
            rank += 1
            m = add(2, rank, ident, row, row["text"])
        else:
            m = out[ident]
        m["facts"].append(f["statement"])
    if times:
        # Stored instants ("2023-05-08T13:56:00Z") compare as text in time order.
        inside = [r for r in words if r["at"] and any(a <= r["at"] < b for a, b in times)]
        # Then the messages of that time the words did not find: a person's the question
        # names, when it names one who spoke then, else anyone's, in the order they were sent.
        by_name = [r for r in timed or [] if r["by_name"]] or list(timed or [])
        seen = {(r["namespace"], r["conversation"], r["message"]) for r in inside}
        inside += [r for r in by_name if (r["namespace"], r["conversation"], r["message"]) not in seen]
        for rank, r in enumerate(inside, 1):
            add(3, rank, (r["namespace"], r["conversation"], r["message"]), r, r["message_text"])
    for rank, r in enumerate(meaning or [], 1):
        add(4, rank, (r["namespace"], r["conversation"], r["message"]), r, r["text"])
    for m in out.values():
        m["score"] = round(m["score"], 6)
    ranked = sorted(out, key=lambda i: (-out[i]["score"], first[i]))
    return [out[i] for i in ranked[: max(0, k)]]


def _asked_at(known_at: TimeArg) -> dt.datetime:
    """The time a question is asked at, as the reads take it: the known time given
    (normalised to UTC by :func:`agefacts.query.as_of`), else now."""
    now = to_python(as_of(None, known_at)[1])
    assert isinstance(now, dt.datetime)
    return now


def search_depth(k: int) -> int:
    """How many of the words' matches are read for ``k`` messages: the fusion reads deeper
    than it returns (a message second in two lists beats one first in one)."""
    return max(2 * k, 20)


def _search_params(
    question: str, namespace: str | None, k: int, scope: Mapping[str, Any] | None, words: Sequence[str]
) -> dict[str, Any]:
    scoped = None if scope is None else json.dumps(scope)
    topics = topic_texts(question) or None
    return {
        "namespace": namespace,
        "question": question,
        "k": search_depth(k),
        "scope": scoped,
        "topics": topics,
        "wording": list(words) or None,
    }


def question_time(valid_at: TimeArg, times: Sequence[tuple[str, str]]) -> tuple[TimeArg, str | None]:
    """The valid time to read facts at: the one given, else the first of the times the
    question names (``times``, :func:`named_times`: "in March 2025" starts 2025-03-01), which
    is also returned to be said in the answer; else now. A question that names no time, or is
    given one, reads as asked."""
    if valid_at is not None:
        return valid_at, None
    if not times:
        return None, None
    start = times[0][0]
    day = start[:10]
    return start, day


def _withdrawal_params(rows: Iterable[Mapping[str, Any]], known_at: TimeArg) -> dict[str, Any]:
    """The ``message_withdrawals`` parameters for the messages ``rows`` name, as known at
    ``known_at``."""
    keys = sorted({message_key(m["namespace"], m["conversation"], m["message"]) for m in rows})
    return {"keys": keys, "known_at": as_of(None, known_at)[1]}


def _why_params(question: str, namespace: str | None) -> dict[str, Any]:
    return {"namespace": namespace, "question": question}


def _evidence_params(facts: list[dict[str, Any]]) -> dict[str, Any]:
    return {"keys": sorted({message_key(f["namespace"], f["conversation"], f["message"]) for f in facts})}


@dataclass
class Found:
    """What the database found for a question, before the fusion."""

    words: list[dict[str, Any]] = field(default_factory=list)
    texts: dict[tuple[str, str, int], dict[str, Any]] = field(default_factory=dict)
    meaning: list[dict[str, Any]] = field(default_factory=list)
    timed: list[dict[str, Any]] = field(default_factory=list)


def _in_order(keys: list[str], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_key = {message_key(r["namespace"], r["conversation"], r["message"]): r for r in rows}
    return [by_key[k] for k in keys if k in by_key]  # a message gone since is left out


SELECTING_DAYS = 92
"""The longest time a question may name and have the messages sent then added (a season): a
longer one ("in 2023") only ranks up the words' matches sent then, as the messages of a year
in the order sent would say nothing of the question."""


def _selecting(times: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The times named whose messages are added, not only ranked: a season or shorter."""
    out = []
    for start, end in times:
        a, b = (dt.datetime.fromisoformat(t.replace("Z", "+00:00")) for t in (start, end))
        if (b - a).total_seconds() <= SELECTING_DAYS * 86400:
            out.append((start, end))
    return out


def _found_queries(
    question: str,
    namespace: str | None,
    k: int,
    facts: list[dict[str, Any]],
    times: list[tuple[str, str]],
    scope: Mapping[str, Any] | None,
    words: Sequence[str],
) -> dict[str, tuple[str, dict[str, Any]]]:
    """The named queries that find a question's messages, by what they find: its words'
    matches (each with the question's keyphrases it says), the cited facts' evidence messages,
    and the messages sent inside the times it names (in one namespace: every namespace's would
    be a scan)."""
    out = {"words": ("search_messages", _search_params(question, namespace, k, scope, words))}
    spans = _selecting(times)
    if spans and namespace is not None:
        starts, ends = (list(x) for x in zip(*spans, strict=True))
        params = {"namespace": namespace, "question": question, "starts": starts, "ends": ends, "k": max(2 * k, 20)}
        out["timed"] = ("time_messages", params)
    if facts:
        out["texts"] = ("messages", _evidence_params(facts))
    return out


def _found_of(rows: dict[str, list[dict[str, Any]]], meaning: list[dict[str, Any]]) -> Found:
    return Found(rows["words"], _by_ident(rows.get("texts", [])), meaning, rows.get("timed", []))


def _found(
    question: str,
    namespace: str | None,
    k: int,
    facts: list[dict[str, Any]],
    by_meaning: bool,
    times: Sequence[tuple[str, str]],
    scope: Mapping[str, Any] | None,
    words: Sequence[str],
) -> Plan[Found]:
    queries = _found_queries(question, namespace, k, facts, list(times), scope, words)
    rows: dict[str, list[dict[str, Any]]] = {}
    for what, (name, params) in queries.items():
        rows[what] = (yield Named(name, params)).dicts()
    meaning: list[dict[str, Any]] = []
    if by_meaning:
        keys = yield Nearest(namespace, question, max(2 * k, 20))
        meaning = _in_order(keys, (yield Named("messages", {"keys": keys})).dicts()) if keys else []
    return _found_of(rows, meaning)


def _by_ident(rows: list[dict[str, Any]]) -> dict[tuple[str, str, int], dict[str, Any]]:
    return {(r["namespace"], r["conversation"], r["message"]): r for r in rows}


def answer_from(
    question: str,
    ontology: Ontology,
    entities: list[Linked],
    rows: list[list[dict[str, Any]]],
    k: int,
    found: Found | None = None,
    times: Sequence[tuple[str, str]] = (),
) -> Answer:
    """The answer from the linked entities and each one's facts (``rows[i]`` are the facts
    of ``entities[i]``): served facts ranked and cut to ``k``, the rest with their reason;
    and the messages (``found``: the question's words' matches with their keyphrases, the
    facts' evidence messages and those nearest in meaning, fused by :func:`fuse`, with the times the question names,
    ``times``: :func:`named_times`), cut to ``k``."""
    answer = Answer(question, list(entities))
    seen: set[str] = set()
    served: list[dict[str, Any]] = []
    for facts in rows:
        for row in facts:
            if row["statement"] in seen:
                continue
            seen.add(row["statement"])
            why = check(row, ontology)
            if why is None:
                served.append(row)
            else:
                answer.rejected.append({**row, "reason": why})
    ranked = rank(question, served, ontology)
    answer.facts = ranked[: max(0, k)]
    f = found or Found()
    answer.messages = fuse(
        f.words,
        _cited(question, ranked, entities, ontology)[: 2 * k],
        f.texts,
        k,
        list(times),
        f.meaning,
        f.timed,
    )
    if not entities and not answer.messages:
        answer.reason = "no message says any word of the question, and it names no known entity"
    elif entities and not answer.facts:
        answer.reason = "no fact about " + ", ".join(e.name or e.key for e in entities) + " is valid at that time"
    return answer


def _either(words: Sequence[str]) -> str:
    quoted = [f"'{w}'" for w in words]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


def _when(times: Sequence[tuple[str, str]]) -> str:
    spans = []
    for a, b in times:
        last = (dt.datetime.fromisoformat(b.replace("Z", "+00:00")) - dt.timedelta(days=1)).date().isoformat()
        spans.append(f"on {a[:10]}" if last == a[:10] else f"between {a[:10]} and {last}")
    return " or ".join(spans)


def nothing_found(
    why: Mapping[str, Any], times: Sequence[tuple[str, str]], answer: Answer, namespace: str | None
) -> str:
    """Why a question found no message, in its own terms (``why``: the ``question_words``
    row): the namespace holds none, the question has no word to search for, no message says
    its words, none was sent in the time it names; and whether it names an entity with facts."""
    where = f"namespace {namespace!r}" if namespace is not None else "the graph"
    if not why["messages"]:
        parts = [f"{where} holds no messages"]
    else:
        if why["searched"]:
            parts = [f"no message says {_either(why['searched'])}"]
        elif why["names"]:
            parts = [f"{_either(why['names'])} said nothing the question asks about"]
        else:
            parts = ["the question has no word to search for (only words that ask, such as what, say or tell)"]
        spans = _selecting(times)
        if spans and namespace is not None:
            parts.append(f"none was sent {_when(spans)}")
    if not answer.entities:
        parts.append("it names no known entity")
    elif not answer.facts:
        parts.append("no fact about " + ", ".join(e.name or e.key for e in answer.entities) + " is valid at that time")
    return ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]


def _cited(
    question: str, facts: list[dict[str, Any]], entities: list[Linked], ontology: Ontology
) -> list[dict[str, Any]]:
    """The facts whose messages join the fusion: those about an entity the question names
    by name or role, and those whose predicate it names. "I" links the owner to every
    question in the first person: "What did I say about the dentist?" is not asking for the
    message where the owner's husband was first mentioned."""
    named = {e.key for e in entities if e.surface not in FIRST_PERSON}
    vocabulary = _vocabulary(ontology)
    tokens = set(_tokens(question))
    return [
        f
        for f in facts
        if f.get("subject_key") in named
        or f.get("object_key") in named
        or _score(tokens, vocabulary.get(f["predicate"], set())) > 0
    ]


def check_question(question: object, namespace: object, k: int) -> None:
    """Refuse a question, namespace or ``k`` an ask cannot take, before anything is asked."""
    need_text(question, "the question")
    assert isinstance(question, str)
    QUESTION_CHARS.check(len(question), error=UsageError)
    need_text(namespace, "the namespace", optional=True)
    _check_k(k)


def _check_k(k: int) -> None:
    # A slice by 0 returns nothing and by -1 all but the last: neither is what was asked.
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise UsageError(f"k is how many facts to return, a whole number of at least 1, not {k!r}")


@dataclass
class Gathered:
    """What one database holds for a question, before the fusion: the entities it names, each
    one's facts (``rows[i]`` of ``entities[i]``), the messages found, the times it names and
    the valid time they set. Gathered ``whole`` (for a placement, whose servers' parts are
    merged by :func:`merge_gathered` and fused once, as one server holding everything would),
    it also holds why nothing was found (``why``: the ``question_words`` row) and what was
    taken back of every message found (``withdrawals``), since which messages are kept is
    known only once every server answered."""

    entities: list[Linked]
    rows: list[list[dict[str, Any]]]
    found: Found
    times: list[tuple[str, str]]
    named: str | None
    why: dict[str, Any] | None = None
    withdrawals: list[dict[str, Any]] = field(default_factory=list)


def _cited_facts(
    question: str, ontology: Ontology, entities: list[Linked], rows: list[list[dict[str, Any]]], k: int
) -> list[dict[str, Any]]:
    return _cited(question, rank(question, [f for r in rows for f in r], ontology), entities, ontology)[: 2 * k]


def _found_rows(found: Found) -> list[dict[str, Any]]:
    """Every message found, by any of the ways it is found."""
    return [*found.words, *found.texts.values(), *found.meaning, *found.timed]


def _maybe_evidence(messages: Iterable[Mapping[str, Any]], found: Found) -> list[Mapping[str, Any]]:
    """Of ``messages``, those that may be evidence of a statement, so that something of them
    may have been taken back: all but those the search says are not (a memory with no model
    has no statements, and its asks need not ask)."""
    not_evidence = {
        (r["namespace"], r["conversation"], r["message"]) for r in found.words if r.get("evidence") is False
    }
    return [m for m in messages if (m["namespace"], m["conversation"], m["message"]) not in not_evidence]


def gather(
    db: Database,
    question: str,
    ontology: Ontology,
    *,
    namespace: str | None = None,
    all_namespaces: bool = False,
    k: int = 10,
    valid_at: TimeArg = None,
    known_at: TimeArg = None,
    embedder: Embedder | None = None,
    whole: bool = False,
    scope: Mapping[str, Any] | None = None,
) -> Gathered:
    """What the database holds for a question (see :class:`Gathered`); ``scope``: what the
    search counts, added up over a placement's servers (:func:`search_scope`)."""
    check_question(question, namespace, k)
    with one_read(db, embedder):
        plan = gather_plan(
            question, ontology, namespace, all_namespaces, k, valid_at, known_at, embedder is not None, whole, scope
        )
        return run_plan(db, plan, embedder)


async def gather_async(
    db: AsyncDatabase,
    question: str,
    ontology: Ontology,
    *,
    namespace: str | None = None,
    all_namespaces: bool = False,
    k: int = 10,
    valid_at: TimeArg = None,
    known_at: TimeArg = None,
    embedder: Embedder | None = None,
    whole: bool = False,
    scope: Mapping[str, Any] | None = None,
) -> Gathered:
    """:func:`gather` on an asynchronous connection."""
    check_question(question, namespace, k)
    async with one_read(db, embedder):
        plan = gather_plan(
            question, ontology, namespace, all_namespaces, k, valid_at, known_at, embedder is not None, whole, scope
        )
        return await run_plan_async(db, plan, embedder)


def gather_plan(
    question: str,
    ontology: Ontology,
    namespace: str | None,
    all_namespaces: bool,
    k: int,
    valid_at: TimeArg,
    known_at: TimeArg,
    by_meaning: bool,
    whole: bool,
    scope: Mapping[str, Any] | None,
) -> Plan[Gathered]:
    """:func:`gather` as a plan (:mod:`agefacts.plans`); ``by_meaning``: the runner has an
    embedder, and the messages nearest the question in meaning are fused in."""
    times = named_times(question, _asked_at(known_at))
    valid_at, named = question_time(valid_at, times)
    entities = yield from link_plan(question, namespace)
    check_scope(namespace, all_namespaces, (e.namespace for e in entities), "what the question names")
    # Linked entities are known by key: no second lookup of each one.
    rows = (yield from facts_of_each_plan([e.key for e in entities], valid_at, known_at)) if entities else []
    facts = _cited_facts(question, ontology, entities, rows, k)
    wanted = wording(question, ontology)
    found = yield from _found(question, namespace, k, facts, by_meaning, times, scope, wanted)
    out = Gathered(entities, rows, found, times, named)
    if whole:
        out.why = (yield Named("question_words", _why_params(question, namespace))).dicts()[0]
        if rows_found := _maybe_evidence(_found_rows(found), found):  # none: a server may hold no message
            params = _withdrawal_params(rows_found, known_at)
            out.withdrawals = (yield Named("message_withdrawals", params)).dicts()
    return out


def search_scope(db: Database, question: str, ontology: Ontology, namespace: str | None = None) -> dict[str, Any]:
    """What the search counts of the messages it searches for ``question`` (how many there
    are, each speaker name's turns, each word's messages, those of its :func:`wording` in the
    ``ontology`` too): a placement adds these up over its servers (:func:`add_scopes`) and
    gathers with the sums, so each server ranks its matches as one server holding every
    message would."""
    return run_plan(db, search_scope_plan(question, ontology, namespace))


async def search_scope_async(
    db: AsyncDatabase, question: str, ontology: Ontology, namespace: str | None = None
) -> dict[str, Any]:
    """:func:`search_scope` on an asynchronous connection."""
    return await run_plan_async(db, search_scope_plan(question, ontology, namespace))


def search_scope_plan(question: str, ontology: Ontology, namespace: str | None) -> Plan[dict[str, Any]]:
    """:func:`search_scope` as a plan (:mod:`agefacts.plans`)."""
    params = {"namespace": namespace, "question": question, "wording": wording(question, ontology) or None}
    return dict((yield Named("search_scope", params)).rows[0][0])


def add_scopes(scopes: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Several servers' :func:`search_scope` counts as one server's."""
    total = 0.0
    named: dict[str, float] = {}
    df: dict[str, float] = {}
    for s in scopes:
        total += float(s.get("total") or 0)
        for into, part in ((named, s.get("named") or {}), (df, s.get("df") or {})):
            for word, n in part.items():
                into[word] = into.get(word, 0.0) + float(n)
    return {"total": total, "named": named, "df": df}


def _fused(question: str, ontology: Ontology, g: Gathered, k: int) -> Answer:
    answer = answer_from(question, ontology, g.entities, g.rows, k, g.found, g.times)
    answer.as_of = g.named
    return answer


def answer_gathered(question: str, ontology: Ontology, gathered: Gathered, k: int, namespace: str | None) -> Answer:
    """The answer from what was gathered ``whole``: fused and cut to ``k``, each message with
    what of it was taken back, or why nothing was found."""
    answer = _fused(question, ontology, gathered, k)
    if not answer.messages:
        assert gathered.why is not None
        answer.reason = nothing_found(gathered.why, gathered.times, answer, namespace)
        return answer
    return mark_withdrawn(answer, gathered.withdrawals)


def ask(
    db: Database,
    question: str,
    ontology: Ontology,
    *,
    namespace: str | None = None,
    all_namespaces: bool = False,
    k: int = 10,
    valid_at: TimeArg = None,
    known_at: TimeArg = None,
    embedder: Embedder | None = None,
) -> Answer:
    """Facts about the entities a question names (the owner too, when it speaks in the first
    person), ranked by the question's words, each with its quote and source message. When
    what it names lies in more than one namespace, give a ``namespace`` (or
    ``all_namespaces=True`` to look in every one). With an ``embedder``, the messages
    nearest the question in meaning are fused in too (:mod:`agefacts.embed`)."""
    check_question(question, namespace, k)  # before the database is asked anything
    with one_read(db, embedder):
        plan = ask_plan(question, ontology, namespace, all_namespaces, k, valid_at, known_at, embedder is not None)
        return run_plan(db, plan, embedder)


async def ask_async(
    db: AsyncDatabase,
    question: str,
    ontology: Ontology,
    *,
    namespace: str | None = None,
    all_namespaces: bool = False,
    k: int = 10,
    valid_at: TimeArg = None,
    known_at: TimeArg = None,
    embedder: Embedder | None = None,
) -> Answer:
    """:func:`ask` on an asynchronous connection."""
    check_question(question, namespace, k)  # before the database is asked anything
    async with one_read(db, embedder):
        plan = ask_plan(question, ontology, namespace, all_namespaces, k, valid_at, known_at, embedder is not None)
        return await run_plan_async(db, plan, embedder)


def ask_plan(
    question: str,
    ontology: Ontology,
    namespace: str | None,
    all_namespaces: bool,
    k: int,
    valid_at: TimeArg,
    known_at: TimeArg,
    by_meaning: bool,
) -> Plan[Answer]:
    """:func:`ask` as a plan (:mod:`agefacts.plans`); ``by_meaning`` as for :func:`gather_plan`."""
    g = yield from gather_plan(
        question, ontology, namespace, all_namespaces, k, valid_at, known_at, by_meaning, False, None
    )
    answer = _fused(question, ontology, g, k)
    if not answer.messages:
        why = (yield Named("question_words", _why_params(question, namespace))).dicts()
        answer.reason = nothing_found(why[0], g.times, answer, namespace)
        return answer
    asked = _maybe_evidence(answer.messages, g.found)
    params = _withdrawal_params(asked, known_at)
    withdrawn = (yield Named("message_withdrawals", params)).dicts() if asked else []
    return mark_withdrawn(answer, withdrawn)
