"""What a memory's reads and adds return: typed results (``datetime`` and ``date`` values, not
text), each made from the rows of one named query or from an answer of
:mod:`agefacts.retrieve`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .retrieve import Answer, Linked, withdrawal
from .temporal import instant_text, to_python
from .timeline import FACT_COLUMNS

__all__ = ["Added", "Citation", "HistoryEntry", "Known", "MemoryFact", "Recall", "Remembered", "TopicMessage"]


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
    subject_type: str | None = None
    """The subject's entity type (its label: ``User``, ``Person``, ``Place`` ...)."""
    object_type: str | None = None
    """The object's entity type, for a fact with an object."""

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
            subject_type=r["subject_type"],
            object_type=r["object_type"],
        )

    def row(self) -> dict[str, Any]:
        """The fact as the read gave it and ``agefacts facts`` prints it: the columns of
        :data:`~agefacts.timeline.FACT_COLUMNS` in order, its times as stored (text, at the
        precision stated). ``MemoryFact.from_row(f.row()) == f``."""
        c = self.citation
        row = {
            "subject": self.subject,
            "predicate": self.predicate,
            "value": self.value,
            "object": self.object,
            "valid_from": self.valid_from_text,
            "valid_until": self.valid_until_text,
            "recorded_at": instant_text(self.recorded_at),
            "superseded_at": instant_text(self.superseded_at),
            "recurrence": self.recurrence,
            "quote": c.quote,
            "conversation": c.conversation,
            "message": c.message,
            "char_start": c.char_start,
            "char_end": c.char_end,
            "evidence": self.evidence,
            "namespace": self.namespace,
            "statement": self.statement,
            "subject_type": self.subject_type,
            "subject_key": self.subject_key,
            "object_type": self.object_type,
            "object_key": self.object_key,
            "quoted_at": instant_text(c.at),
        }
        assert tuple(row) == FACT_COLUMNS
        return row


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
    namespace: str = ""
    """Whose memory said it (a history of every namespace has several)."""
    valid_from_text: str | None = None
    """``valid_from`` as stored, at the precision stated ("2024-06")."""
    valid_until_text: str | None = None

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
            namespace=r["namespace"],
            valid_from_text=r["valid_from"],
            valid_until_text=r["valid_until"],
        )

    def row(self) -> dict[str, Any]:
        """The statement as the ``history`` query gave it and ``agefacts history`` prints it,
        its times as stored. ``HistoryEntry.from_row(e.row()) == e``."""
        return {
            "subject": self.subject,
            "predicate": self.predicate,
            "value": self.value,
            "object": self.object,
            "kind": self.kind,
            "valid_from": self.valid_from_text,
            "valid_until": self.valid_until_text,
            "recorded_at": instant_text(self.recorded_at),
            "quote": self.quote,
            "conversation": self.conversation,
            "statement": self.statement,
            "namespace": self.namespace,
        }


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
    answer: Answer | None = field(default=None, repr=False, compare=False)
    """The answer these were made from, its facts and messages as rows (what ``agefacts ask
    --format json`` prints: ``answer.to_json()``); not part of the recall's value."""

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
            a,
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

    @classmethod
    def listed(cls, rows: list[dict[str, Any]]) -> list[Known]:
        """The entities of ``entities_of``'s rows, the owner first, then by name."""
        out = [cls(r["name"] or r["role"] or r["key"], r["type"], tuple(r["mentions"] or ()), r["key"]) for r in rows]
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
    correction: str | None = None
    """For :meth:`Memory.correct`: the correction's words, as its one message keeps them."""


def _instant(text: str | None) -> dt.datetime | None:
    value = to_python(text)
    assert value is None or isinstance(value, dt.datetime), text
    return value
