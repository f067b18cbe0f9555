"""Memory for an assistant: one call adds what was said, one call recalls what is known.

``Memory`` (and ``AsyncMemory``, the same calls for asyncio) sits on the pipeline rather than
beside it: ``add`` extends a conversation with new messages, asks the model only for the user
turns that have no recorded extraction yet (through the same extractor and the same
recorded-file format), then grounds, gates and loads the conversation as ``agefacts load``
would, replacing its earlier version (or, when the messages only extend a conversation this
memory wrote last, writes what they add: :mod:`agefacts.append`). The ingest log keeps the conversation as loaded, so the
next ``add`` extends it and ``export`` writes it out to be loaded elsewhere. Reads return
typed results: ``datetime`` and ``date`` values, not text.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import ValidationError

from . import ledger
from .append import Tail, append, tail_of
from .asyncdb import AsyncDatabase
from .db import DEFAULT_GRAPH, Database, resolve_dsn
from .embed import Embedder
from .errors import (
    AgeFactsError,
    ConversationMoved,
    InputError,
    QueryError,
    TimeError,
    UsageError,
    need_text,
)
from .extract import DEFAULT_CONTEXT_TURNS, LLMClient, extract_conversation, pending_turns
from .load import Loader, Outcome
from .models import Conversation, Turn, describe
from .named import run_named, run_named_async
from .ontology import Ontology, default_ontology
from .placed import AsyncRouter, Router, history_order, merge_gathered, merge_rows
from .placement import Placement, Server, placement_from
from .reads import TimeArg, facts, facts_async, history, history_async
from .replica import AsyncReplicaReads, ReplicaReads, wal_position
from .retrieve import (
    Answer,
    Gathered,
    Linked,
    add_scopes,
    answer_gathered,
    ask,
    ask_async,
    gather,
    gather_async,
    search_scope,
    search_scope_async,
    withdrawal,
)
from .temporal import normalise_instant, to_python
from .timeline import fact_order

__all__ = [
    "Added",
    "AsyncMemory",
    "Citation",
    "HistoryEntry",
    "Known",
    "Memory",
    "MemoryFact",
    "Message",
    "Recall",
    "Remembered",
    "TopicMessage",
    "correction",
    "extended",
]

Message = Mapping[str, Any] | Turn
"""A message to add: a :class:`~agefacts.models.Turn`, or a mapping with ``speaker`` (or
``role``: ``user`` or ``assistant``), ``text`` (or ``content``: a string, or a chat API's list
of parts, whose text parts are joined) and optionally ``at`` (ISO-8601 text or a ``datetime``;
default: when it is added) and what a conversation file's turn carries: ``name`` (who spoke),
``recorded`` (an extraction made already, then not asked of a model), ``error``, ``keyphrases``. A chat API's other messages (``system``, ``developer``, ``tool``,
``function``; an assistant's tool calls; a message with no text part) are passed over: they
are not the person's or the assistant's words."""

_log = logging.getLogger("agefacts.memory")
_R = TypeVar("_R")
_PASSED_OVER = frozenset({"system", "developer", "tool", "function"})
_TURN_EXTRAS = ("name", "recorded", "model", "error", "keyphrases")


# -- typed results ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Citation:
    """Where a fact was read: the exact words, in which message, sent when."""

    quote: str
    conversation: str
    message: int
    char_start: int
    char_end: int
    at: dt.datetime | None


@dataclass(frozen=True)
class MemoryFact:
    """A fact as known at a time. ``valid_from`` / ``valid_until`` are dates or datetimes (a
    year or month given as its first day); ``valid_from_text`` / ``valid_until_text`` keep them
    as stored, at the precision stated ("2024-06")."""

    namespace: str
    subject: str
    predicate: str
    value: Any
    object: str | None
    valid_from: dt.date | None
    valid_until: dt.date | None
    recorded_at: dt.datetime | None
    superseded_at: dt.datetime | None
    recurrence: str | None
    citation: Citation
    statement: str
    subject_key: str
    object_key: str | None
    valid_from_text: str | None
    valid_until_text: str | None
    evidence: int

    @classmethod
    def from_row(cls, r: Mapping[str, Any]) -> MemoryFact:
        return cls(
            namespace=r["namespace"],
            subject=r["subject"],
            predicate=r["predicate"],
            value=r["value"],
            object=r["object"] if r.get("object_key") is not None else None,
            valid_from=to_python(r["valid_from"]),
            valid_until=to_python(r["valid_until"]),
            recorded_at=_instant(r["recorded_at"]),
            superseded_at=_instant(r["superseded_at"]),
            recurrence=r["recurrence"],
            citation=Citation(
                r["quote"], r["conversation"], r["message"], r["char_start"], r["char_end"], _instant(r["quoted_at"])
            ),
            statement=r["statement"],
            subject_key=r["subject_key"],
            object_key=r.get("object_key"),
            valid_from_text=r["valid_from"],
            valid_until_text=r["valid_until"],
            evidence=r["evidence"],
        )


@dataclass(frozen=True)
class HistoryEntry:
    """One statement of an entity's predicate, as said (``kind`` is ``states``, ``ends`` for
    a statement that only ends another, or ``corrects`` for one that withdraws what was
    said); ``valid_from`` and ``valid_until`` are the times it gave itself. What held when is
    :class:`MemoryFact`'s."""

    subject: str
    predicate: str
    kind: str
    value: Any
    object: str | None
    valid_from: dt.date | None
    valid_until: dt.date | None
    recorded_at: dt.datetime | None
    quote: str
    conversation: str
    statement: str

    @classmethod
    def from_row(cls, r: Mapping[str, Any]) -> HistoryEntry:
        return cls(
            subject=r["subject"],
            predicate=r["predicate"],
            kind=r["kind"],
            value=r["value"],
            object=r["object"],
            valid_from=to_python(r["valid_from"]),
            valid_until=to_python(r["valid_until"]),
            recorded_at=_instant(r["recorded_at"]),
            quote=r["quote"],
            conversation=r["conversation"],
            statement=r["statement"],
        )


@dataclass(frozen=True)
class Recall:
    """What a question recalls: the entities it names, the facts about them (ranked, at
    most ``k``), those the ontology does not allow (with the reason), why nothing was found
    when nothing was, ``context``: the facts (and topic messages) as a prompt-ready block
    with citations, and the messages that say the question's topic."""

    question: str
    entities: tuple[Linked, ...]
    facts: tuple[MemoryFact, ...]
    rejected: tuple[tuple[MemoryFact, str], ...]
    reason: str | None
    context: str
    messages: tuple[TopicMessage, ...] = ()
    """The messages found for the question, best first (its words, keyphrases and facts' evidence, fused)."""
    corrections: tuple[str, ...] = ()
    """What the question asks about that was taken back or ended since it was said, each as a
    sentence with the words that took it back: the context says these first."""
    as_of: str | None = None
    """The valid time the facts were read at when the question named it and none was given."""

    @classmethod
    def from_answer(cls, a: Answer) -> Recall:
        return cls(
            a.question,
            tuple(a.entities),
            tuple(MemoryFact.from_row(f) for f in a.facts),
            tuple((MemoryFact.from_row(r), r["reason"]) for r in a.rejected),
            a.reason,
            a.context(),
            tuple(TopicMessage.from_row(m) for m in a.messages),
            tuple(withdrawal(c) for c in a.corrections),
            a.as_of,
        )


@dataclass(frozen=True)
class TopicMessage:
    """A message found for a question, best first: ``words`` are the question's words it
    says (as search folds them: "painting" is "paint"), ``around`` those said only in the
    turns around it (those it replies to, and the one answering it), ``spans`` where it says the question's
    keyphrases ((keyphrase text, mention, char start, char end), ``text[start:end] ==
    mention``), ``facts`` the statements it is evidence of, ``name`` who said it when the
    conversation names them, and ``score`` its place in the fused ranking (higher first)."""

    namespace: str
    conversation: str
    message: int
    speaker: str
    at: dt.datetime | None
    text: str
    spans: tuple[tuple[str, str, int, int], ...]
    name: str | None = None
    words: tuple[str, ...] = ()
    facts: tuple[str, ...] = ()
    score: float = 0.0
    withdrawn: tuple[str, ...] = ()
    """What of it was taken back (a correction) or ended since, each as a sentence."""
    around: tuple[str, ...] = ()

    @classmethod
    def from_row(cls, m: Mapping[str, Any]) -> TopicMessage:
        return cls(
            m["namespace"],
            m["conversation"],
            m["message"],
            m["speaker"],
            _instant(m["at"]),
            m["text"],
            tuple((h["text"], h["mention"], h["char_start"], h["char_end"]) for h in m["keyphrases"]),
            m.get("name"),
            tuple(m.get("words") or ()),
            tuple(m.get("facts") or ()),
            float(m.get("score") or 0.0),
            tuple(withdrawal(w) for w in m.get("withdrawn") or ()),
            tuple(m.get("around") or ()),
        )


@dataclass(frozen=True)
class Remembered:
    """A conversation in memory: its id (what ``forget`` takes), when it was loaded, and how
    many statements it gave."""

    conversation: str
    loaded_at: dt.datetime | None
    statements: int

    @classmethod
    def from_row(cls, r: Mapping[str, Any]) -> Remembered:
        at = r["loaded_at"]
        return cls(r["conversation"], at if isinstance(at, dt.datetime) else None, int(r["statements"] or 0))


@dataclass(frozen=True)
class Known:
    """Someone or something the memory knows: its name (the owner is ``user``), type, the
    words it was mentioned by, and its key (what ``facts`` also takes)."""

    name: str
    type: str
    mentions: tuple[str, ...]
    key: str


def _known(rows: list[dict[str, Any]]) -> list[Known]:
    out = [Known(r["name"] or r["role"] or r["key"], r["type"], tuple(r["mentions"] or ()), r["key"]) for r in rows]
    return sorted(out, key=lambda k: (k.name != "user", k.name.casefold(), k.key))


@dataclass(frozen=True)
class Added:
    """What :meth:`Memory.add` did with one conversation: ``status`` is ``loaded`` (what was
    said is in memory), ``skipped`` (nothing new), or ``pending`` (the messages are kept but
    some user turns could not be extracted, so what they say is not known yet: ``failed``
    counts them, ``errors`` say why, and the next ``add`` asks again); the user turns sent to
    the model, and what the load wrote."""

    namespace: str
    conversation: str
    status: str
    turns: int
    extracted: int
    failed: int
    errors: tuple[str, ...] = ()
    counts: Mapping[str, Any] = field(default_factory=dict)


def _instant(text: str | None) -> dt.datetime | None:
    value = to_python(text)
    assert value is None or isinstance(value, dt.datetime), text
    return value


# -- what add does, without I/O ----------------------------------------------------------------------
def _turn(m: Message) -> Turn | None:
    """The turn a message is, or None for one that is passed over (see :data:`Message`)."""
    if isinstance(m, Turn):
        return m
    if not isinstance(m, Mapping):
        raise UsageError(f"a message is a mapping with speaker (or role) and text (or content), not {m!r}")
    speaker = m.get("speaker", m.get("role"))
    text = m.get("text", m.get("content"))
    if speaker in _PASSED_OVER:
        return None
    if speaker not in ("user", "assistant"):
        raise UsageError(
            f"a message's speaker (or role) is 'user' or 'assistant' ({', '.join(sorted(_PASSED_OVER))} "
            f"are passed over), not {speaker!r}"
        )
    if isinstance(text, list):
        parts = [p["text"] for p in text if isinstance(p, Mapping) and isinstance(p.get("text"), str)]
        if not parts:
            return None  # images or audio only: no words to read
        text = "".join(parts)
    if text is None and speaker == "assistant" and m.get("tool_calls"):
        return None
    if not isinstance(text, str):
        raise UsageError(f"a message's text (or content) is a string, not {text!r}")
    at = m.get("at")
    if isinstance(at, dt.datetime):
        at = (at if at.tzinfo else at.replace(tzinfo=dt.UTC)).isoformat()
    # What a turn of a conversation file carries is kept (a message recorded elsewhere, with
    # its speaker's name); a chat API's own keys (ids, tool fields) are not a turn's.
    kept = {f: m[f] for f in _TURN_EXTRAS if m.get(f) is not None}
    try:
        return Turn.model_validate({"speaker": speaker, "text": text, "at": at, **kept})
    except ValidationError as exc:
        raise InputError(f"message {text[:40]!r}: {describe(exc)}") from None


def _same(a: Turn, b: Turn) -> bool:
    # Times compare as instants: "...Z" and "...+00:00" (a datetime sent) are one time.
    return a.speaker == b.speaker and a.text == b.text and (a.at is None or b.at is None or _at(a) == _at(b))


def _at(t: Turn) -> str | None:
    try:
        return normalise_instant(t.at) if t.at is not None else None
    except TimeError:
        return t.at


def extended(
    stored: Conversation | None,
    new: Conversation | Sequence[Message],
    namespace: str | None,
    conversation: str | None,
    title: str | None = None,
    raced: int | None = None,
) -> Conversation:
    """The conversation to load after an ``add``: the stored one with the new messages after
    its turns. Messages that repeat the stored turns from the start (an assistant that sends
    its whole history each time) are the history, not new messages; a stored turn's recorded
    extraction is kept, so it is not paid for again. ``raced``: this add was built before on
    a version of ``raced`` turns, and another add landed first; a new message that another
    add appended since (the same message sent by several processes at once) is not added
    twice."""
    now = normalise_instant(dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat())
    if isinstance(new, Conversation):
        if namespace is not None and namespace != new.namespace:
            raise UsageError(f"the conversation is of namespace {new.namespace!r}, not {namespace!r}")
        if conversation is not None and conversation != new.id:
            raise UsageError(f"the conversation's id is {new.id!r}, not {conversation!r}")
        incoming, whole = list(new.turns), True
        fields = new.model_dump()
    else:
        if namespace is None or conversation is None:
            raise UsageError("adding messages needs namespace= (whose memory) and conversation= (which conversation)")
        if isinstance(new, str | bytes | Mapping):
            raise UsageError("messages are a list of messages (each with role and content), not one text or mapping")
        incoming, whole = [t for t in map(_turn, new) if t is not None], False
        fields = stored.model_dump() if stored else {"id": conversation, "namespace": namespace, "title": title}
    old = list(stored.turns) if stored is not None else []
    if not whole and len(incoming) >= len(old) and all(_same(a, b) for a, b in zip(old, incoming, strict=False)):
        whole = True  # the whole history again, perhaps with more at its end
    if whole:
        turns = []
        for i, b in enumerate(incoming):
            a = old[i] if i < len(old) else None
            if a is not None and _same(a, b) and b.recorded is None:
                b = b.model_copy(update={"recorded": a.recorded, "error": a.error, "at": b.at or a.at})
            turns.append(b)
    else:
        incoming = _unsent(old, incoming)
        if raced is not None:
            incoming = _not_raced(old[raced:], incoming)
        turns = old + incoming
    if not isinstance(new, Conversation):
        # A new message without a time was sent now.
        turns = [
            t if t.at is not None or i < len(old) else t.model_copy(update={"at": now}) for i, t in enumerate(turns)
        ]
    fields.update(turns=[t.model_dump() for t in turns])
    if title is not None:
        fields["title"] = title
    try:
        return Conversation.model_validate(fields)
    except ValidationError as exc:
        raise InputError(
            f"conversation {fields['id']!r} of namespace {fields['namespace']!r}: {describe(exc)}"
        ) from None


def _unsent(old: Sequence[Turn], incoming: list[Turn]) -> list[Turn]:
    """The incoming messages less those at their head that are the stored conversation's last
    turns, time and all: an add made again by a caller who could not know whether the first
    one landed (its process was killed after the write) adds nothing twice. A message without
    a time is never taken for one stored: a person may say "ok" twice."""
    for n in range(min(len(old), len(incoming)), 0, -1):
        if all(
            a.at is not None and b.at is not None and a.speaker == b.speaker and a.text == b.text and _at(a) == _at(b)
            for a, b in zip(old[-n:], incoming[:n], strict=True)
        ):
            return incoming[n:]
    return incoming


def _not_raced(landed: Sequence[Turn], incoming: Sequence[Turn]) -> list[Turn]:
    """The incoming messages less those another add appended (in order) while this one was
    being built."""
    out, j = [], 0
    for t in incoming:
        if j < len(landed) and _same(landed[j], t):
            j += 1
            continue
        out.append(t)
    return out


def _stored(
    db: Database, namespace: str | None, conversation: str | None, paid: _Paid | None = None
) -> tuple[Conversation | None, str | None]:
    """The conversation as loaded (None when it never was, or was loaded before agefacts kept
    conversations) and the content hash of the version loaded (None: none was); and, into
    ``paid``, what an earlier add paid for and did not write (it failed, or its process was
    killed), read once an add."""
    if namespace is None or conversation is None:
        return None, None
    if paid is not None and not paid.read:
        turns, model = ledger.paid(db, namespace, conversation)
        for text, turn in turns.items():
            paid.turns.setdefault(text, turn)
        paid.kept.update(turns)
        paid.model = paid.model or model
        paid.read = True
    got = ledger.stored(db, namespace, conversation)
    if got is None:
        return None, None
    h, doc = got
    return (Conversation.model_validate_json(doc) if doc else None), h


# How many times an add is built again on a version another writer loaded meanwhile.
_ADD_TRIES = 8


@dataclass
class _Paid:
    """What one add asked the model, by the user turn's text: the turn as it came back
    (recorded, or with its error), and the model that answered, so that an add built again
    (appending was refused, or another writer got there first) asks nothing twice."""

    turns: dict[str, Turn] = field(default_factory=dict)
    model: str | None = None
    # The texts of the turns kept in the database until written (agefacts.ledger.keep_paid),
    # and whether this add read what an earlier one kept there.
    kept: set[str] = field(default_factory=set)
    read: bool = False


class _Unwritten:
    """What adds paid for and did not write (the write failed: the engine stopped, the
    connection dropped), by conversation, so that the add tried again reuses it rather than
    asking the model again; dropped once the conversation is written. Bounded: the oldest go."""

    def __init__(self, most: int = 64) -> None:
        self._kept: OrderedDict[tuple[str | None, str | None], _Paid] = OrderedDict()
        self._most = most
        self._lock = threading.Lock()

    def of(self, ident: tuple[str | None, str | None]) -> _Paid:
        with self._lock:
            paid = self._kept.pop(ident, None) or _Paid()
            self._kept[ident] = paid
            while len(self._kept) > self._most:
                self._kept.popitem(last=False)
            return paid

    def written(self, ident: tuple[str | None, str | None]) -> None:
        with self._lock:
            self._kept.pop(ident, None)


def _takes_model(conv: Conversation) -> bool:
    """Whether the conversation can be given a model without changing what it wrote: none of
    its turns recorded a statement (the evidence carries the conversation's model)."""
    return conv.model is None and not any(t.recorded is not None and t.recorded.statements for t in conv.turns)


def _paid(conv: Conversation, paid: _Paid) -> Conversation:
    """``conv`` with the extractions this add already paid for (by the user turn's text) put
    back on the turns that have none, so an add built again does not ask the model again;
    and the model that answered, on a conversation that had none (one the assistant opened)."""
    if not paid.turns:
        return conv
    turns = [
        t.model_copy(update={"recorded": paid.turns[t.text].recorded, "error": paid.turns[t.text].error})
        if t.speaker == "user" and t.recorded is None and t.text in paid.turns
        else t
        for t in conv.turns
    ]
    update: dict[str, Any] = {"turns": turns}
    if paid.model is not None and _takes_model(conv):
        update["model"] = paid.model
    return conv.model_copy(update=update)


def _keep_paid(db: Database, conv: Conversation, turns: Sequence[Turn], paid: _Paid) -> None:
    """Keep what the model answered for these turns of ``conv`` in the database, committed
    before anything is written (and as soon as each is answered): neither a failed write nor
    a process killed before it, or while later turns are asked, makes the add made again pay
    twice."""
    if not turns:
        return
    model = next((t.model for t in turns if t.model), None) or paid.model
    ledger.keep_paid(db, conv.namespace, conv.id, turns, model)
    paid.kept.update(t.text for t in turns)
    _log.debug(
        "%d extraction(s) of conversation %r of namespace %r kept until written", len(turns), conv.id, conv.namespace
    )


def _remember_paid(db: Database, before: Conversation, after: Conversation, paid: _Paid) -> None:
    """Remember what this add's extraction (``before`` it, ``after``) paid for: in the process,
    and in the database what is not kept there yet (a turn that failed, with why)."""
    paid.turns.update(
        {t.text: t for t in after.turns if t.speaker == "user" and (t.recorded is not None or t.error is not None)}
    )
    paid.model = after.model or paid.model
    _keep_paid(
        db,
        after,
        [
            a
            for a, b in zip(after.turns, before.turns, strict=True)
            if a is not b and a.speaker == "user" and a.text not in paid.kept and (a.recorded is not None or a.error)
        ],
        paid,
    )


def _forget_paid(db: Database, conv: Conversation, paid: _Paid) -> None:
    """The conversation is written: what was kept of what it paid for goes."""
    if paid.kept:
        _log.debug(
            "conversation %r of namespace %r written: what it paid for is not kept any more", conv.id, conv.namespace
        )
        ledger.forget_paid(db, conv.namespace, conv.id, sorted(paid.kept))
        paid.kept.clear()


def _asked_already(conv: Conversation, paid: _Paid | None) -> list[str] | None:
    """When every turn ``conv`` would send was asked in this add already (and failed), their
    errors, so that it is not paid for twice; None when some turn is new to this add."""
    if paid is None:
        return None
    waiting = [t for t in conv.turns if t.speaker == "user" and (t.recorded is None or t.error is not None)]
    if not waiting or any(t.text not in paid.turns for t in waiting):
        return None
    return [f"turn {t.text[:40]!r}: {t.error}" for t in waiting if t.error]


def _load(loader: Loader, conv: Conversation, extracted: int, errors: list[str], based_on: str | None) -> Added:
    out = loader.load(conv, source=f"memory:{conv.namespace}/{conv.id}", based_on=based_on)
    if out.status == "failed":
        raise AgeFactsError(f"conversation {conv.id!r} of namespace {conv.namespace!r} was not loaded: {out.reason}")
    return _added(conv, out, extracted, errors)


def _added(conv: Conversation, out: Outcome, extracted: int, errors: list[str]) -> Added:
    user_turns = sum(1 for t in conv.turns if t.speaker == "user")
    # The messages are kept either way; what a failed turn says is not known until the next
    # add asks again, and a caller reading "loaded" would take it as understood.
    status = "pending" if errors else out.status
    return Added(conv.namespace, conv.id, status, user_turns, extracted, len(errors), tuple(errors), out.counts)


# -- appending: an add costs what its messages cost ------------------------------------------------
_TAILS = 64
"""How many conversations a memory keeps, to append to without reading them again."""


class _Tails:
    """The conversations a memory last wrote, newest last: each as loaded whole (its tail is
    made when the next add comes) or as a :class:`~agefacts.append.Tail`."""

    def __init__(self) -> None:
        self._kept: OrderedDict[tuple[str, str], Conversation | Tail] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, ident: tuple[str, str]) -> Conversation | Tail | None:
        with self._lock:
            return self._kept.get(ident)

    def keep(self, ident: tuple[str, str], item: Conversation | Tail) -> None:
        with self._lock:
            self._kept[ident] = item
            self._kept.move_to_end(ident)
            while len(self._kept) > _TAILS:
                self._kept.popitem(last=False)

    def drop(self, namespace: str, conversations: Sequence[str] | None = None) -> None:
        with self._lock:
            for ident in [
                i for i in self._kept if i[0] == namespace and (conversations is None or i[1] in conversations)
            ]:
                del self._kept[ident]


def _new_turns(stored: Conversation, messages: Sequence[Message]) -> list[Turn] | None:
    """The messages that only add to ``stored`` (None: they change it, or are not messages
    at all; the whole conversation is built then, and says what is wrong)."""
    if isinstance(messages, str | bytes | Mapping):
        return None
    incoming = [t for t in map(_turn, messages) if t is not None]
    old = stored.turns
    if len(incoming) >= len(old) and all(_same(a, b) for a, b in zip(old, incoming, strict=False)):
        for a, b in zip(old, incoming, strict=False):
            kept = (
                b
                if b.recorded is not None
                else b.model_copy(update={"recorded": a.recorded, "error": a.error, "at": b.at or a.at})
            )
            if kept != a:
                return None
        incoming = incoming[len(old) :]
    else:
        incoming = _unsent(old, incoming)
    now = normalise_instant(dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat())
    new = [t if t.at is not None else t.model_copy(update={"at": now}) for t in incoming]
    try:
        # The rules of a conversation's turns, for the new ones.
        Conversation.model_validate(
            {"id": stored.id, "namespace": stored.namespace, "turns": [t.model_dump() for t in new]}
        )
    except ValidationError:
        return None
    return new


def _appendable(
    tails: _Tails,
    ontology: Ontology,
    messages: Conversation | Sequence[Message],
    ns: str | None,
    cid: str | None,
    title: str | None,
) -> tuple[Tail, Conversation] | None:
    """The tail to append to and the conversation with the new messages after it, when the
    add only appends to a conversation this memory wrote. Whether nobody changed it since is
    checked where it is written, under the conversation's lock (:meth:`Loader.append`): asked
    here too, it would cost every add a round trip for what is rare."""
    if isinstance(messages, Conversation) or title is not None or ns is None or cid is None:
        return None
    kept = tails.get((ns, cid))
    if kept is None:
        return None
    tail = kept if isinstance(kept, Tail) else tail_of(kept, ontology)
    tails.keep((ns, cid), tail)
    new = _new_turns(tail.conv, messages)
    if not new:
        return None
    return tail, tail.conv.model_copy(update={"turns": [*tail.conv.turns, *new]})


def _appended(
    tails: _Tails, loader: Loader, tail: Tail, conv: Conversation, asked: int, errors: list[str]
) -> Added | None:
    """Write what the new turns of ``conv`` add to ``tail``; None when they cannot be
    appended (the whole conversation is loaded then)."""
    n = len(tail.conv.turns)
    # A conversation the assistant opened has no model until a user turn is extracted: that
    # add loads it whole, with the model (_paid), and the adds after it append.
    if conv.model != tail.conv.model or any(
        a is not b and a != b for a, b in zip(tail.conv.turns, conv.turns[:n], strict=True)
    ):
        return None
    got = append(tail, conv.turns[n:], loader.ontology)
    if isinstance(got, str):
        _log.debug("conversation %r of namespace %r loaded whole: %s", conv.id, conv.namespace, got)
        return None
    new = got.tail
    try:
        out = loader.append(
            new.conv,
            got.plan,
            new.content_hash,
            based_on=tail.content_hash,
            first=got.first,
            turns=got.turns,
            mentions=sorted(got.mentions),
            source=f"memory:{conv.namespace}/{conv.id}",
        )
    except ConversationMoved:
        tails.drop(conv.namespace, [conv.id])
        return None
    tails.keep((conv.namespace, conv.id), new)
    _log.debug("%d turn(s) appended to conversation %r of namespace %r", len(got.turns), conv.id, conv.namespace)
    return _added(new.conv, out, asked, errors)


def _ids(conversations: Iterable[str] | str | None) -> list[str] | None:
    """Conversation ids as a list: one string is one id (iterating it gave its letters, so
    forget("ns", "ab") forgot conversations "a" and "b")."""
    if conversations is None:
        return None
    if isinstance(conversations, str):
        return [conversations]
    ids = list(conversations)
    bad = [c for c in ids if not isinstance(c, str)]
    if bad:
        raise UsageError(f"conversation ids are text; got {bad[0]!r}")
    return ids


def _kept_changing(ns: str | None, cid: str | None) -> AgeFactsError:
    return AgeFactsError(
        f"conversation {cid!r} of namespace {ns!r} kept being changed by other writers while this add was "
        f"built on it ({_ADD_TRIES} times); add the messages again"
    )


_NO_MODEL = (
    "this memory has no model, so no facts were read from {n} user message(s) yet: they are kept, and ask "
    "finds them by their words; open the memory with llm=LLMClient(url, model) (agefacts mcp --llm-url URL "
    "--model NAME) and the next add extracts them, or add messages that carry their extraction ('recorded')"
)


async def _extract(
    llm: LLMClient | None,
    conv: Conversation,
    ontology: Ontology,
    context_turns: int,
    paid: _Paid | None = None,
    keep: Callable[[int, Turn], Awaitable[None] | None] | None = None,
) -> tuple[Conversation, int, list[str]]:
    """The user turns of ``conv`` not yet recorded, asked of the model; ``keep(i, turn)`` with
    each answered, as soon as it is (:func:`_keep_paid`)."""
    n = pending_turns(conv)
    if n == 0:
        return conv, 0, []
    if (again := _asked_already(conv, paid)) is not None:
        return conv, 0, again
    if llm is None:
        # As with a model that is down: the messages are stored (searchable now), the user
        # turns stay unrecorded, and the add is pending until a model reads them.
        _say_no_model_once()
        return conv, 0, [_NO_MODEL.format(n=n)]
    async with llm:
        outcome = await extract_conversation(llm, conv, ontology, context_turns=context_turns, checkpoint=keep)
    return outcome.conversation, n, outcome.errors


def _run(work: Coroutine[Any, Any, _R]) -> _R:
    """Run ``work`` in an event loop of its own, as asyncio.run does, but without handling
    Ctrl-C: asyncio.run looks up the SIGINT handler once the task is done, and Python 3.11
    then formats the task with its result (the whole conversation) as text: 67 ms of an add
    to a conversation of 1,000 turns, growing with its length."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(work)
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


_no_model_said = threading.Event()


def _say_no_model_once() -> None:
    """The log says once per process that facts need a model (each add's result says it too)."""
    if not _no_model_said.is_set():
        _no_model_said.set()
        _log.warning("agefacts: messages are stored without facts: no model is set (Memory(llm=LLMClient(url, model)))")


# -- the facades ---------------------------------------------------------------------------------------
# -- taking a fact back by hand ----------------------------------------------------------------------
def correction(
    db: Database,
    entity: str,
    predicate: str,
    said: str,
    *,
    namespace: str,
    by: str,
    instead: str | None = None,
    reason: str | None = None,
    at: TimeArg = None,
) -> Conversation:
    """A conversation that takes one fact back: ``entity`` (a key, a name, or ``user``)
    ``predicate`` ``said`` (the object's name or the value, as the facts show it) was wrong,
    and, with ``instead``, what is right. It is authored (no model; ``by`` says who, ``at`` when,
    default now), holds one message that says so, and is loaded, replayed, exported and
    forgotten like any conversation: its negated statement, marked as a correction, withdraws
    what was said of the fact up to ``at``. Its id is ``correction-`` and a hash of what it says."""
    import hashlib
    import json

    from .keys import entity_key, user_key
    from .models import Entity
    from .named import run_named
    from .reads import as_of, find_entities

    for name, text in (("namespace", namespace), ("by", by), ("predicate", predicate), ("said", said)):
        if not isinstance(text, str) or not text.strip():
            raise UsageError(f"{name} must be non-empty text, not {text!r}")
    found = find_entities(db, entity, namespace)
    if not found:
        raise QueryError(f"no entity {entity!r} in namespace {namespace!r}: give a key, a name or a mention")
    when = as_of(None, at)[1]
    subject = found[0]
    rows = [
        r
        for r in run_named(db, "fact_statements", {"entity": subject["key"], "known_at": when}).dicts()
        if r["subject_key"] == subject["key"] and r["predicate"] == predicate and not r["ends_fact"]
    ]
    target = said.strip().casefold()
    match = [r for r in rows if str(r["object"] if r["object"] is not None else r["value"]).casefold() == target]
    if not match:
        known = sorted({str(r["object"] if r["object"] is not None else r["value"]) for r in rows})
        listed = ", ".join(map(repr, known)) if known else "none"
        raise QueryError(
            f"{subject['name']} has no {predicate} {said!r} in namespace {namespace!r} to correct "
            f"(what was said of {predicate}: {listed})"
        )
    old = match[0]

    def declared(key: str, handle: str) -> dict[str, Any] | None:
        """The entity entry that keys to ``key`` (None for the owner, the handle ``user``)."""
        if key == user_key(namespace):
            return None
        ((typ, name, attrs),) = db.cypher(
            "MATCH (n) WHERE n.k = $k RETURN n.type, n.name, n.attrs", {"k": key}, ("type", "name", "attrs")
        ).rows
        ent: dict[str, Any] = {"handle": handle, "type": typ, "mention": name or handle, "resolution": "resolved"}
        if name:
            ent["name"] = name
        rel = (attrs or {}).get("rel")
        if rel:
            ent["attrs"] = {"rel": rel}
        if entity_key(namespace, "", Entity.model_validate(ent)) != key:
            raise QueryError(
                f"{ent['mention']!r} is a placeholder of one conversation and cannot be named from another: "
                "forget or correct that conversation instead"
            )
        return ent

    entities: list[dict[str, Any]] = []
    handle_of: dict[str, str] = {}
    for key in (subject["key"], old["object_key"]):
        if key is not None and key not in handle_of:
            ent = declared(key, f"e{len(entities) + 1}")
            handle_of[key] = ent["handle"] if ent else "user"
            if ent:
                entities.append(ent)
    shown = f"{subject['name']} {predicate} {said}"
    text = f"{by} corrects: {shown} is not so"
    statements: list[dict[str, Any]] = [
        {
            "subject": handle_of[subject["key"]],
            "predicate": predicate,
            **({"object": handle_of[old["object_key"]]} if old["object_key"] else {"value": old["value"]}),
            "quote": shown,
            "polarity": "negated",
            "tense": "current",
            "correction": True,
        }
    ]
    if instead is not None:
        fix: dict[str, Any] = {"value": instead}
        if old["object_key"] is not None:
            again = find_entities(db, instead, namespace)
            if again:
                ent = declared(again[0]["key"], f"e{len(entities) + 1}")
            else:
                # Named here for the first time ("it is Bath", Bath never mentioned): an entity of
                # the type of the one it replaces.
                ent = {
                    "handle": f"e{len(entities) + 1}",
                    "type": old["object_type"],
                    "mention": instead,
                    "resolution": "resolved",
                    "name": instead,
                }
            if ent:
                entities.append(ent)
            fix = {"object": ent["handle"] if ent else "user"}
        text += f"; it is {instead}"
        statements.append(
            {"subject": handle_of[subject["key"]], "predicate": predicate, **fix, "quote": f"it is {instead}",
             "polarity": "asserted", "tense": "current"}
        )  # fmt: skip
    if reason:
        text += f" ({reason})"
    ident = json.dumps([namespace, subject["key"], predicate, said, instead, by, when], ensure_ascii=False)
    return Conversation.model_validate(
        {
            "id": "correction-" + hashlib.sha256(ident.encode()).hexdigest()[:16],
            "namespace": namespace,
            "title": f"correction by {by}",
            "notes": reason,
            "turns": [
                {
                    # The owner's turn (what the gate reads), said in the words of who corrected:
                    # shown as theirs wherever the message is shown.
                    "speaker": "user",
                    "name": by,
                    "text": text,
                    "at": when,
                    "recorded": {"entities": entities, "statements": statements, "followups": []},
                }
            ],
        }
    )


# -- a memory placed on several servers ------------------------------------------------------------
_NO_ONE_DATABASE = (
    "this memory is placed on several servers (a placement), each with a database of its own; "
    "open one server's memory by its dsn to reach its database"
)


def _placement(dsn: str | None, placement: Placement | str | os.PathLike[str] | None) -> Placement | None:
    """The placement a memory is opened on: the one given, else ``$AGEFACTS_PLACEMENT`` when no
    dsn is given; None for one database."""
    if dsn is not None and placement is not None:
        raise UsageError("give a memory a dsn (one database) or a placement (several servers), not both")
    return placement_from(placement) if dsn is None else None


def _placed_namespace(namespace: str | None) -> str:
    if namespace is None:
        raise UsageError("a memory placed on several servers needs namespace= (whose memory): it says which server")
    return namespace


def _across(namespace: str | None, all_namespaces: bool) -> bool:
    """Whether a read of a placed memory asks every server (``all_namespaces``) or one."""
    if all_namespaces:
        return True
    if namespace is None:
        raise UsageError(
            "a memory placed on several servers reads one namespace (namespace=) or every one "
            "(all_namespaces=True), which asks every server"
        )
    return False


class Memory:
    """An assistant's memory in one graph: ``add`` what was said, ``ask``/``facts``/
    ``history`` what is known, ``forget`` and ``export`` a namespace's conversations.

    ``dsn`` is a PostgreSQL with AGE (default: ``$AGEFACTS_DSN``, then the embedded engine,
    started if needed); ``ontology`` gates and judges facts (default: the one the graph was
    last loaded with, else the shipped one); ``llm`` extracts the user turns that have no recording;
    ``tune_interpreter`` lets a load change the process's thread switch interval and garbage
    collector threshold while it runs (faster for a process that only loads; off, a memory
    leaves its host's interpreter alone); ``embedder`` adds the messages nearest a question in
    meaning to what ``ask`` finds (:mod:`agefacts.embed`; without one, words are searched);
    ``placement`` (a :class:`~agefacts.placement.Placement` or its file; without a ``dsn``,
    ``$AGEFACTS_PLACEMENT`` when set) spreads namespaces over several servers, each call going
    to its namespace's (:mod:`agefacts.placed`); ``replica`` is a streaming replica's dsn that
    reads go to once it holds this memory's own writes (:mod:`agefacts.replica`). Use it as a
    context manager, or call :meth:`close`."""

    # What a write says where this memory has no one database of its own.
    _NOT_OPEN = _NO_ONE_DATABASE

    def __init__(
        self,
        dsn: str | None = None,
        graph: str = DEFAULT_GRAPH,
        *,
        ontology: Ontology | None = None,
        llm: LLMClient | None = None,
        via: str = "bulk",
        context_turns: int = DEFAULT_CONTEXT_TURNS,
        tune_interpreter: bool = False,
        embedder: Embedder | None = None,
        placement: Placement | str | os.PathLike[str] | None = None,
        replica: str | None = None,
    ):
        self.llm = llm
        self.context_turns = context_turns
        self._via = via
        self.tune_interpreter = tune_interpreter
        self.embedder = embedder
        # One write at a time, as AsyncMemory's: a correction reads what it takes back and
        # writes in one step, which another thread's write must not come between.
        self._writing = threading.Lock()
        self._tails = _Tails()
        self._unwritten = _Unwritten()
        placed = _placement(dsn, placement)
        self._router: Router[Memory] | None = None
        self._db: Database | None = None
        self._reads: ReplicaReads | None = None
        if placed is not None:
            if replica is not None:
                raise UsageError("on a placement, each server names its replica (replica = ... beside its dsn)")
            self.ontology = ontology or default_ontology()

            def member(server: Server) -> Memory:
                return Memory(
                    server.dsn,
                    graph,
                    ontology=ontology,
                    llm=llm,
                    via=via,
                    context_turns=context_turns,
                    tune_interpreter=tune_interpreter,
                    embedder=embedder,
                    replica=server.replica,
                )

            self._router = Router(
                placed,
                member,
                lambda m, ns: ledger.moves(m.db, None if ns is None else [ns]),
                lambda m, ns: ledger.holds(m.db, ns),
            )
            return
        self._db = Database(resolve_dsn(dsn), graph).connect()
        if replica is not None:
            self._reads = ReplicaReads(self._db, replica, graph)
        # Without one given, the ontology the graph was loaded with (or the shipped one).
        self.ontology = ontology or ledger.graph_ontology(self.db) or default_ontology()

    def _reading(self) -> Database:
        """Where a read goes: the replica once it holds this memory's writes, else here."""
        return self._reads.db() if self._reads is not None else self.db

    def _wrote(self, result: _R) -> _R:
        if self._reads is not None and self._db is not None:
            self._reads.wrote(wal_position(self._db))
        return result

    @property
    def db(self) -> Database:
        """The database (a memory placed on several servers has one per server)."""
        if self._db is None:
            raise UsageError(_NO_ONE_DATABASE)
        return self._db

    def _writer(self) -> tuple[Database, Loader]:
        # A loader per write: a loader refuses one conversation met twice with other content,
        # which is what successive adds to one conversation are.
        if self._db is None:
            raise UsageError(self._NOT_OPEN)
        return self._db, Loader(self._db, self.ontology, via=self._via, tune_interpreter=self.tune_interpreter)

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._router is not None:
            for m in self._router.opened():
                m.close()
        if self._reads is not None:
            self._reads.close()
        if self._db is not None:
            self._db.close()

    def add(
        self,
        messages: Conversation | Sequence[Message],
        *,
        namespace: str | None = None,
        conversation: str | None = None,
        title: str | None = None,
    ) -> Added:
        """Add a conversation, or new messages of one (``namespace`` and ``conversation``
        say which), extract the user turns not yet recorded, and load it: in one call."""
        ns = messages.namespace if isinstance(messages, Conversation) else namespace
        cid = messages.id if isinstance(messages, Conversation) else conversation
        need_text(ns, "namespace= (whose memory)", optional=True)
        need_text(cid, "conversation= (which conversation)", optional=True)
        if self._router is not None:
            return self._router.on(
                _placed_namespace(ns),
                lambda m: m.add(messages, namespace=namespace, conversation=conversation, title=title),
                write=True,
            )
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise UsageError("Memory.add was called inside a running event loop; use AsyncMemory there")
        paid = self._unwritten.of((ns, cid))
        asked = 0
        raced: int | None = None
        start = _appendable(self._tails, self.ontology, messages, ns, cid, title) if self._via == "bulk" else None
        if start is not None:
            tail, conv = start
            before = _paid(conv, paid)
            conv, asked, errors = self._extract(before, paid)
            _remember_paid(self.db, before, conv, paid)
            done = _appended(self._tails, self._writer()[1], tail, conv, asked, errors)
            if done is not None:
                _forget_paid(self.db, conv, paid)
                self._unwritten.written((ns, cid))
                return self._wrote(done)
            raced = len(tail.conv.turns)
        # Built on the version read; when another writer loads one first, built again on that.
        for _ in range(_ADD_TRIES):
            stored, based_on = _stored(self.db, ns, cid, paid)
            before = _paid(extended(stored, messages, namespace, conversation, title, raced), paid)
            raced = len(stored.turns) if stored is not None else 0
            conv, n, errors = self._extract(before, paid)
            _remember_paid(self.db, before, conv, paid)
            asked += n
            try:
                added = _load(self._writer()[1], conv, asked, errors, based_on)
            except ConversationMoved:
                continue
            self._tails.keep((conv.namespace, conv.id), conv)
            _forget_paid(self.db, conv, paid)
            self._unwritten.written((ns, cid))
            return self._wrote(added)
        raise _kept_changing(ns, cid)

    def _extract(self, conv: Conversation, paid: _Paid | None = None) -> tuple[Conversation, int, list[str]]:
        if pending_turns(conv) == 0:
            return conv, 0, []  # an event loop for nothing costs more than the rest of a short add
        if (again := _asked_already(conv, paid)) is not None:
            return conv, 0, again
        return _run(
            _extract(
                self.llm,
                conv,
                self.ontology,
                self.context_turns,
                keep=lambda _, turn: _keep_paid(self.db, conv, [turn], paid) if paid is not None else None,
            )
        )

    def facts(
        self,
        entity: str = "user",
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        valid_at: TimeArg = None,
        known_at: TimeArg = None,
    ) -> list[MemoryFact]:
        """The facts about an entity (default: the namespace's owner), valid at ``valid_at``
        as known at ``known_at`` (both default to now)."""
        if self._router is not None:
            if not _across(namespace, all_namespaces):
                return self._router.on(
                    str(namespace),
                    lambda m: m.facts(entity, namespace=namespace, valid_at=valid_at, known_at=known_at),
                    write=False,
                )

            def each(m: Memory) -> list[dict[str, Any]]:
                got = facts(m._reading(), entity, all_namespaces=True, valid_at=valid_at, known_at=known_at)
                return got.dicts()

            return [MemoryFact.from_row(r) for r in merge_rows(self._router.everywhere(each), fact_order)]
        rows = facts(
            self._reading(),
            entity,
            namespace=namespace,
            all_namespaces=all_namespaces,
            valid_at=valid_at,
            known_at=known_at,
        )
        return [MemoryFact.from_row(r) for r in rows.dicts()]

    def history(
        self, entity: str, predicate: str, *, namespace: str | None = None, all_namespaces: bool = False
    ) -> list[HistoryEntry]:
        """An entity's values for one predicate over time, superseded and ended ones included."""
        if self._router is not None:
            if not _across(namespace, all_namespaces):
                return self._router.on(
                    str(namespace), lambda m: m.history(entity, predicate, namespace=namespace), write=False
                )

            def each(m: Memory) -> list[dict[str, Any]]:
                got = history(m._reading(), entity, predicate, all_namespaces=True, ontology=m.ontology)
                return got.dicts()

            return [HistoryEntry.from_row(r) for r in merge_rows(self._router.everywhere(each), history_order)]
        rows = history(
            self._reading(),
            entity,
            predicate,
            namespace=namespace,
            all_namespaces=all_namespaces,
            ontology=self.ontology,
        )
        return [HistoryEntry.from_row(r) for r in rows.dicts()]

    def ask(
        self,
        question: str,
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        k: int = 10,
        valid_at: TimeArg = None,
        known_at: TimeArg = None,
    ) -> Recall:
        """The facts a question is about, ranked, with citations (see :mod:`agefacts.retrieve`)."""
        if self._router is not None:
            if not _across(namespace, all_namespaces):
                return self._router.on(
                    str(namespace),
                    lambda m: m.ask(question, namespace=namespace, k=k, valid_at=valid_at, known_at=known_at),
                    write=False,
                )

            # What each server's search counts, added up: each ranks as one holding all would.
            def counts(m: Memory) -> dict[str, Any]:
                return search_scope(m._reading(), question, m.ontology)

            scope = add_scopes(s for s, _ in self._router.everywhere(counts))

            def each(m: Memory) -> Gathered:
                return gather(
                    m._reading(),
                    question,
                    m.ontology,
                    all_namespaces=True,
                    k=k,
                    valid_at=valid_at,
                    known_at=known_at,
                    embedder=m.embedder,
                    whole=True,
                    scope=scope,
                )

            merged = merge_gathered(self._router.everywhere(each), k)
            return Recall.from_answer(answer_gathered(question, self.ontology, merged, k, None))
        answer = ask(
            self._reading(),
            question,
            self.ontology,
            namespace=namespace,
            all_namespaces=all_namespaces,
            k=k,
            valid_at=valid_at,
            known_at=known_at,
            embedder=self.embedder,
        )
        return Recall.from_answer(answer)

    def correct(
        self,
        entity: str,
        predicate: str,
        said: str,
        *,
        namespace: str,
        by: str,
        instead: str | None = None,
        reason: str | None = None,
        at: TimeArg = None,
    ) -> Added:
        """Take one fact back (see :func:`correction`): ``memory.correct("user", "allergic_to",
        "peanuts", namespace="mei", by="assistant", instead="tree nuts")``. Forget the
        conversation it returns to undo it."""
        if self._router is not None:
            return self._router.on(
                _placed_namespace(namespace),
                lambda m: m.correct(
                    entity, predicate, said, namespace=namespace, by=by, instead=instead, reason=reason, at=at
                ),
                write=True,
            )
        db, loader = self._writer()

        def work() -> Added:
            conv = correction(
                db, entity, predicate, said, namespace=namespace, by=by, instead=instead, reason=reason, at=at
            )
            return _load(loader, conv, 0, [], None)

        with self._writing:
            return self._wrote(work())

    def forget(self, namespace: str, conversations: Iterable[str] | str | None = None) -> list[str]:
        """Remove what the namespace's conversations (those named, or all) wrote; returns
        the ids forgotten."""
        if self._router is not None:
            return self._router.on(
                _placed_namespace(namespace), lambda m: m.forget(namespace, conversations), write=True
            )
        _, loader = self._writer()
        wanted = _ids(conversations)
        self._tails.drop(namespace, wanted)
        with self._writing:
            return self._wrote(loader.forget(namespace, wanted))

    def export(self, namespace: str, conversations: Iterable[str] | str | None = None) -> list[Conversation]:
        """The namespace's conversations as loaded, with their recordings: loading them into
        an empty graph gives the same graph."""
        if self._router is not None:
            return self._router.on(
                _placed_namespace(namespace), lambda m: m.export(namespace, conversations), write=False
            )
        db, _ = self._writer()
        wanted = _ids(conversations)
        with self._writing:
            return ledger.export(db, namespace, wanted)

    def conversations(self, namespace: str) -> list[Remembered]:
        """The namespace's conversations in memory: each one's id (what ``forget`` takes),
        when it was loaded, and how many statements it gave."""
        need_text(namespace, "namespace= (whose memory)")
        if self._router is not None:
            return self._router.on(namespace, lambda m: m.conversations(namespace), write=False)
        rows = run_named(self._reading(), "conversations", {"namespace": namespace})
        return [Remembered.from_row(r) for r in rows.dicts()]

    def entities(self, namespace: str) -> list[Known]:
        """Who and what the namespace's memory knows: each entity's name (or role), type and
        the words it was mentioned by; ``facts`` says what is known about one."""
        need_text(namespace, "namespace= (whose memory)")
        if self._router is not None:
            return self._router.on(namespace, lambda m: m.entities(namespace), write=False)
        return _known(run_named(self._reading(), "entities_of", {"namespace": namespace}).dicts())


class AsyncMemory:
    """:class:`Memory` for asyncio: ``async with AsyncMemory(...) as memory``. Reads run on
    psycopg's asynchronous connection and the model is asked through httpx's asynchronous
    client; the write (the load of a conversation, and forget) runs the loader on a
    connection of its own in a worker thread, one write at a time, since the load is one
    transaction of many statements that the loader already overlaps with its own work."""

    _NOT_OPEN = "the memory is not open: use `async with AsyncMemory(...) as memory`"

    def __init__(
        self,
        dsn: str | None = None,
        graph: str = DEFAULT_GRAPH,
        *,
        ontology: Ontology | None = None,
        llm: LLMClient | None = None,
        via: str = "bulk",
        context_turns: int = DEFAULT_CONTEXT_TURNS,
        tune_interpreter: bool = False,
        embedder: Embedder | None = None,
        placement: Placement | str | os.PathLike[str] | None = None,
        replica: str | None = None,
    ):
        self._given_ontology = ontology
        self.ontology = ontology or default_ontology()  # until open() reads the graph's own
        self.llm = llm
        self.context_turns = context_turns
        self.tune_interpreter = tune_interpreter
        self.embedder = embedder
        self._dsn = dsn
        self._graph = graph
        self._via = via
        self._db: Database | None = None
        self._adb: AsyncDatabase | None = None
        self._writing = asyncio.Lock()
        self._tails = _Tails()
        self._unwritten = _Unwritten()
        placed = _placement(dsn, placement)
        self._router: AsyncRouter[AsyncMemory] | None = None
        self._replica = replica
        self._reads: AsyncReplicaReads | None = None
        if placed is not None:
            if replica is not None:
                raise UsageError("on a placement, each server names its replica (replica = ... beside its dsn)")

            async def member(server: Server) -> AsyncMemory:
                return await AsyncMemory(
                    server.dsn,
                    graph,
                    ontology=ontology,
                    llm=llm,
                    via=via,
                    context_turns=context_turns,
                    tune_interpreter=tune_interpreter,
                    embedder=embedder,
                    replica=server.replica,
                ).open()

            async def notes(m: AsyncMemory, ns: str | None) -> dict[str, tuple[str, str]]:
                return await asyncio.to_thread(ledger.moves, m._writer()[0], None if ns is None else [ns])

            async def holds(m: AsyncMemory, ns: str) -> str | None:
                return await asyncio.to_thread(ledger.holds, m._writer()[0], ns)

            self._router = AsyncRouter(placed, member, notes, holds)

    async def __aenter__(self) -> AsyncMemory:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> AsyncMemory:
        """Connect: the writer's connection sets up the graph if it is missing, then the
        reader's opens (on a placement, each server's when first needed)."""
        if self._router is not None:
            return self

        def writer() -> tuple[str, Database]:
            dsn = resolve_dsn(self._dsn)
            return dsn, Database(dsn, self._graph).connect()

        dsn, db = await asyncio.to_thread(writer)
        self._db = db
        if self._given_ontology is None:
            stored: Ontology | None = await asyncio.to_thread(ledger.graph_ontology, db)
            self.ontology = stored or default_ontology()
        self._adb = await AsyncDatabase(dsn, self._graph).connect()
        if self._replica is not None:
            self._reads = AsyncReplicaReads(self._adb, self._replica, self._graph)
        return self

    async def close(self) -> None:
        if self._router is not None:
            for m in self._router.opened():
                await m.close()
        if self._reads is not None:
            await self._reads.close()
            self._reads = None
        if self._adb is not None:
            await self._adb.close()
        if self._db is not None:
            await asyncio.to_thread(self._db.close)
        self._adb = self._db = None

    def _reader(self) -> AsyncDatabase:
        if self._adb is None:
            raise UsageError("the memory is not open: use `async with AsyncMemory(...) as memory`")
        return self._adb

    async def _reading(self) -> AsyncDatabase:
        """Where a read goes: the replica once it holds this memory's writes, else the primary."""
        return await self._reads.db() if self._reads is not None else self._reader()

    async def _wrote(self, result: _R) -> _R:
        if self._reads is not None and self._db is not None:
            self._reads.wrote(await asyncio.to_thread(wal_position, self._db))
        return result

    def _writer(self) -> tuple[Database, Loader]:
        # A loader per write: a loader refuses one conversation met twice with other content,
        # which is what successive adds to one conversation are.
        if self._db is None:
            raise UsageError(self._NOT_OPEN)
        return self._db, Loader(self._db, self.ontology, via=self._via, tune_interpreter=self.tune_interpreter)

    def _keeper(self, conv: Conversation, paid: _Paid) -> Callable[[int, Turn], Awaitable[None]]:
        """Keeps each turn the model answers (:func:`_keep_paid`), on the writer's connection,
        one add at a time, off the event loop."""

        async def keep(_: int, turn: Turn) -> None:
            async with self._writing:
                await asyncio.to_thread(_keep_paid, self._writer()[0], conv, [turn], paid)

        return keep

    async def add(
        self,
        messages: Conversation | Sequence[Message],
        *,
        namespace: str | None = None,
        conversation: str | None = None,
        title: str | None = None,
    ) -> Added:
        """See :meth:`Memory.add`."""
        ns = messages.namespace if isinstance(messages, Conversation) else namespace
        cid = messages.id if isinstance(messages, Conversation) else conversation
        need_text(ns, "namespace= (whose memory)", optional=True)
        need_text(cid, "conversation= (which conversation)", optional=True)
        if self._router is not None:
            return await self._router.on(
                _placed_namespace(ns),
                lambda m: m.add(messages, namespace=namespace, conversation=conversation, title=title),
                write=True,
            )
        db, _ = self._writer()
        paid = self._unwritten.of((ns, cid))
        asked = 0
        raced: int | None = None
        if self._via == "bulk":
            # No connection is used: the tail is made (once, for a chat first met) off the loop.
            start = await asyncio.to_thread(_appendable, self._tails, self.ontology, messages, ns, cid, title)
            if start is not None:
                tail, conv = start
                before = _paid(conv, paid)
                conv, asked, errors = await _extract(
                    self.llm, before, self.ontology, self.context_turns, paid, self._keeper(before, paid)
                )
                async with self._writing:
                    await asyncio.to_thread(_remember_paid, db, before, conv, paid)
                    done = await asyncio.to_thread(_appended, self._tails, self._writer()[1], tail, conv, asked, errors)
                    if done is not None:
                        await asyncio.to_thread(_forget_paid, db, conv, paid)
                if done is not None:
                    self._unwritten.written((ns, cid))
                    return await self._wrote(done)
                raced = len(tail.conv.turns)
        for _ in range(_ADD_TRIES):
            # The writer's one connection serves one add at a time; the model is asked outside
            # the lock, so adds to different conversations wait for it side by side (and one
            # that another add overtook is built again on what that add loaded).
            async with self._writing:
                stored, based_on = await asyncio.to_thread(_stored, db, ns, cid, paid)
            before = _paid(extended(stored, messages, namespace, conversation, title, raced), paid)
            raced = len(stored.turns) if stored is not None else 0
            conv, n, errors = await _extract(
                self.llm, before, self.ontology, self.context_turns, paid, self._keeper(before, paid)
            )
            asked += n
            try:
                async with self._writing:
                    await asyncio.to_thread(_remember_paid, db, before, conv, paid)
                    added = await asyncio.to_thread(_load, self._writer()[1], conv, asked, errors, based_on)
                    await asyncio.to_thread(_forget_paid, db, conv, paid)
            except ConversationMoved:
                continue
            self._tails.keep((conv.namespace, conv.id), conv)
            self._unwritten.written((ns, cid))
            return await self._wrote(added)
        raise _kept_changing(ns, cid)

    async def facts(
        self,
        entity: str = "user",
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        valid_at: TimeArg = None,
        known_at: TimeArg = None,
    ) -> list[MemoryFact]:
        """See :meth:`Memory.facts`."""
        if self._router is not None:
            if not _across(namespace, all_namespaces):
                return await self._router.on(
                    str(namespace),
                    lambda m: m.facts(entity, namespace=namespace, valid_at=valid_at, known_at=known_at),
                    write=False,
                )

            async def each(m: AsyncMemory) -> list[dict[str, Any]]:
                got = await facts_async(
                    await m._reading(), entity, all_namespaces=True, valid_at=valid_at, known_at=known_at
                )
                return got.dicts()

            return [MemoryFact.from_row(r) for r in merge_rows(await self._router.everywhere(each), fact_order)]
        rows = await facts_async(
            await self._reading(),
            entity,
            namespace=namespace,
            all_namespaces=all_namespaces,
            valid_at=valid_at,
            known_at=known_at,
        )
        return [MemoryFact.from_row(r) for r in rows.dicts()]

    async def history(
        self, entity: str, predicate: str, *, namespace: str | None = None, all_namespaces: bool = False
    ) -> list[HistoryEntry]:
        """See :meth:`Memory.history`."""
        if self._router is not None:
            if not _across(namespace, all_namespaces):
                return await self._router.on(
                    str(namespace), lambda m: m.history(entity, predicate, namespace=namespace), write=False
                )

            async def each(m: AsyncMemory) -> list[dict[str, Any]]:
                got = await history_async(
                    await m._reading(), entity, predicate, all_namespaces=True, ontology=m.ontology
                )
                return got.dicts()

            return [HistoryEntry.from_row(r) for r in merge_rows(await self._router.everywhere(each), history_order)]
        rows = await history_async(
            await self._reading(),
            entity,
            predicate,
            namespace=namespace,
            all_namespaces=all_namespaces,
            ontology=self.ontology,
        )
        return [HistoryEntry.from_row(r) for r in rows.dicts()]

    async def ask(
        self,
        question: str,
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        k: int = 10,
        valid_at: TimeArg = None,
        known_at: TimeArg = None,
    ) -> Recall:
        """See :meth:`Memory.ask`."""
        if self._router is not None:
            if not _across(namespace, all_namespaces):
                return await self._router.on(
                    str(namespace),
                    lambda m: m.ask(question, namespace=namespace, k=k, valid_at=valid_at, known_at=known_at),
                    write=False,
                )

            async def counts(m: AsyncMemory) -> dict[str, Any]:
                return await search_scope_async(await m._reading(), question, m.ontology)

            scope = add_scopes(s for s, _ in await self._router.everywhere(counts))

            async def each(m: AsyncMemory) -> Gathered:
                return await gather_async(
                    await m._reading(),
                    question,
                    m.ontology,
                    all_namespaces=True,
                    k=k,
                    valid_at=valid_at,
                    known_at=known_at,
                    embedder=m.embedder,
                    whole=True,
                    scope=scope,
                )

            merged = merge_gathered(await self._router.everywhere(each), k)
            return Recall.from_answer(answer_gathered(question, self.ontology, merged, k, None))
        answer = await ask_async(
            await self._reading(),
            question,
            self.ontology,
            namespace=namespace,
            all_namespaces=all_namespaces,
            k=k,
            valid_at=valid_at,
            known_at=known_at,
            embedder=self.embedder,
        )
        return Recall.from_answer(answer)

    async def correct(
        self,
        entity: str,
        predicate: str,
        said: str,
        *,
        namespace: str,
        by: str,
        instead: str | None = None,
        reason: str | None = None,
        at: TimeArg = None,
    ) -> Added:
        """See :meth:`Memory.correct`."""
        if self._router is not None:
            return await self._router.on(
                _placed_namespace(namespace),
                lambda m: m.correct(
                    entity, predicate, said, namespace=namespace, by=by, instead=instead, reason=reason, at=at
                ),
                write=True,
            )
        db, loader = self._writer()

        def work() -> Added:
            conv = correction(
                db, entity, predicate, said, namespace=namespace, by=by, instead=instead, reason=reason, at=at
            )
            return _load(loader, conv, 0, [], None)

        async with self._writing:
            return await self._wrote(await asyncio.to_thread(work))

    async def forget(self, namespace: str, conversations: Iterable[str] | str | None = None) -> list[str]:
        """See :meth:`Memory.forget`."""
        if self._router is not None:
            return await self._router.on(
                _placed_namespace(namespace), lambda m: m.forget(namespace, conversations), write=True
            )
        _, loader = self._writer()
        wanted = _ids(conversations)
        self._tails.drop(namespace, wanted)
        async with self._writing:
            return await self._wrote(await asyncio.to_thread(loader.forget, namespace, wanted))

    async def export(self, namespace: str, conversations: Iterable[str] | str | None = None) -> list[Conversation]:
        """See :meth:`Memory.export`."""
        if self._router is not None:
            return await self._router.on(
                _placed_namespace(namespace), lambda m: m.export(namespace, conversations), write=False
            )
        db, _ = self._writer()
        wanted = _ids(conversations)
        async with self._writing:
            return await asyncio.to_thread(ledger.export, db, namespace, wanted)

    async def conversations(self, namespace: str) -> list[Remembered]:
        """See :meth:`Memory.conversations`."""
        need_text(namespace, "namespace= (whose memory)")
        if self._router is not None:
            return await self._router.on(namespace, lambda m: m.conversations(namespace), write=False)
        rows = await run_named_async(await self._reading(), "conversations", {"namespace": namespace})
        return [Remembered.from_row(r) for r in rows.dicts()]

    async def entities(self, namespace: str) -> list[Known]:
        """See :meth:`Memory.entities`."""
        need_text(namespace, "namespace= (whose memory)")
        if self._router is not None:
            return await self._router.on(namespace, lambda m: m.entities(namespace), write=False)
        return _known((await run_named_async(await self._reading(), "entities_of", {"namespace": namespace})).dicts())
