"""The extractor: a model behind any OpenAI-compatible ``/v1/chat/completions`` endpoint
proposes entities, statements and follow-ups for each user turn.

Extraction is incremental: each user turn is sent with the turns before it as context and the
entity handles already known, so the model reuses "e1" for the husband it met two turns ago.
The reply is constrained by the ontology's JSON schema (``response_format``) and still parsed
defensively: small models wrap JSON in fences or prose, and an item that is not the shape of an
entity, statement or follow-up is kept as an invalid item for the gate to report rather than
failing the turn. A reply that holds no JSON object at all is an error for that turn only.

What the model returned is recorded into the conversation (``recorded`` on each user turn, and
the model id), so a run can be replayed, loaded and graded with no network. A proposal carries
no span: grounding makes those.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import ValidationError

from .errors import EndpointDown, ExtractionError
from .model_client import LLMClient
from .models import (
    Claim,
    Conversation,
    Entity,
    Followup,
    InvalidItem,
    Proposal,
    Turn,
    check_text,
    describe,
    llm_provenance,
)
from .ontology import Ontology
from .recordings import Journal, resumed, write_recording

__all__ = [
    "ConversationOutcome",
    "DEFAULT_CONTEXT_TURNS",
    "Extractor",
    "LLMExtractor",
    "Progress",
    "build_messages",
    "extract_all",
    "extract_conversation",
    "extract_to",
    "extract_with",
    "parse_reply",
    "pending_turns",
    "unasked_turns",
]

# Earlier turns sent with each request: the recent ones, whose pronouns and "he"s the message
# may lean on; older people and things reach the model as known handles, which are always sent.
DEFAULT_CONTEXT_TURNS = 8


# -- the prompt ----------------------------------------------------------------------------------
def _describe(e: Entity) -> str:
    bits = [f"{e.handle} ({e.type})", f"mentioned as {e.mention!r}" if e.mention else ""]
    if e.name:
        bits.append(f"named {e.name!r}")
    bits += [f"{k}={v}" for k, v in sorted(e.attrs.items())]
    return "- " + ", ".join(b for b in bits if b)


def build_messages(
    ontology: Ontology,
    prior: Sequence[Turn],
    known: Sequence[Entity],
    utterance: str,
    at: str | None = None,
    context_turns: int = DEFAULT_CONTEXT_TURNS,
) -> list[dict[str, str]]:
    """The system prompt (with the vocabulary), then one user message holding the last
    ``context_turns`` prior turns, every known handle and the message to extract from."""
    parts = []
    prior = list(prior)[-context_turns:] if context_turns > 0 else []
    if prior:
        parts.append("Conversation so far:\n" + "\n".join(f"{t.speaker}: {t.text}" for t in prior))
    if known:
        parts.append("Known entities (reuse these handles):\n" + "\n".join(_describe(e) for e in known))
    if at:
        parts.append(f"Message time: {at}")
    parts.append("Message to extract from:\n" + utterance)
    parts.append("Reply with the JSON object only.")
    return [{"role": "system", "content": ontology.prompt()}, {"role": "user", "content": "\n\n".join(parts)}]


_THINKING = re.compile(r"<(think|thinking|reasoning)>.*?(?:</\1>|\Z)", re.DOTALL | re.IGNORECASE)
_THINKING_END = re.compile(r"</(?:think|thinking|reasoning)>", re.IGNORECASE)
_FIELDS = ("entities", "statements", "followups")


def _reply_object(text: str) -> dict[str, Any]:
    """The extraction in a reply: the last JSON object that has one of its fields (a reasoning
    model's thinking, prose and fences around it, and examples before it are passed over). A
    reply with no such object is an error (the turn is asked again on the next run)."""
    text = _THINKING.sub("", text)
    # Some servers strip the opening tag and leave the closing one after the thinking.
    text = _THINKING_END.split(text)[-1]
    decode = json.JSONDecoder().raw_decode
    found: list[dict[str, Any]] = []
    failure = ""
    found_obj: dict[str, Any]
    at = text.find("{")
    while at >= 0:
        try:
            obj, end = decode(text, at)
        except ValueError as exc:
            failure = failure or f"the reply's JSON does not parse ({exc}): {text[at : at + 200]!r}"
            at = text.find("{", at + 1)
            continue
        if isinstance(obj, dict):
            found.append(obj)
        at = text.find("{", end)
    for found_obj in reversed(found):
        if any(f in found_obj for f in _FIELDS):
            return found_obj
    # An object without the extraction's own fields is not "states nothing": a reply cut off
    # mid-way leaves only its inner objects whole (an entity), and recording that as an empty
    # extraction would keep the turn from ever being asked again.
    if found:
        raise ExtractionError(
            f"the reply holds no extraction (no object with {', '.join(_FIELDS)}); it may have been cut off: "
            f"{text[:200]!r}"
        )
    raise ExtractionError(failure or f"the reply holds no JSON object: {text[:200]!r}")


def parse_reply(text: str) -> Proposal:
    """The JSON object in a reply (see :func:`_reply_object`), item by item: an item that is
    not the right shape becomes an :class:`InvalidItem`, not a failure."""
    data = _reply_object(text)
    out: dict[str, list[Any]] = {"entities": [], "statements": [], "followups": [], "invalid": []}
    kinds: tuple[tuple[str, type[Entity | Claim | Followup], Literal["entity", "statement", "followup"]], ...] = (
        ("entities", Entity, "entity"),
        ("statements", Claim, "statement"),
        ("followups", Followup, "followup"),
    )
    for field, model, kind in kinds:
        items = data.get(field) or []
        if not isinstance(items, list):
            out["invalid"].append(InvalidItem(kind=kind, item=items, reason=f"'{field}' is not a list"))
            continue
        for item in items:
            try:
                check_text(item, f"a {kind} in the reply")
                out[field].append(model.model_validate(item))
            except ValidationError as exc:
                reason = describe(exc, limit=3)
            except ValueError as exc:  # text that cannot be stored
                reason = str(exc)
            else:
                continue
            try:
                check_text(item)
                json.dumps(item)
                kept = item
            except (TypeError, ValueError):
                # Kept as escaped ASCII, so the recorded file stays storable.
                kept = json.dumps(item, ensure_ascii=True, default=repr)
            out["invalid"].append(InvalidItem(kind=kind, item=kept, reason=reason))
    return Proposal(**out)


# -- running -------------------------------------------------------------------------------------
@dataclass
class Progress:
    """How far a run is: user turns sent to the model out of those to send, how many failed,
    and the rate since the start (for a terminal's progress line)."""

    total: int
    done: int = 0
    failed: int = 0
    started: float = dataclasses.field(default_factory=time.monotonic)

    @property
    def rate(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.done / elapsed if elapsed > 0 else 0.0

    def line(self) -> str:
        return f"extract: {self.done}/{self.total} turns, {self.failed} failed, {self.rate:.1f} turns/s"


def pending_turns(conv: Conversation, redo: bool = False) -> int:
    """The user turns a run sends to the model: those with no recording or with an error
    (every user turn with ``redo``)."""
    return sum(1 for t in conv.turns if t.speaker == "user" and (redo or t.recorded is None or t.error is not None))


def unasked_turns(outcomes: Sequence[ConversationOutcome]) -> int:
    """The user turns still waiting for an extraction after a run that were not asked in it
    (it stopped first): every turn a run would send, but those it asked and that failed. Not
    every turn without a fresh recording: those recorded by an earlier run wait for nothing."""
    return sum(pending_turns(oc.conversation) for oc in outcomes) - sum(oc.failed for oc in outcomes)


@dataclass
class ConversationOutcome:
    conversation: Conversation
    errors: list[str]
    kept: int = 0  # user turns whose earlier recording was kept, not asked for again
    asked: bool = True  # False: not begun, the endpoint having stopped answering
    recorded: int = 0  # user turns this run recorded
    failed: int = 0  # user turns this run tried and could not record (each keeps its error)


class Extractor(Protocol):
    """What every extractor does: add its work to a conversation's user turns, keeping what
    an earlier run recorded unless ``redo``, and say who made it (``provenance``:
    ``llm:<model id>``, ``statistical:<name>-<version>``). :func:`extract_with` runs any of them
    over many conversations, resumably, into a folder of recordings."""

    @property
    def provenance(self) -> str: ...

    def pending(self, conv: Conversation, redo: bool = False) -> int:
        """The user turns a run would work on."""
        ...

    async def conversation(
        self,
        conv: Conversation,
        *,
        redo: bool = False,
        on_turn: Callable[[bool], None] | None = None,
        checkpoint: Callable[[int, Turn], None] | None = None,
    ) -> ConversationOutcome:
        """``conv`` with this extractor's work on its turns (``on_turn(ok)`` after each turn
        worked on, ``checkpoint(i, turn)`` with each turn it recorded, as soon as it is); a
        turn that fails keeps its error and the next turns go on."""
        ...


@dataclass
class LLMExtractor:
    """The model extractor (:func:`extract_conversation`) as an :class:`Extractor`."""

    client: LLMClient
    ontology: Ontology
    context_turns: int = DEFAULT_CONTEXT_TURNS

    @property
    def provenance(self) -> str:
        return llm_provenance(self.client.model)

    def pending(self, conv: Conversation, redo: bool = False) -> int:
        return pending_turns(conv, redo)

    @property
    def stopped(self) -> str | None:
        """Why the endpoint is not being asked (see :class:`EndpointDown`), or None."""
        return self.client.down

    async def conversation(
        self,
        conv: Conversation,
        *,
        redo: bool = False,
        on_turn: Callable[[bool], None] | None = None,
        checkpoint: Callable[[int, Turn], None] | None = None,
    ) -> ConversationOutcome:
        return await extract_conversation(
            self.client,
            conv,
            self.ontology,
            redo=redo,
            context_turns=self.context_turns,
            on_turn=on_turn,
            checkpoint=checkpoint,
        )


async def extract_conversation(
    client: LLMClient,
    conv: Conversation,
    ontology: Ontology,
    *,
    redo: bool = False,
    context_turns: int = DEFAULT_CONTEXT_TURNS,
    on_turn: Callable[[bool], None] | None = None,
    checkpoint: Callable[[int, Turn], Awaitable[None] | None] | None = None,
) -> ConversationOutcome:
    """Extract the user turns of ``conv`` in order (``on_turn(ok)`` is called after each
    turn sent, ``checkpoint(i, turn)`` with each turn recorded, the model that answered as the
    turn's ``model``, and awaited when it returns an awaitable). A turn that already has a recording (and
    no error) is kept as it is and not asked for again, unless ``redo``. A turn that fails
    keeps its error in the conversation (``error``) and the next turns go on; turns that
    failed before are asked after those never asked."""
    known: dict[str, Entity] = {}
    errors: list[str] = []
    model_id = ""

    done = [0, 0]  # recorded, failed
    # Every handle the recording already holds, later turns' included: a turn asked again
    # (it failed, or the conversation grew before it) that saw only earlier turns' entities
    # could give a handle a later turn had declared to someone else, and the two merged.
    if not redo:
        for turn in conv.turns:
            if turn.speaker == "user" and turn.recorded is not None and turn.error is None:
                for ent in turn.recorded.entities:
                    known[ent.handle] = known[ent.handle].merged(ent) if ent.handle in known else ent

    turns = list(conv.turns)  # each turn as this run leaves it, in place

    async def record(i: int, turn: Turn, proposal: Proposal | None, error: str | None = None) -> None:
        if error is not None:
            errors.append(f"conversation {conv.id!r} turn {i}: {error}")
        done[error is not None] += 1
        turns[i] = turn.model_copy(update={"recorded": proposal, "error": error})
        if error is None and checkpoint is not None:
            kept = checkpoint(i, turns[i].model_copy(update={"model": model_id or None}))
            if kept is not None:
                await kept
        if on_turn is not None:
            on_turn(error is None)

    waiting = [
        i
        for i, t in enumerate(conv.turns)
        if t.speaker == "user" and (redo or t.recorded is None or t.error is not None)
    ]
    kept = sum(1 for t in conv.turns if t.speaker == "user") - len(waiting)
    # Turns never asked go first, those that failed before after them: a message that always
    # fails (three of them judge the endpoint down) never again holds back the ones behind it.
    order = waiting if redo else sorted(waiting, key=lambda i: (conv.turns[i].error is not None, i))
    for i in order:
        turn = conv.turns[i]
        if not turn.text.strip():
            await record(i, turn, Proposal())  # a blank message states nothing: not paid for
            continue
        if not turn.at:
            # What the model would read could not be kept (a statement's known time is its
            # message's time): not paid for, this run or the next.
            await record(
                i,
                turn,
                None,
                "the turn has no 'at' time, so no statement read from it could be given a known time, and it was "
                "not sent to the model; add 'at' (when it was said, ISO-8601) to the turn",
            )
            continue
        messages = build_messages(ontology, turns[:i], list(known.values()), turn.text, turn.at, context_turns)
        try:
            text, model_id = await client.complete(messages, ontology.result_schema())
            proposal = parse_reply(text)
        except EndpointDown as exc:
            # This turn failed; the rest are left as they are, for a run when it answers.
            await record(i, turn, None, str(exc))
            break
        except ExtractionError as exc:
            await record(i, turn, None, str(exc))
            continue
        proposal = _declared_here(proposal, known, turns[:i])
        for ent in proposal.entities:
            known[ent.handle] = known[ent.handle].merged(ent) if ent.handle in known else ent
        await record(i, turn, proposal)
    # The turns this run recorded are validated as turns of a conversation (a turn with
    # statements must carry its time); the others were, as read. Validating the whole
    # conversation again cost each add to a long chat time that grew with its length.
    for i in order:
        if turns[i] is not conv.turns[i]:
            Conversation.model_validate({"id": conv.id, "namespace": conv.namespace, "turns": [turns[i].model_dump()]})
    model = model_id or client.model
    if conv.model in (None, model) and not _recorded_otherwise(conv, model):
        recorded = conv.model_copy(update={"turns": turns, "model": model})
    else:
        # Turns recorded by hand or by another model are theirs: what this run recorded names
        # its model on each turn, and the conversation's model stays as it was.
        now = [i for i in order if turns[i] is not conv.turns[i] and turns[i].recorded is not None]
        for i in now:
            turns[i] = turns[i].model_copy(update={"model": model})
        recorded = conv.model_copy(update={"turns": turns})
    return ConversationOutcome(recorded, errors, kept, recorded=done[0], failed=done[1])


def _recorded_otherwise(conv: Conversation, model: str) -> bool:
    """Whether a turn of ``conv`` holds statements that ``model`` did not record (a person's,
    or another model's): the conversation's model would then claim them."""
    return any(
        t.recorded is not None and t.recorded.statements and (t.model or conv.model) != model for t in conv.turns
    )


def _declared_here(proposal: Proposal, known: dict[str, Entity], before: Sequence[Turn]) -> Proposal:
    """A turn asked again is shown every handle the recording holds, later turns' too; a
    statement of its reply that names one declared only after it declares it here as well
    (as the later turn does), so that the turn reads the same whether the turns after it are
    loaded yet or not (gated in order, it was refused as an unknown handle)."""
    declared = {e.handle for t in before if t.recorded is not None for e in t.recorded.entities}
    declared |= {e.handle for e in proposal.entities}
    named = {h for c in proposal.statements for h in (c.subject, c.object) if h is not None}
    missing = [known[h] for h in sorted(named - declared) if h in known]
    if not missing:
        return proposal
    return proposal.model_copy(update={"entities": [*proposal.entities, *missing]})


async def extract_all(
    client: LLMClient,
    conversations: Sequence[Conversation],
    ontology: Ontology,
    concurrency: int = 4,
    *,
    folder: Path | None = None,
    redo: bool = False,
    context_turns: int = DEFAULT_CONTEXT_TURNS,
    progress: Callable[[Progress], None] | None = None,
) -> list[ConversationOutcome]:
    """Many conversations at once; one conversation's failure never stops the others. At most
    ``concurrency`` conversations are open, or twice that with a client that bounds its own
    requests (``LLMClient(concurrency=...)``), so that a conversation waiting out a backoff
    leaves its place to another conversation's turn. With ``folder``, each recording is
    written there as soon as its conversation is done (:func:`write_recording`), and what an
    earlier run wrote there is resumed (:func:`resumed`). Turns recorded already are kept and
    not asked for again, unless ``redo``. ``progress`` is called after every turn sent."""
    return await extract_with(
        LLMExtractor(client, ontology, context_turns),
        conversations,
        max(1, concurrency) * (2 if client.concurrency else 1),
        folder=folder,
        redo=redo,
        progress=progress,
    )


async def extract_with(
    extractor: Extractor,
    conversations: Sequence[Conversation],
    concurrency: int = 4,
    *,
    folder: Path | None = None,
    redo: bool = False,
    progress: Callable[[Progress], None] | None = None,
) -> list[ConversationOutcome]:
    """Run ``extractor`` over many conversations, ``concurrency`` open at once; one
    conversation's failure never stops the others. With ``folder``, each recording is written
    there as soon as its conversation is done, and an earlier run's recordings are resumed."""
    sem = asyncio.Semaphore(max(1, concurrency))
    if folder is not None and not redo:
        conversations = [resumed(c, folder) for c in conversations]
    state = Progress(sum(extractor.pending(c, redo) for c in conversations))

    def turned(ok: bool) -> None:
        state.done += 1
        state.failed += 0 if ok else 1
        if progress is not None:
            progress(state)

    async def one(conv: Conversation) -> ConversationOutcome:
        async with sem:
            if getattr(extractor, "stopped", None):
                # Not asked, not written: the next run asks it.
                return ConversationOutcome(conv, [], asked=False)
            journal = Journal(folder, conv) if folder is not None else None
            try:
                outcome = await extractor.conversation(
                    conv, redo=redo, on_turn=turned, checkpoint=journal.write if journal else None
                )
            except (ExtractionError, ValidationError) as exc:
                return ConversationOutcome(conv, [f"conversation {conv.id!r}: {exc}"])
            finally:
                if journal is not None:
                    journal.close()
        if folder is not None:
            write_recording(outcome.conversation, folder)
            if journal is not None:
                journal.remove()
        return outcome

    return list(await asyncio.gather(*(one(c) for c in conversations)))


async def extract_to(
    client: LLMClient,
    conversations: Sequence[Conversation],
    ontology: Ontology,
    folder: Path,
    concurrency: int = 4,
    *,
    redo: bool = False,
    context_turns: int = DEFAULT_CONTEXT_TURNS,
    progress: Callable[[Progress], None] | None = None,
) -> list[ConversationOutcome]:
    """:func:`extract_all` into ``folder``: each recording written as soon as it is done, so
    what finished before an interruption is kept, and an earlier run's recordings resumed."""
    return await extract_all(
        client,
        conversations,
        ontology,
        concurrency,
        folder=folder,
        redo=redo,
        context_turns=context_turns,
        progress=progress,
    )
