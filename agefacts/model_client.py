"""The model client: JSON to an OpenAI-compatible ``/v1/chat/completions`` endpoint and the
reply's text back, with bounded retries and backoff, a bound on requests in flight, and the
API key kept out of every error and log line. :mod:`agefacts.extract` asks it for each user
turn."""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import functools
import json
import os
import random
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from .errors import EndpointDown, ExtractionError

__all__ = ["DEFAULT_KEY_ENV", "LLMClient", "api_key_from_env"]

DEFAULT_KEY_ENV = "AGEFACTS_LLM_API_KEY"
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


def api_key_from_env(var: str | None = None) -> str | None:
    name = var or DEFAULT_KEY_ENV
    return os.environ.get(name) or (os.environ.get("OPENAI_API_KEY") if var is None else None)
