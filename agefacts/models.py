"""The data passed between pipeline stages, as frozen pydantic models.

The shapes follow the project's design: a conversation file holds turns, each user turn may
carry what a model proposed for it (``recorded``), and an optional ``gold`` result for grading.
A model's proposal (:class:`Claim`) has a quote but no span: only grounding creates spans, so
only a :class:`Fact` carries :class:`Evidence`.

Two kinds of checks live in two places. Whether a file is the shape agefacts reads is decided
here, and a violation is an input error for the whole conversation. Whether what a model said
is acceptable (a known predicate, a quote that is in its message, a polarity at all) is decided
by the gate, and a refusal there is a rejection with a reason, kept as ordinary data.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from .limits import MESSAGE_CHARS

__all__ = [
    "AUTHORED",
    "CHECKED",
    "Claim",
    "Conversation",
    "ConversationResult",
    "Entity",
    "Evidence",
    "Fact",
    "Followup",
    "Ident",
    "Input",
    "InvalidItem",
    "Keyphrase",
    "KeyphraseHit",
    "MatchTier",
    "Model",
    "NonEmpty",
    "Polarity",
    "Priority",
    "Proposal",
    "Rejection",
    "Resolution",
    "Scalar",
    "Tense",
    "Turn",
    "TurnResult",
    "check_text",
    "describe",
    "llm_provenance",
]

AUTHORED = "authored"
"""The provenance of what a person wrote rather than an extractor produced."""


def llm_provenance(model: str | None) -> str:
    """The ``extractor`` of what a conversation's model recorded: ``llm:<model id>``, or
    ``authored`` when no model is named (a recording a person wrote)."""
    return f"llm:{model}" if model else AUTHORED


Polarity = Literal["asserted", "negated", "hedged", "hypothetical", "reported"]
Tense = Literal["current", "past", "future"]
Resolution = Literal["resolved", "nil_placeholder"]
Priority = Literal["immediate", "banked"]
MatchTier = Literal["exact", "whitespace", "typography"]
Scalar = str | int | float | bool

NonEmpty = Annotated[str, StringConstraints(min_length=1)]
# A conversation id, a namespace, a follow-up's gap: parts of the keys of agefacts' own tables,
# whose index rows PostgreSQL limits to about 2.7 KB; 200 characters of each always fit.
Ident = Annotated[str, StringConstraints(min_length=1, max_length=200)]


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def check_text(value: Any, where: str = "text") -> Any:
    """PostgreSQL text cannot hold NUL, and UTF-8 cannot encode a lone surrogate: refuse
    both, anywhere in a JSON-like value, naming the character."""
    if isinstance(value, str):
        m = _UNSTORABLE.search(value)
        if m:
            ch = m.group()
            if ch == "\x00":
                raise ValueError(f"{where} contains a NUL character, which PostgreSQL cannot store; remove it")
            raise ValueError(
                f"{where} contains a lone surrogate (U+{ord(ch):04X}) that UTF-8 cannot encode; "
                "fix the encoding of the source"
            )
    elif isinstance(value, dict):
        for k, v in value.items():
            check_text(k, where)
            check_text(v, where)
    elif isinstance(value, (list, tuple)):
        for v in value:
            check_text(v, where)
    return value


def describe(exc: ValidationError, limit: int = 5) -> str:
    """A pydantic validation error as one line: "field.path: message; ..." (at most
    ``limit`` problems, then how many more)."""
    errors = exc.errors()
    parts = []
    for err in errors[:limit]:
        loc = ".".join(str(x) for x in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    more = len(errors) - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


CHECKED = {"agefacts.checked": True}
"""The validation context of a conversation's JSON that this process made from a conversation
it validated (a load sends it to its worker processes): its rules held when it was read, so
the checks written in Python are not made again; its types and shape still are."""


def _checked(info: ValidationInfo) -> bool:
    context = info.context
    return isinstance(context, dict) and context.get("agefacts.checked") is True


class Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Input(Model):
    """A model read from outside (a file or a model's reply): its text must be storable.
    Checked once at the top of what is read, not again in every nested model."""

    @model_validator(mode="before")
    @classmethod
    def _storable_text(cls, data: Any, info: ValidationInfo) -> Any:
        return data if _checked(info) else check_text(data)


class Entity(Model):
    """Someone or something mentioned. ``handle`` is conversation-local ("e1") and reused
    across turns; a placeholder ("my husband") is filled by a later turn naming it."""

    handle: NonEmpty
    type: NonEmpty
    mention: str = ""
    resolution: Resolution | None = None
    name: str | None = None
    attrs: dict[str, str] = Field(default_factory=dict)

    @property
    def resolved(self) -> bool:
        if self.resolution is not None:
            return self.resolution == "resolved" and bool(self.name)
        return bool(self.name)

    def merged(self, later: Entity) -> Entity:
        """This entity with a later mention of its handle: a name given later fills a
        placeholder, attributes add up, the first mention stays."""
        name = later.name or self.name
        return Entity(
            handle=self.handle,
            type=self.type,
            mention=self.mention or later.mention,
            resolution="resolved" if name else (later.resolution or self.resolution),
            name=name,
            attrs={**self.attrs, **later.attrs},
        )


class Claim(Model):
    """A statement as a model proposes it: subject, predicate and exactly one of ``object``
    (a handle) or ``value`` (a literal). ``quote`` is a search term, never evidence. An absent
    polarity or tense is not a default: the gate refuses such a claim."""

    subject: NonEmpty
    predicate: NonEmpty
    object: str | None = None
    value: Scalar | None = None
    valid_from: str | None = None
    valid_until: str | None = None
    recurrence: str | None = None
    confidence: float | None = None
    quote: str = ""
    polarity: Polarity | None = None
    tense: Tense | None = None
    correction: bool | None = None
    """Set on a negated claim that corrects what was said before ("I'm not allergic to
    peanuts, it's tree nuts"), rather than saying the fact ended ("not any more")."""

    @model_validator(mode="after")
    def _object_or_value(self, info: ValidationInfo) -> Claim:
        if not _checked(info) and (self.object is None) == (self.value is None):
            raise ValueError(
                "a statement needs exactly one of 'object' (an entity handle) or 'value' "
                f"(a literal); {self.subject!r} {self.predicate!r} has "
                + ("both" if self.object is not None else "neither")
            )
        return self


class Followup(Model):
    """A gap the model wants filled ("e1.name"): the caller's question, not a fact."""

    gap: Ident
    priority: Priority
    question: str
    reason: str | None = None

    @property
    def handle(self) -> str:
        return self.gap.split(".", 1)[0]


class InvalidItem(Model):
    """Something a model returned that is not the shape of a claim, entity or follow-up,
    kept so that the gate can report it as a rejection."""

    kind: Literal["entity", "statement", "followup"]
    # Recordings are written without nulls, so a null item (a reply's `[null]`) reads back
    # missing: missing is null.
    item: Any = None
    reason: str


class Proposal(Model):
    """What a model proposed for one user turn."""

    entities: list[Entity] = Field(default_factory=list)
    statements: list[Claim] = Field(default_factory=list)
    followups: list[Followup] = Field(default_factory=list)
    invalid: list[InvalidItem] = Field(default_factory=list)


class Keyphrase(Model):
    """A phrase a message is about ("sourdough starter"), as an extractor proposes it: the
    words (a search term, like a claim's quote: grounding finds them in the message), a score
    in [0, 1] (higher is more telling) and who proposed it (``statistical:<name>-<version>``,
    ``llm:<model id>``; absent means a person wrote it: ``authored``). Not a fact about the
    world: keyphrases live beside the ontology's facts, to find messages by topic."""

    mention: NonEmpty
    score: float = Field(ge=0.0, le=1.0)
    extractor: str | None = None


_LATER_FIELDS = ("name", "model")


class Turn(Model):
    speaker: Literal["user", "assistant"]
    name: str | None = None
    """The speaker's name, when the conversation gives one ("Caroline"): search ranks a
    named person's own turns up. Written only when given, so a conversation without names
    keeps its content hash."""
    text: str
    at: str | None = None
    recorded: Proposal | None = None
    model: str | None = None
    """The model that made ``recorded``, when a turn names its own (a message recorded
    elsewhere, added to a memory): its evidence is that model's. None: the conversation's
    ``model`` (and with none there either, what a person wrote). Written only when given."""
    error: str | None = None
    keyphrases: list[Keyphrase] | None = None
    """What a keyphrase extractor found in this message, kept apart from ``recorded`` so
    that the two extractors never mistake each other's work for their own."""

    @model_validator(mode="before")
    @classmethod
    def _chat_names(cls, data: Any) -> Any:
        # A chat API's names for the same two fields, as Memory.add takes them: a file written
        # from a chat log loads as it is.
        if isinstance(data, dict) and ("role" in data or "content" in data):
            data = dict(data)
            if "speaker" not in data and "role" in data:
                data["speaker"] = data.pop("role")
            if "text" not in data and isinstance(data.get("content"), str):
                data["text"] = data.pop("content")
        return data

    @field_validator("text")
    @classmethod
    def _not_too_long(cls, text: str, info: ValidationInfo) -> str:
        # A message of 50 MB left the embedded engine holding 1.9 GB it never gave back.
        if not _checked(info):
            MESSAGE_CHARS.check(len(text), error=ValueError)
        return text

    @model_serializer(mode="wrap")
    def _without_absent_fields(self, handler: SerializerFunctionWrapHandler) -> Any:
        # Fields added later are written only when given: a turn without them keeps the
        # content hash (and so the "loaded unchanged" of every earlier load) it had.
        out = handler(self)
        if isinstance(out, dict):
            for f in _LATER_FIELDS:
                if out.get(f, 0) is None:
                    del out[f]
        return out


class Conversation(Input):
    """One conversation file (or one line of a JSONL file)."""

    id: Ident
    namespace: Ident
    title: str | None = None
    notes: str | None = None
    model: str | None = None
    turns: list[Turn]
    gold: Proposal | None = None

    @model_validator(mode="after")
    def _times(self, info: ValidationInfo) -> Conversation:
        from .errors import TimeError
        from .temporal import normalise_instant

        if _checked(info):
            return self
        for i, turn in enumerate(self.turns):
            if turn.at is not None:
                try:
                    normalise_instant(turn.at)
                except TimeError as exc:
                    raise ValueError(f"turn {i}: 'at' {turn.at!r} {exc}") from None
            if turn.recorded and turn.recorded.statements and turn.at is None:
                raise ValueError(
                    f"turn {i} is a user turn with statements but no 'at' time; add the time the "
                    "message was sent (ISO-8601): it is when its facts became known"
                )
            if turn.recorded is not None and turn.speaker != "user":
                raise ValueError(f"turn {i}: only user turns carry 'recorded' extractions")
        return self


# -- after grounding and gating ------------------------------------------------------------------
class Evidence(Model):
    """One place a statement was read: ``text[char_start:char_end] == quote`` and the UTF-8
    bytes ``byte_start:byte_end`` of the text are the quote's bytes."""

    turn: int
    quote: str
    char_start: int
    char_end: int
    byte_start: int
    byte_end: int
    match: MatchTier
    at: str | None = None
    confidence: float | None = None


class Fact(Model):
    """An admitted statement: normalised, with the evidence it was read from."""

    subject: str
    predicate: str
    object: str | None = None
    value: Scalar | None = None
    valid_from: str | None = None
    valid_until: str | None = None
    recurrence: str | None = None
    confidence: float | None = None
    tense: Tense = "current"
    ends_validity: bool = False
    corrects: bool = False
    """A correction: it withdraws the earlier statements of its fact (it also ends none)."""
    evidence: tuple[Evidence, ...] = ()

    def content(self) -> tuple[Any, ...]:
        """What makes two statements in one conversation the same statement."""
        return (
            self.subject,
            self.predicate,
            self.object,
            None if self.value is None else (type(self.value).__name__, self.value),
            self.valid_from,
            self.valid_until,
            self.recurrence,
            self.ends_validity,
            self.corrects,
        )


class KeyphraseHit(Model):
    """A keyphrase found in its message: ``text`` is its words as they key it (one
    ``Keyphrase`` vertex per namespace and text), ``mention`` what the message says there."""

    turn: int
    text: str
    mention: str
    char_start: int
    char_end: int
    byte_start: int
    byte_end: int
    match: MatchTier
    score: float
    extractor: str


class Rejection(Model):
    """A claim, entity or follow-up that did not become data, and why. ``reason`` is a short
    code (``not_in_message``, ``unknown_predicate``...); ``detail`` says it in words."""

    turn: int
    kind: Literal["entity", "statement", "followup", "turn", "keyphrase"]
    reason: str
    detail: str
    item: Any = None


class TurnResult(Model):
    turn: int
    entities: list[Entity] = Field(default_factory=list)
    statements: list[Fact] = Field(default_factory=list)
    followups: list[Followup] = Field(default_factory=list)
    rejected: list[Rejection] = Field(default_factory=list)
    keyphrases: list[KeyphraseHit] = Field(default_factory=list)


class ConversationResult(Model):
    """Everything one conversation produced, consolidated across its turns."""

    conversation: str
    namespace: str
    entities: list[Entity] = Field(default_factory=list)
    statements: list[Fact] = Field(default_factory=list)
    followups: list[Followup] = Field(default_factory=list)
    rejected: list[Rejection] = Field(default_factory=list)
    mentions: dict[str, list[str]] = Field(default_factory=dict)
    """Every way each handle was mentioned, across turns."""
    keyphrases: list[KeyphraseHit] = Field(default_factory=list)
    claims: int = 0
    """How many claims its turns admitted: more than its statements when one was said twice."""

    @field_validator("entities")
    @classmethod
    def _unique_handles(cls, v: list[Entity]) -> list[Entity]:
        handles = [e.handle for e in v]
        if len(handles) != len(set(handles)):
            raise ValueError("entity handles must be unique in a consolidated result")
        return v
