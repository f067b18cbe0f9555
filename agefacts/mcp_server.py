"""``agefacts mcp``: the memory as a Model Context Protocol server an assistant calls directly
(stdio, the official ``mcp`` SDK, an optional extra: ``pip install 'agefacts[mcp]'``).

Tools: ``remember`` (add messages of a conversation), ``recall`` (ask a question: ranked facts
with citations and a prompt-ready block), ``facts``, ``history`` and ``forget``. Every tool is
scoped to one namespace: the one the server was started with (a call may repeat it, not name
another), or, when it was started without one, the one each call names. An error is returned
to the assistant as a tool error, in the same sentence the command line would print.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
from collections.abc import AsyncIterator, Callable
from typing import Any

from .errors import AgeFactsError, UsageError
from .extract import LLMClient
from .memory import AsyncMemory
from .ontology import Ontology

__all__ = [
    "build_server",
    "jsonable",
    "serve",
]


def jsonable(value: Any) -> Any:
    """Typed results as JSON values: dataclasses as objects, dates and datetimes as ISO text."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dt.datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def build_server(
    dsn: str | None,
    graph: str,
    *,
    namespace: str | None = None,
    ontology: Ontology | None = None,
    llm: LLMClient | None = None,
) -> Any:
    """The MCP server (an ``mcp.server.MCPServer``), opening its memory when it starts."""
    try:
        from mcp.server import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError:
        raise UsageError(
            "the MCP server needs the mcp package: pip install 'agefacts[mcp]' (or pip install 'mcp>=2')"
        ) from None

    held: dict[str, AsyncMemory] = {}

    @contextlib.asynccontextmanager
    async def lifespan(server: Any) -> AsyncIterator[None]:
        async with AsyncMemory(dsn, graph, ontology=ontology, llm=llm) as memory:
            held["memory"] = memory
            yield

    def scope(given: str | None) -> str:
        if namespace is not None:
            if given is not None and given != namespace:
                raise ToolError(f"this server keeps the memory of namespace {namespace!r} only, not {given!r}")
            return namespace
        if given is None:
            raise ToolError("name the namespace whose memory to use (this server was started without one)")
        return given

    async def run(call: Callable[[AsyncMemory], Any]) -> Any:
        try:
            return jsonable(await call(held["memory"]))
        except AgeFactsError as exc:
            raise ToolError(str(exc)) from None

    scoped = f" (namespace {namespace!r})" if namespace else " (each call names its namespace)"
    server = MCPServer(
        "agefacts",
        instructions="A temporal memory of what people said"
        + scoped
        + ": remember messages, recall facts with the words they came from.",
        lifespan=lifespan,
    )

    @server.tool()
    async def remember(
        messages: list[dict[str, Any]], conversation: str, namespace: str | None = None
    ) -> dict[str, Any]:
        """Add messages to a conversation of the memory (each {"role": "user" or "assistant",
        "content": text, "at": optional ISO-8601 time}; system and tool messages are passed
        over); facts are extracted from the user's messages and loaded, with the words they
        came from. `status` is loaded, skipped (nothing new), or pending: the messages are kept
        but the model could not read some of them yet (`errors` say why; the next remember
        asks again), so what they say is not in memory."""
        ns = scope(namespace)
        added = await run(lambda m: m.add(messages, namespace=ns, conversation=conversation))
        result: dict[str, Any] = added
        return result

    @server.tool()
    async def recall(
        question: str,
        namespace: str | None = None,
        k: int = 10,
        valid_at: str | None = None,
        known_at: str | None = None,
    ) -> dict[str, Any]:
        """Facts that answer a question about the person ("Where do I live?", "my sister"),
        ranked, each with its quote, conversation and message time, and the messages that say
        the question's topic ("what did I say about sourdough?", when keyphrases were
        extracted); `context` is them as one citable line each. Nothing is returned when the
        question names no one and nothing known."""
        ns = scope(namespace)
        answer = await run(lambda m: m.ask(question, namespace=ns, k=k, valid_at=valid_at, known_at=known_at))
        result: dict[str, Any] = answer
        return result

    @server.tool()
    async def facts(
        entity: str = "user",
        namespace: str | None = None,
        valid_at: str | None = None,
        known_at: str | None = None,
    ) -> list[dict[str, Any]]:
        """The facts about an entity (a name, a mention, a key; 'user' is the person), true at
        valid_at as known at known_at (both default to now)."""
        ns = scope(namespace)
        rows: list[dict[str, Any]] = await run(
            lambda m: m.facts(entity, namespace=ns, valid_at=valid_at, known_at=known_at)
        )
        return rows

    @server.tool()
    async def history(entity: str, predicate: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """An entity's values for one predicate (such as lives_in) over time, with when each
        was true and when it was learned."""
        ns = scope(namespace)
        rows: list[dict[str, Any]] = await run(lambda m: m.history(entity, predicate, namespace=ns))
        return rows

    @server.tool()
    async def correct(
        entity: str,
        predicate: str,
        said: str,
        by: str,
        instead: str | None = None,
        reason: str | None = None,
        namespace: str | None = None,
    ) -> dict[str, Any]:
        """Take back one fact that is wrong: entity ('user' is the person) predicate (such as
        allergic_to) said (the object's name or the value, as facts show it), corrected by
        `by` (who), with what is right `instead` if known. It is kept as a correction of its
        own (the answer names its conversation): forgetting that conversation undoes it."""
        ns = scope(namespace)
        added: dict[str, Any] = await run(
            lambda m: m.correct(entity, predicate, said, namespace=ns, by=by, instead=instead, reason=reason)
        )
        return added

    @server.tool()
    async def forget(conversations: list[str] | None = None, namespace: str | None = None) -> dict[str, Any]:
        """Remove what conversations (those named, or all of the namespace) wrote to the
        memory; the facts other conversations gave stay."""
        ns = scope(namespace)
        gone = await run(lambda m: m.forget(ns, conversations))
        return {"forgotten": gone}

    return server


def serve(
    dsn: str | None,
    graph: str,
    *,
    namespace: str | None = None,
    ontology: Ontology | None = None,
    llm: LLMClient | None = None,
) -> None:
    """Serve the memory over stdio until the client closes it."""
    build_server(dsn, graph, namespace=namespace, ontology=ontology, llm=llm).run("stdio")
