"""What an add does with the messages it is given, apart from the facades that hold a memory's
connections: the conversation it builds on the stored one (:func:`extended`), what it paid the
model for and keeps until written (so that nothing is paid twice), and appending to a
conversation this memory wrote last (:mod:`agefacts.append`). :mod:`agefacts.memory` calls
these, sync or async, in the same order."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from . import ledger
from .append import Tail, append, tail_of
from .db import Database
from .errors import AgeFactsError, ConversationMoved, InputError, TimeError, UsageError
from .extract import extract_conversation, pending_turns
from .load import Loader
from .model_client import LLMClient
from .models import Conversation, Turn, describe
from .ontology import Ontology
from .results import Added
from .summary import Outcome
from .temporal import normalise_instant

__all__ = [
    "ADD_TRIES",
    "Message",
    "Paid",
    "Tails",
    "Unwritten",
    "appendable",
    "appended",
    "asked_already",
    "conversation_ids",
    "extended",
    "extract_pending",
    "forget_paid",
    "keep_paid",
    "kept_changing",
    "load_correction",
    "load_whole",
    "remember_paid",
    "stored_version",
    "with_paid",
]

Message = Mapping[str, Any] | Turn
"""A message to add: a :class:`~agefacts.models.Turn`, or a mapping with ``speaker`` (or
``role``: ``user`` or ``assistant``), ``text`` (or ``content``: a string, or a chat API's list
of parts, whose text parts are joined) and optionally ``at`` (ISO-8601 text or a ``datetime``;
default: when it is added) and what a conversation file's turn carries: ``name`` (who spoke),
``recorded`` (an extraction made already, then not asked of a model), ``error``, ``keyphrases``. A chat API's other messages (``system``, ``developer``, ``tool``,
``function``; an assistant's tool calls; a message with no text part) are passed over: they
are not the person's or the assistant's words."""

# What an add says is the memory's, under the logger it always had.
_log = logging.getLogger("agefacts.memory")
_PASSED_OVER = frozenset({"system", "developer", "tool", "function"})
_TURN_EXTRAS = ("name", "recorded", "model", "error", "keyphrases")


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


def stored_version(
    db: Database, namespace: str | None, conversation: str | None, paid: Paid | None = None
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
ADD_TRIES = 8


@dataclass
class Paid:
    """What one add asked the model, by the user turn's text: the turn as it came back
    (recorded, or with its error), and the model that answered, so that an add built again
    (appending was refused, or another writer got there first) asks nothing twice."""

    turns: dict[str, Turn] = field(default_factory=dict)
    model: str | None = None
    # The texts of the turns kept in the database until written (agefacts.ledger.keep_paid),
    # and whether this add read what an earlier one kept there.
    kept: set[str] = field(default_factory=set)
    read: bool = False


class Unwritten:
    """What adds paid for and did not write (the write failed: the engine stopped, the
    connection dropped), by conversation, so that the add tried again reuses it rather than
    asking the model again; dropped once the conversation is written. Bounded: the oldest go."""

    def __init__(self, most: int = 64) -> None:
        self._kept: OrderedDict[tuple[str | None, str | None], Paid] = OrderedDict()
        self._most = most
        self._lock = threading.Lock()

    def of(self, ident: tuple[str | None, str | None]) -> Paid:
        with self._lock:
            paid = self._kept.pop(ident, None) or Paid()
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


def with_paid(conv: Conversation, paid: Paid) -> Conversation:
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


def keep_paid(db: Database, conv: Conversation, turns: Sequence[Turn], paid: Paid) -> None:
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


def remember_paid(db: Database, before: Conversation, after: Conversation, paid: Paid) -> None:
    """Remember what this add's extraction (``before`` it, ``after``) paid for: in the process,
    and in the database what is not kept there yet (a turn that failed, with why)."""
    paid.turns.update(
        {t.text: t for t in after.turns if t.speaker == "user" and (t.recorded is not None or t.error is not None)}
    )
    paid.model = after.model or paid.model
    keep_paid(
        db,
        after,
        [
            a
            for a, b in zip(after.turns, before.turns, strict=True)
            if a is not b and a.speaker == "user" and a.text not in paid.kept and (a.recorded is not None or a.error)
        ],
        paid,
    )


def forget_paid(db: Database, conv: Conversation, paid: Paid) -> None:
    """The conversation is written: what was kept of what it paid for goes."""
    if paid.kept:
        _log.debug(
            "conversation %r of namespace %r written: what it paid for is not kept any more", conv.id, conv.namespace
        )
        ledger.forget_paid(db, conv.namespace, conv.id, sorted(paid.kept))
        paid.kept.clear()


def asked_already(conv: Conversation, paid: Paid | None) -> list[str] | None:
    """When every turn ``conv`` would send was asked in this add already (and failed), their
    errors, so that it is not paid for twice; None when some turn is new to this add."""
    if paid is None:
        return None
    waiting = [t for t in conv.turns if t.speaker == "user" and (t.recorded is None or t.error is not None)]
    if not waiting or any(t.text not in paid.turns for t in waiting):
        return None
    return [f"turn {t.text[:40]!r}: {t.error}" for t in waiting if t.error]


def load_whole(loader: Loader, conv: Conversation, extracted: int, errors: list[str], based_on: str | None) -> Added:
    out = loader.load(conv, source=f"memory:{conv.namespace}/{conv.id}", based_on=based_on)
    if out.status == "failed":
        raise AgeFactsError(f"conversation {conv.id!r} of namespace {conv.namespace!r} was not loaded: {out.reason}")
    return _added_of(conv, out, extracted, errors)


def load_correction(loader: Loader, conv: Conversation) -> Added:
    """An authored correction (:func:`agefacts.correction.correction`) loaded whole, with the
    words it was written in (its one message: what a caller shows of it)."""
    return dataclasses.replace(load_whole(loader, conv, 0, [], None), correction=conv.turns[0].text)


def _added_of(conv: Conversation, out: Outcome, extracted: int, errors: list[str]) -> Added:
    user_turns = sum(1 for t in conv.turns if t.speaker == "user")
    # The messages are kept either way; what a failed turn says is not known until the next
    # add asks again, and a caller reading "loaded" would take it as understood.
    status = "pending" if errors else out.status
    return Added(conv.namespace, conv.id, status, user_turns, extracted, len(errors), tuple(errors), out.counts)


# -- appending: an add costs what its messages cost ------------------------------------------------
_TAILS = 64
"""How many conversations a memory keeps, to append to without reading them again."""


class Tails:
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


def appendable(
    tails: Tails,
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


def appended(
    tails: Tails, loader: Loader, tail: Tail, conv: Conversation, asked: int, errors: list[str]
) -> Added | None:
    """Write what the new turns of ``conv`` add to ``tail``; None when they cannot be
    appended (the whole conversation is loaded then)."""
    n = len(tail.conv.turns)
    # A conversation the assistant opened has no model until a user turn is extracted: that
    # add loads it whole, with the model (with_paid), and the adds after it append.
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
    return _added_of(new.conv, out, asked, errors)


def conversation_ids(conversations: Iterable[str] | str | None) -> list[str] | None:
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


def kept_changing(ns: str | None, cid: str | None) -> AgeFactsError:
    return AgeFactsError(
        f"conversation {cid!r} of namespace {ns!r} kept being changed by other writers while this add was "
        f"built on it ({ADD_TRIES} times); add the messages again"
    )


_NO_MODEL = (
    "this memory has no model, so no facts were read from {n} user message(s) yet: they are kept, and ask "
    "finds them by their words; open the memory with llm=LLMClient(url, model) (agefacts mcp --llm-url URL "
    "--model NAME) and the next add extracts them, or add messages that carry their extraction ('recorded')"
)


async def extract_pending(
    llm: LLMClient | None,
    conv: Conversation,
    ontology: Ontology,
    context_turns: int,
    paid: Paid | None = None,
    keep: Callable[[int, Turn], Awaitable[None] | None] | None = None,
) -> tuple[Conversation, int, list[str]]:
    """The user turns of ``conv`` not yet recorded, asked of the model; ``keep(i, turn)`` with
    each answered, as soon as it is (:func:`keep_paid`)."""
    n = pending_turns(conv)
    if n == 0:
        return conv, 0, []
    if (again := asked_already(conv, paid)) is not None:
        return conv, 0, again
    if llm is None:
        # As with a model that is down: the messages are stored (searchable now), the user
        # turns stay unrecorded, and the add is pending until a model reads them.
        _say_no_model_once()
        return conv, 0, [_NO_MODEL.format(n=n)]
    async with llm:
        outcome = await extract_conversation(llm, conv, ontology, context_turns=context_turns, checkpoint=keep)
    return outcome.conversation, n, outcome.errors


_no_model_said = threading.Event()


def _say_no_model_once() -> None:
    """The log says once per process that facts need a model (each add's result says it too)."""
    if not _no_model_said.is_set():
        _no_model_said.set()
        _log.warning("agefacts: messages are stored without facts: no model is set (Memory(llm=LLMClient(url, model)))")
