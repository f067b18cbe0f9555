"""``agefacts mcp``: the memory as a Model Context Protocol server an assistant calls directly
(stdio, the official ``mcp`` SDK, an optional extra: ``pip install 'agefacts[mcp]'``).

Tools: ``remember`` (add messages of a conversation), ``recall`` (ask a question: ranked facts
with citations and a prompt-ready block), ``facts``, ``history``, ``correct`` (take one fact
back) and ``forget`` (named conversations, or everything only when asked for). Every parameter
is described to the model. Every tool is scoped to one namespace: the one the server was started
with (its tools then have no namespace parameter), or, when it was started without one, the one
each call names. An error is returned
to the assistant as a tool error, in the same sentence the command line would print.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import inspect
import typing
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Annotated, Any

from pydantic import Field, ValidationError

from .embed import Embedder
from .errors import AgeFactsError, NotFound, UsageError
from .memory import AsyncMemory
from .model_client import LLMClient
from .ontology import Ontology
from .placement import Placement

__all__ = [
    "arguments_refused",
    "build_server",
    "compact_fact",
    "compact_recall",
    "jsonable",
    "serve",
]


# What each tool parameter is, told to the model calling it (the SDK puts the description in
# the tool's input schema).
_Namespace = Annotated[
    str | None,
    Field(description="whose memory this is (one namespace per person); required unless the server keeps one"),
]
_Entity = Annotated[
    str, Field(description="who or what: a name ('Tom'), a mention ('my sister'), an entity key; 'user' is the person")
]
_Predicate = Annotated[str, Field(description="the relation, as the facts name it: lives_in, works_at, likes, ...")]
_ValidAt = Annotated[
    str | None,
    Field(description="the time the facts must be true at, ISO-8601 (2024-06, 2024-06-01 or a datetime); default now"),
]
_KnownAt = Annotated[
    str | None,
    Field(description="read the memory as it was known at this instant, ISO-8601 (2024-06-01T09:00:00Z); default now"),
]
_Question = Annotated[str, Field(description="the question, in the person's words ('Where do I live?')")]
_HowMany = Annotated[int, Field(description="how many facts at most (at least 1)", ge=1)]
_ConversationId = Annotated[
    str, Field(description="the conversation these messages belong to: any id, kept per namespace")
]
_Messages = Annotated[
    list[dict[str, Any]],
    Field(
        description='the new messages, each {"role": "user" or "assistant", "content": text, "at": optional '
        "ISO-8601 time}; system and tool messages are passed over"
    ),
]
_Said = Annotated[
    str, Field(description="what was said that is wrong: the object's name or the value, as facts shows it")
]
_By = Annotated[
    str, Field(description="who makes the correction (kept with it), e.g. 'assistant' or the person's name")
]
_Instead = Annotated[str | None, Field(description="what is right instead, if known: an entity's name or a value")]
_Reason = Annotated[str | None, Field(description="why, in a few words (kept with it)")]
_Conversations = Annotated[
    list[str] | None, Field(description="the ids of the conversations to forget (remember's `conversation`)")
]
_Everything = Annotated[
    bool, Field(description="true to forget every conversation of the namespace; nothing less does")
]


def jsonable(value: Any) -> Any:
    """Typed results as JSON values: dataclasses as objects (less the fields kept out of
    their repr, such as a recall's answer as read), dates and datetimes as ISO text."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value) if f.repr}
    if isinstance(value, dt.datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def arguments_refused(tool: str, exc: ValidationError) -> str:
    """One sentence for arguments a tool's schema refuses: each argument, what it should be,
    and what it was."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "the arguments"
        said = str(err["msg"])
        said = said[len("Input ") :] if said.startswith("Input ") else said[:1].lower() + said[1:]
        got = repr(err.get("input"))
        parts.append(f"{where} {said}" + ("" if err["type"] == "missing" else f", not {got[:60]}"))
    return f"{tool}: " + "; ".join(parts) + " (the tool's schema says what each argument takes)"


def compact_fact(f: Mapping[str, Any]) -> dict[str, Any]:
    """One fact as a model reads it: what it says, when it was true and learned, and the words
    it came from (no keys, offsets or empty fields)."""
    cite = f["citation"]
    fact = {k: f[k] for k in ("subject", "predicate") if f.get(k) is not None}
    fact |= {"object": f["object"]} if f.get("object") is not None else {"value": f.get("value")}
    fact |= {k: f[k] for k in ("valid_from", "valid_until", "recorded_at", "recurrence") if f.get(k) is not None}
    fact |= {"quote": cite["quote"], "conversation": cite["conversation"], "message": cite["message"]}
    fact |= {"said_at": cite["at"]}
    return fact


def compact_recall(answer: Mapping[str, Any]) -> dict[str, Any]:
    """What ``recall`` answers a model: the prompt-ready ``context``, and each fact and
    message with what a model reads (no keys, offsets or internal scores), ``reason`` when
    nothing was found. The whole :class:`~agefacts.results.Recall` was about six times its
    context's size."""
    facts = [compact_fact(f) for f in answer["facts"]]
    # A fact's own message is cited by the fact already (as in the context).
    cited = {(f["conversation"], f["message"]) for f in facts}
    messages = [
        {
            "conversation": m["conversation"],
            "message": m["message"],
            "who": m.get("name") or m["speaker"],
            "at": m["at"],
            "text": m["text"],
        }
        # What of it was taken back since: a model must not read it as still so.
        | ({"withdrawn": list(m["withdrawn"])} if m.get("withdrawn") else {})
        for m in answer["messages"]
        if (m["conversation"], m["message"]) not in cited
    ]
    out: dict[str, Any] = {"context": answer["context"], "facts": facts, "messages": messages}
    if answer.get("corrections"):
        out = {"corrections": list(answer["corrections"]), **out}
    if answer.get("reason"):
        out["reason"] = answer["reason"]
    return out


def build_server(
    dsn: str | None,
    graph: str,
    *,
    namespace: str | None = None,
    ontology: Ontology | None = None,
    llm: LLMClient | None = None,
    embedder: Embedder | None = None,
    placement: Placement | None = None,
    serves: str | None = None,
) -> Any:
    """The MCP server (an ``mcp.server.MCPServer``), opening its memory when it starts (on the
    servers of ``placement``, when given, each call on its namespace's). ``serves`` says
    where that memory is, in its instructions and its ``status`` tool: an MCP host starts a
    server with almost none of its user's environment, and a memory that is not the one meant
    must be seen to be so."""
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
        async with AsyncMemory(
            dsn, graph, ontology=ontology, llm=llm, embedder=embedder, placement=placement
        ) as memory:
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
        except NotFound as exc:
            # A model cannot type a command: the tool that does the same is named instead.
            raise ToolError(f"{exc.bare} (the entities tool lists them)" if exc.listing else str(exc)) from None
        except AgeFactsError as exc:
            raise ToolError(str(exc)) from None

    scoped = f" (namespace {namespace!r})" if namespace else " (each call names its namespace)"

    class Server(MCPServer):
        async def call_tool(self, name: str, arguments: dict[str, Any], *rest: Any, **kw: Any) -> Any:
            try:
                return await super().call_tool(name, arguments, *rest, **kw)
            except ToolError as exc:
                # Arguments the schema refuses came back as pydantic's multi-line report, and
                # our own sentences behind "Error executing tool NAME:".
                if isinstance(exc.__cause__, ValidationError):
                    raise ToolError(arguments_refused(name, exc.__cause__)) from None
                prefix = f"Error executing tool {name}: "
                text = str(exc)
                if text.startswith(prefix):
                    raise ToolError(f"{name}: {text[len(prefix) :]}") from None
                raise

    where = serves or "the database named by its settings"
    server = Server(
        "agefacts",
        instructions="A temporal memory of what people said"
        + scoped
        + f": remember messages, recall facts with the words they came from. It keeps graph {graph!r} on {where}.",
        lifespan=lifespan,
    )

    def tool(fn: Callable[..., Any]) -> None:
        """Register a tool; on a server kept to one namespace, without its ``namespace``
        parameter (a model shown one would think it may name another)."""
        # The SDK builds each tool's argument model from its annotations, which this module's
        # `from __future__ import annotations` leaves as text it cannot resolve: resolved here.
        fn.__annotations__ = typing.get_type_hints(fn, include_extras=True)
        if namespace is None:
            server.tool()(fn)
            return
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        async def scoped(**kw: Any) -> Any:
            return await fn(**kw, namespace=None)

        scoped.__signature__ = sig.replace(  # type: ignore[attr-defined]
            parameters=[p for p in sig.parameters.values() if p.name != "namespace"]
        )
        scoped.__annotations__ = {k: v for k, v in fn.__annotations__.items() if k != "namespace"}
        server.tool(name=fn.__name__)(scoped)

    async def remember(
        messages: _Messages, conversation: _ConversationId, namespace: _Namespace = None
    ) -> dict[str, Any]:
        """Add messages to a conversation of the memory; facts are extracted from the user's
        messages and loaded, with the words they came from. `status` is loaded, skipped
        (nothing new), or pending: the messages are kept but the model could not read some of
        them yet (`errors` say why; the next remember asks again), so what they say is not in
        memory."""
        ns = scope(namespace)
        added = await run(lambda m: m.add(messages, namespace=ns, conversation=conversation))
        result: dict[str, Any] = added
        return result

    async def recall(
        question: _Question,
        namespace: _Namespace = None,
        k: _HowMany = 10,
        valid_at: _ValidAt = None,
        known_at: _KnownAt = None,
    ) -> dict[str, Any]:
        """Facts that answer a question about the person ("Where do I live?", "my sister"),
        ranked, each with its quote, conversation and message time, and the messages that
        answer it best ("what did I say about the flood?"); `context` is them as one citable
        line each, ready for a prompt. Nothing is returned when no message says a word of the
        question and it names no one known; `reason` then says so."""
        ns = scope(namespace)
        answer = await run(lambda m: m.ask(question, namespace=ns, k=k, valid_at=valid_at, known_at=known_at))
        return compact_recall(answer)

    async def facts(
        entity: _Entity = "user",
        namespace: _Namespace = None,
        valid_at: _ValidAt = None,
        known_at: _KnownAt = None,
    ) -> list[dict[str, Any]]:
        """What is remembered about someone or something: the facts about an entity true at
        valid_at as known at known_at (both default to now), each with the words it came from."""
        ns = scope(namespace)
        rows: list[dict[str, Any]] = await run(
            lambda m: m.facts(entity, namespace=ns, valid_at=valid_at, known_at=known_at)
        )
        # What a model reads, as recall gives it (keys, offsets and empty fields cost a model's
        # context and say nothing to it: 3.3 KB for five facts).
        return [compact_fact(f) for f in rows]

    async def history(entity: _Entity, predicate: _Predicate, namespace: _Namespace = None) -> list[dict[str, Any]]:
        """Every statement of an entity's values for one predicate (such as lives_in), as said:
        the times each gave itself and when it was learned, ended and corrected ones included
        (what held when is what facts gives)."""
        ns = scope(namespace)
        rows: list[dict[str, Any]] = await run(lambda m: m.history(entity, predicate, namespace=ns))
        return rows

    async def correct(
        entity: _Entity,
        predicate: _Predicate,
        said: _Said,
        by: _By,
        instead: _Instead = None,
        reason: _Reason = None,
        namespace: _Namespace = None,
    ) -> dict[str, Any]:
        """Take back one fact that is wrong (what facts shows), with what is right instead if
        known. It is kept as a correction of its own (the answer names its conversation):
        forgetting that conversation undoes it."""
        ns = scope(namespace)
        added: dict[str, Any] = await run(
            lambda m: m.correct(entity, predicate, said, namespace=ns, by=by, instead=instead, reason=reason)
        )
        return added

    async def forget(
        conversations: _Conversations = None, everything: _Everything = False, namespace: _Namespace = None
    ) -> dict[str, Any]:
        """Remove what the named conversations wrote to the memory (the facts other
        conversations gave stay); the whole namespace's memory only with everything=true."""
        ns = scope(namespace)
        if conversations is None and not everything:
            raise ToolError(
                "name the conversations to forget (conversations), or set everything=true to forget "
                "everything this memory holds"
            )
        gone = await run(lambda m: m.forget(ns, conversations))
        return {"forgotten": gone}

    async def conversations(namespace: _Namespace = None) -> list[dict[str, Any]]:
        """The conversations this memory holds: each one's id (what forget takes), when it
        was remembered, and how many statements it gave."""
        ns = scope(namespace)
        rows: list[dict[str, Any]] = await run(lambda m: m.conversations(ns))
        return rows

    async def entities(namespace: _Namespace = None) -> list[dict[str, Any]]:
        """Who and what this memory knows: each one's name ('user' is the person), type and
        the words they were mentioned by; facts says what is known about one."""
        ns = scope(namespace)
        rows: list[dict[str, Any]] = await run(lambda m: m.entities(ns))
        return rows

    async def vocabulary() -> dict[str, Any]:
        """The entity types and predicates the memory's facts use, and what each means: the
        words facts, history and correct take."""
        memory = held["memory"]
        return {"entity_types": memory.ontology.entity_types, "predicates": memory.ontology.vocabulary()}

    async def status() -> dict[str, Any]:
        """Which memory this server keeps: the database, the graph and the namespace (when
        it keeps one), to check that it is the one meant."""
        return {"database": where, "graph": graph, "namespace": namespace}

    for fn in (remember, recall, facts, history, correct, forget, conversations, entities):
        tool(fn)
    server.tool(name="status")(status)
    server.tool(name="ontology")(vocabulary)
    return server


def serve(
    dsn: str | None,
    graph: str,
    *,
    namespace: str | None = None,
    ontology: Ontology | None = None,
    llm: LLMClient | None = None,
    embedder: Embedder | None = None,
    placement: Placement | None = None,
    serves: str | None = None,
) -> None:
    """Serve the memory over stdio until the client closes it."""
    build_server(
        dsn,
        graph,
        namespace=namespace,
        ontology=ontology,
        llm=llm,
        embedder=embedder,
        placement=placement,
        serves=serves,
    ).run("stdio")
