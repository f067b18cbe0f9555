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
import contextlib
import dataclasses
import email.utils
import functools
import hashlib
import json
import os
import random
import re
import ssl
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import httpx
from pydantic import ValidationError

from .errors import AgeFactsError, EndpointDown, ExtractionError
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

__all__ = [
    "ConversationOutcome",
    "DEFAULT_CONTEXT_TURNS",
    "DEFAULT_KEY_ENV",
    "Extractor",
    "LLMClient",
    "LLMExtractor",
    "Progress",
    "api_key_from_env",
    "build_messages",
    "extract_all",
    "extract_conversation",
    "extract_to",
    "extract_with",
    "parse_reply",
    "pending_turns",
    "recording_name",
    "resumed",
    "unasked_turns",
    "write_atomically",
    "write_recording",
]

DEFAULT_KEY_ENV = "AGEFACTS_LLM_API_KEY"
# Earlier turns sent with each request: the recent ones, whose pronouns and "he"s the message
# may lean on; older people and things reach the model as known handles, which are always sent.
DEFAULT_CONTEXT_TURNS = 8
_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


@dataclass
class _Open:
    """What an LLMClient holds open in one event loop, and how many tasks there use it."""

    client: httpx.AsyncClient
    slots: asyncio.Semaphore | None
    entered: int = 0


@functools.cache
def _tls() -> ssl.SSLContext:
    """The certificates a request to an https endpoint is verified with, read once a process:
    each HTTP client read them again (26 ms, a third of a memory's add of one message)."""
    return httpx.create_ssl_context()


class LLMClient:
    """A small client for ``/v1/chat/completions``: JSON in, the reply's text and model id
    out, with bounded retries (429, 5xx, timeouts, dropped connections) and exponential
    backoff that honours ``Retry-After``. The API key is sent as a bearer token and never
    appears in an error or a log line. ``concurrency`` bounds the requests in flight at once;
    a request waiting out a backoff does not hold one of those places."""

    def __init__(
        self,
        url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 120.0,
        retries: int = 4,
        backoff: float = 1.0,
        max_backoff: float = 30.0,
        temperature: float | None = 0.0,
        max_tokens: int | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Any] = asyncio.sleep,
        concurrency: int | None = None,
        give_up_after: int = 3,
        cool_down: float = 60.0,
    ):
        self.url = _completions_url(url)
        self.model = model
        self._api_key = api_key
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._transport = transport
        self._sleep = sleep
        # One HTTP client (and one set of request slots) per event loop that has entered this
        # client: an AsyncMemory's tasks share one loop; a Memory shared by threads runs each
        # add in a loop of its own, and an HTTP client belongs to the loop it was made in.
        self._open: dict[asyncio.AbstractEventLoop, _Open] = {}
        self._opening = threading.Lock()
        self.concurrency = concurrency
        # Cleared when the server refuses a json_schema response_format (some OpenAI-compatible
        # servers do); the prompt still asks for the JSON object alone.
        self.structured = True
        # After ``give_up_after`` requests in a row failed with every attempt, the endpoint is
        # not asked for ``cool_down`` seconds (each request would wait out all its retries);
        # ``down`` says why until a request succeeds again.
        self.give_up_after = give_up_after
        self.cool_down = cool_down
        self.down: str | None = None
        self._failed_in_row = 0
        self._down_until = 0.0

    async def __aenter__(self) -> LLMClient:
        # Entered by several tasks at once (an AsyncMemory's adds), it opens one HTTP client
        # per event loop and closes it when the last of that loop's tasks leaves.
        loop = asyncio.get_running_loop()
        with self._opening:
            held = self._open.get(loop)
            if held is None:
                headers = {"Content-Type": "application/json"}
                if self._api_key:
                    headers["Authorization"] = f"Bearer {self._api_key}"
                client = httpx.AsyncClient(
                    headers=headers, timeout=self.timeout, transport=self._transport, verify=_tls()
                )
                slots = asyncio.Semaphore(self.concurrency) if self.concurrency else None
                held = self._open[loop] = _Open(client, slots)
            held.entered += 1
        return self

    async def __aexit__(self, *exc: object) -> None:
        loop = asyncio.get_running_loop()
        with self._opening:
            held = self._open[loop]
            held.entered -= 1
            if held.entered:
                return
            del self._open[loop]
        await held.client.aclose()

    def _held(self) -> _Open:
        try:
            return self._open[asyncio.get_running_loop()]
        except KeyError:
            raise RuntimeError("use LLMClient as an async context manager") from None

    async def probe(self) -> None:
        """Ask the endpoint once, before any paid request, whether it is there and takes the
        key (``GET .../models``): nothing listening, or 401/403, stops the run with a sentence,
        rather than after hours of retries. Any other answer (404 and 501 included: not every
        server lists its models) lets the run go on."""
        client = self._held().client
        models = self.url.rsplit("/chat/completions", 1)[0] + "/models"
        try:
            resp = await client.get(models, timeout=min(self.timeout, 10.0))
        except httpx.ConnectError:
            raise ExtractionError(
                f"nothing answers at {self.url} (connection refused); start the model server, or give "
                "--llm-url (or AGEFACTS_LLM_URL) the address of one"
            ) from None
        except httpx.TransportError:
            return  # slow or odd, but there: the requests themselves will retry
        if resp.status_code in (401, 403):
            raise ExtractionError(
                f"the model endpoint {self.url} refused the key (HTTP {resp.status_code}); set "
                f"{DEFAULT_KEY_ENV} (or --api-key-env) to a key it takes"
            )

    def _check_down(self) -> None:
        if self.down is not None and time.monotonic() < self._down_until:
            raise EndpointDown(self.down)

    async def complete(self, messages: list[dict[str, str]], schema: dict[str, Any] | None = None) -> tuple[str, str]:
        """The text of the first choice and the model id the server reports."""
        held = self._held()
        self._check_down()
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        last = ""
        attempt = 0
        while attempt <= self.retries:
            if schema is not None and self.structured:
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": "extraction", "schema": schema, "strict": False},
                }
            else:
                body.pop("response_format", None)
            wait = min(self.max_backoff, self.backoff * (2**attempt)) * (0.5 + random.random() / 2)
            try:
                async with held.slots or contextlib.nullcontext():
                    # Looked at again once a place is free: another request may have found
                    # the endpoint down while this one waited.
                    self._check_down()
                    resp = await held.client.post(self.url, json=body)
            except httpx.TimeoutException:
                last = f"no answer within {self.timeout:g}s"
            except httpx.TransportError as exc:
                last = f"connection failed ({type(exc).__name__})"
            else:
                failure = _error_in_200(resp) if resp.status_code == 200 else None
                if resp.status_code == 200 and failure is None:
                    self._failed_in_row, self.down = 0, None
                    return _reply_text(resp)
                last = failure or f"HTTP {resp.status_code}: {resp.text[:300]}"
                if "response_format" in body and _refuses_response_format(resp):
                    self.structured = False
                    continue  # at once, and not counted as an attempt: the server answered
                if resp.status_code not in _RETRY_STATUS and failure is None:
                    raise ExtractionError(f"the model endpoint {self.url} refused the request: {last}")
                wait = max(wait, _retry_after(resp) or 0)
            if attempt < self.retries:
                await self._sleep(min(wait, self.max_backoff))
            attempt += 1
        self._failed_in_row += 1
        if self.give_up_after and self._failed_in_row >= self.give_up_after:
            self.down = (
                f"the model endpoint {self.url} failed {self._failed_in_row} requests in a row, each after "
                f"{self.retries + 1} attempts (last: {last}); not asked again for {self.cool_down:g}s"
            )
            self._down_until = time.monotonic() + self.cool_down
            raise EndpointDown(self.down)
        raise ExtractionError(f"the model endpoint {self.url} failed after {self.retries + 1} attempts: {last}")


def _completions_url(url: str) -> str:
    u = url.rstrip("/")
    if u.endswith("/chat/completions"):
        return u
    if u.endswith("/v1"):
        return u + "/chat/completions"
    return u + "/v1/chat/completions"


def _retry_after(resp: httpx.Response) -> float | None:
    raw = resp.headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        when = email.utils.parsedate_to_datetime(raw)
        return max(0.0, when.timestamp() - time.time()) if when else None


def _error_in_200(resp: httpx.Response) -> str | None:
    """The error of a 200 answer that holds one and no choices (gateways pass upstream
    failures on so), to be retried as a 5xx is."""
    try:
        data = resp.json()
    except ValueError:
        return None
    if not isinstance(data, dict) or "choices" in data or not data.get("error"):
        return None
    err = data["error"]
    said = err.get("message") if isinstance(err, dict) else err
    return f"HTTP 200 with an error: {str(said)[:300]}"


def _refuses_response_format(resp: httpx.Response) -> bool:
    # A client error that names the option, as servers without structured output word it.
    if resp.status_code not in (400, 422, 501):
        return False
    text = resp.text.lower()
    return "response_format" in text or "json_schema" in text or "response format" in text


def _reply_text(resp: httpx.Response) -> tuple[str, str]:
    try:
        data = resp.json()
        finish = data["choices"][0].get("finish_reason")
        choice = data["choices"][0]["message"]
        content = choice.get("content")
        if content is None and isinstance(choice.get("parsed"), dict):
            content = json.dumps(choice["parsed"])
        if isinstance(content, list):  # content parts, as some servers send them
            content = "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
        if not isinstance(content, str):
            raise KeyError("content")
        model = str(data.get("model") or "")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        raise ExtractionError(
            f"the model endpoint answered with something that is not a chat completion: {resp.text[:300]!r}"
        ) from None
    if finish == "length":
        # Whatever the cut text parses to (it may open with an example extraction), it is not
        # the whole answer: recorded as stating nothing, it would lose what was said.
        raise ExtractionError(
            "the model's reply was cut off at its length limit (finish_reason 'length'): give the model a larger "
            "max_tokens (LLMClient(max_tokens=...)) or a larger context; the turn is asked again on the next run"
        )
    return content, model


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
            journal = _Journal(folder, conv) if folder is not None else None
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


def recording_name(conv: Conversation) -> str:
    """The file name of a conversation's recording: readable (its namespace and id, every
    character a file name should not hold replaced by ``_``, cut to a length every file system
    takes) and unique per (namespace, id) by construction (a hash of the two ends it), so
    ``trip/2023`` and ``trip_2023``, or one id in two namespaces, never share a file."""

    def safe(text: str, n: int) -> str:
        # At most n bytes of UTF-8: file systems limit a name's bytes (255), not its letters.
        kept = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text)
        return kept.encode("utf-8")[:n].decode("utf-8", "ignore")

    h = hashlib.sha256(f"{conv.namespace}\0{conv.id}".encode()).hexdigest()[:10]
    return f"{safe(conv.namespace, 60)}--{safe(conv.id, 100)}-{h}.json"


def write_recording(conv: Conversation, folder: Path) -> Path:
    """Write a conversation with its recordings into ``folder``, atomically (a temporary file
    renamed over the name), so an interrupted run never leaves half a file."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / recording_name(conv)
    text = json.dumps(conv.model_dump(mode="json", exclude_none=True), ensure_ascii=False, indent=2) + "\n"
    write_atomically(path, text)
    return path


def write_atomically(path: str | Path, text: str) -> None:
    """Write a file whole or not at all: a temporary file beside it, renamed over the name."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=path.suffix + ".part")
    except OSError as exc:
        raise AgeFactsError(f"cannot write {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise AgeFactsError(f"cannot write {path}: {exc.strerror}") from None
        raise


class _Journal:
    """Each turn recorded for one conversation, appended to ``<recording>.journal`` beside the
    recording as soon as it is answered, so that a run killed inside a long conversation (a
    dialogue of hundreds of turns is written whole only when it is done) loses at most the
    requests in flight. :func:`resumed` reads it; it is removed once the recording is
    written. A line cut off by the kill is passed over."""

    def __init__(self, folder: Path, conv: Conversation):
        self.path = folder / (recording_name(conv) + ".journal")
        self._file: Any = None

    def write(self, i: int, turn: Turn) -> None:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
        line = {"turn": i, **turn.model_dump(mode="json", exclude_none=True)}
        self._file.write(json.dumps(line, ensure_ascii=False) + "\n")
        self._file.flush()  # to the operating system: a killed process loses nothing written

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()

    def turns(self) -> dict[int, Turn]:
        """What the journal holds, by turn position (a later line for a turn wins)."""
        out: dict[int, Turn] = {}
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except OSError:
            return out
        for line in lines:
            try:
                data = json.loads(line)
                i = int(data.pop("turn"))
                out[i] = Turn.model_validate(data)
            except (ValueError, TypeError, KeyError, ValidationError):
                continue  # the last line of a killed run may be cut off
        return out


def resumed(conv: Conversation, folder: Path) -> Conversation:
    """``conv`` with the recordings an earlier run left in ``folder`` for its turns (its
    recording, then its journal): a turn takes an earlier recording when that recording is of
    the same turn (same position, speaker, text and time) and has no error, so an interrupted
    run, or a conversation that grew, is extended rather than paid for again; a turn whose
    earlier recording failed keeps that error until it is asked again."""
    path = folder / recording_name(conv)
    earlier: dict[int, Turn] = {}
    model = None
    try:
        whole = Conversation.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    else:
        if (whole.namespace, whole.id) == (conv.namespace, conv.id):
            earlier = dict(enumerate(whole.turns))
            model = whole.model
    earlier.update(_Journal(folder, conv).turns())
    turns = list(conv.turns)
    for i, turn in enumerate(turns):
        old = earlier.get(i)
        if old is None:
            continue
        same = (old.speaker, old.text, old.at) == (turn.speaker, turn.text, turn.at)
        if same and turn.recorded is None and old.recorded is not None and old.error is None:
            turns[i] = turns[i].model_copy(update={"recorded": old.recorded, "error": None})
        elif same and turn.recorded is None and turn.error is None and old.error is not None:
            # Its earlier failure, kept until it is asked again: a run that stops before it
            # wrote it with neither a recording nor an error, and a load counted it as nothing.
            turns[i] = turns[i].model_copy(update={"error": old.error})
        if same and turn.keyphrases is None and old.keyphrases is not None:
            turns[i] = turns[i].model_copy(update={"keyphrases": old.keyphrases})
    return conv.model_copy(update={"turns": turns, "model": conv.model or model})


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


def api_key_from_env(var: str | None = None) -> str | None:
    name = var or DEFAULT_KEY_ENV
    return os.environ.get(name) or (os.environ.get("OPENAI_API_KEY") if var is None else None)
