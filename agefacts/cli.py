"""The ``agefacts`` command: parse, make one library call, print.

Exit status: 0 when everything asked for was done; 1 when some input failed (the summary says
which); 2 for usage errors.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

if TYPE_CHECKING:
    from .db import Database, Table
    from .embed import Embedder
    from .errors import InputError
    from .extract import ConversationOutcome
    from .memory import Memory
    from .model_client import LLMClient
    from .models import Conversation
    from .ontology import Ontology
    from .placement import Placement
    from .summary import Summary

from ._version import __version__
from .errors import AgeFactsError, UsageError

__all__ = [
    "build_parser",
    "main",
]

_EXIT_OK, _EXIT_FAILED, _EXIT_USAGE = 0, 1, 2
_EXIT_SOFTWARE = 70  # sysexits.h EX_SOFTWARE: an internal error


# -- shared options ---------------------------------------------------------------------------
class _Shared(NamedTuple):
    """The options several commands take, each an argparse parent."""

    db: argparse.ArgumentParser
    as_of: argparse.ArgumentParser
    ontology: argparse.ArgumentParser


_Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _db_options() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("database")
    g.add_argument(
        "--dsn",
        default=None,
        help="PostgreSQL with Apache AGE to use (default: $AGEFACTS_DSN, then the PG* "
        "variables, then the embedded engine, started if needed)",
    )
    g.add_argument(
        "--graph",
        default=os.environ.get("AGEFACTS_GRAPH", "facts"),
        help="graph name (default: $AGEFACTS_GRAPH or 'facts')",
    )
    g.add_argument(
        "--port",
        type=_port,
        default=None,
        help="port for the embedded engine when this command starts it (default: $AGEFACTS_PORT or 54329)",
    )
    g.add_argument(
        "--placement",
        default=None,
        help="a placement file (TOML) naming several servers, each namespace living on one; the command goes "
        "to its namespace's server (default: $AGEFACTS_PLACEMENT; --dsn overrides it)",
    )
    g.add_argument("--server", default=None, help="with a placement: the server a command without a namespace uses")
    return p


def _all_namespaces_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--all-namespaces",
        action="store_true",
        help="read every namespace's memory (otherwise --namespace is required, unless the entity is a key)",
    )


def _llm_options(p: argparse.ArgumentParser, url: str | None, url_help: str) -> None:
    """The model endpoint's options (extract, mcp); :func:`_llm_client` reads them."""
    p.add_argument("--llm-url", default=url, help=url_help)
    p.add_argument(
        "--model",
        default=os.environ.get("AGEFACTS_LLM_MODEL", "default"),
        help="model name to ask for (default: $AGEFACTS_LLM_MODEL)",
    )
    p.add_argument(
        "--api-key-env",
        default=None,
        help="environment variable holding the API key (default: AGEFACTS_LLM_API_KEY, then OPENAI_API_KEY)",
    )
    p.add_argument(
        "--timeout", type=_seconds, default=120.0, help="seconds to wait for one reply (default %(default)g)"
    )
    p.add_argument(
        "--retries", type=_count, default=4, help="retries after 429, 5xx and timeouts (default %(default)s)"
    )


# What a command does to the database, declared beside its arguments (``set_defaults(access=)``):
# one that only reads may be ended by restarting the embedded engine (Ctrl-C) and says when it
# waits on someone else; one that need not see its own writes may also read a server's replica.
_WRITES = "writes"
# Seconds a command waits for the embedded engine to be back when it is restarted under it.
_RESTART_WAIT = 30.0
_READS = "reads"
_READS_REPLICA = "reads, a replica too"


def _llm_client(args: argparse.Namespace, concurrency: int | None = None) -> LLMClient:
    from .model_client import LLMClient, api_key_from_env

    return LLMClient(
        args.llm_url,
        args.model,
        api_key=api_key_from_env(args.api_key_env),
        timeout=args.timeout,
        retries=args.retries,
        concurrency=concurrency,
    )


def _format_option(p: argparse.ArgumentParser, choices: Sequence[str] = ("table", "json")) -> None:
    p.add_argument("--format", choices=list(choices), default="table", help="output format")


def _placement(args: argparse.Namespace) -> Placement | None:
    """The command's placement (--placement, else $AGEFACTS_PLACEMENT), unless --dsn names one
    database."""
    from .placement import placement_from

    if args.dsn is not None:
        return None
    # Read once a command: several of its steps ask (which server, then its database).
    if not hasattr(args, "_placement_read"):
        args._placement_read = placement_from(getattr(args, "placement", None))
    placement: Placement | None = args._placement_read
    return placement


def _placed_dsn(args: argparse.Namespace, placement: Placement) -> tuple[str, str]:
    """The server of the command's namespace (following the note of a moved one), or --server:
    its name in the placement and the dsn to use."""
    from .placed import home_server

    # A command that only reads may read a server's replica: it wrote nothing it must see.
    read = _access(args) == _READS_REPLICA
    if args.server is not None:
        server = placement.server(args.server)
        return server.name, (server.replica if read else None) or server.dsn
    namespace = getattr(args, "namespace", None)
    if namespace is None:
        raise UsageError(
            f"with a placement, a command goes to its namespace's server: give --namespace, or --server NAME "
            f"({', '.join(sorted(placement.servers))})"
        )
    server = home_server(placement, args.graph, namespace)
    return server.name, (server.replica if read else None) or server.dsn


def _memory(args: argparse.Namespace, *, embedder: Embedder | None = None) -> Memory:
    """The memory a command reads or writes, so that the command does what the library does:
    on the database :func:`_open_db` names (with a placement, its namespace's server, or its
    replica for a read that may), or, with a placement and --all-namespaces (and no
    --namespace), on every server at once (:class:`agefacts.Memory` over the placement). Its
    ontology is --ontology, else the one the graph was loaded with, else the shipped one."""
    from .memory import Memory

    given = getattr(args, "ontology", None)
    options: dict[str, Any] = {
        "ontology": _ontology(args) if given else None,
        "embedder": embedder,
        "via": getattr(args, "via", "bulk"),
    }
    placement = _placement(args)
    if placement is not None and getattr(args, "all_namespaces", False) and args.namespace is None:
        # Reads only: a command reads every namespace; no graph is made to be read.
        return Memory(graph=args.graph, placement=placement, create=False, **options)
    return Memory(database=_open_db(args), **options)


def _render(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], fmt: str, table_columns: Sequence[str]) -> str:
    """Rows as a command prints them (:func:`agefacts.output.render_some`)."""
    from . import output

    return output.render_some(columns, [tuple(r[c] for c in columns) for r in rows], fmt, table_columns)


def _open_db(args: argparse.Namespace, *, create: bool = False) -> Database:
    """The database of the command's --dsn (or its namespace's server in a placement) and
    --graph. Only the commands that write make the graph when it does not exist; the others
    say that it does not."""
    from .db import Database, chooses_embedded, resolve_dsn

    placement = _placement(args)
    server, dsn = (
        _placed_dsn(args, placement) if placement is not None else (None, resolve_dsn(args.dsn, port=args.port))
    )
    # The embedded engine is restarted by another command's Ctrl-C (_embedded_interrupt): a
    # command connecting meanwhile waits for it to be back rather than failing.
    embedded = placement is None and chooses_embedded(args.dsn)
    db = Database(  # connected by `with`
        dsn, args.graph, create=create, restart_wait=_RESTART_WAIT if embedded else 0.0, server=server
    )
    if _access(args) in (_READS, _READS_REPLICA):
        # A read that waits on someone else (a lock, or the embedded engine held by another
        # client) says so, rather than hanging in silence.
        db.on_wait = lambda text: print(f"agefacts: {text}", file=sys.stderr, flush=True)
    return db


def _step(text: str) -> None:
    """A step of a long command, said on stderr as it is done."""
    print(text, file=sys.stderr, flush=True)


def _print(text: str) -> None:
    if text:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _check_text_arguments(args: argparse.Namespace) -> None:
    """An argument that is not text (bytes that are not UTF-8, which Python keeps as lone
    surrogates) is named here, before it reaches a query or a file name."""

    def bad(value: Any) -> bool:
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(value, (list, tuple)):
            return any(bad(v) for v in value)
        return False

    for name, value in vars(args).items():
        if bad(value):
            shown = value if isinstance(value, str) else next(v for v in value if bad(v))
            raise UsageError(
                f"{'--' + name.replace('_', '-') if name not in _POSITIONAL else name} "
                f"{ascii(shown)} is not UTF-8 text; give the argument as UTF-8"
            )


_POSITIONAL = {
    "entity",
    "predicate",
    "question",
    "cypher",
    "what",
    "conversation",
    "conversations",
    "paths",
    "fixtures",
}


def _parse_params(items: Sequence[str] | None) -> dict[str, Any]:
    """``NAME=VALUE`` pairs. A VALUE that reads as JSON (a number, true, a list, a quoted
    string) is taken as that and anything else as a plain string, so ``name=Tom`` and
    ``name='"42"'`` are both strings."""
    out: dict[str, Any] = {}
    for item in items or ():
        name, sep, raw = item.partition("=")
        if not sep or not name.isidentifier():
            raise UsageError(f"--param {item!r} is not NAME=VALUE (NAME a plain identifier)")
        try:
            out[name] = json.loads(raw)
        except ValueError:
            out[name] = raw
        try:
            json.dumps(out[name], ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise UsageError(
                f"--param {ascii(item)}: its value holds a lone surrogate (such as \\ud800), "
                "which is not text; give the character itself or a valid pair"
            ) from None
    return out


# -- db -----------------------------------------------------------------------------------------
def _args_db(sub: _Commands, shared: _Shared) -> None:
    """`agefacts db`'s arguments."""
    p = sub.add_parser("db", help="start, stop and inspect the embedded engine")
    dbsub = p.add_subparsers(dest="db_command", metavar="ACTION")
    s = dbsub.add_parser("start", help="start the embedded engine in the background")
    s.add_argument("--data", default=None, help="data folder, or 'memory' for a throwaway database")
    s.add_argument(
        "--port",
        type=_port,
        default=None,
        help="the port that names its socket, or with --tcp its TCP port (default $AGEFACTS_PORT or 54329)",
    )
    s.add_argument(
        "--tcp",
        action="store_true",
        help="serve on 127.0.0.1 instead of a Unix socket in a folder only you may enter "
        "(any local user can then connect, as the engine's superuser)",
    )
    dbsub.add_parser("stop", help="stop the embedded engine")
    s = dbsub.add_parser("status", help="is the embedded engine running? (exit 3 when not)")
    _format_option(s)
    dbsub.add_parser("url", help="print the embedded engine's DSN")
    p.set_defaults(func=_cmd_db)


def _cmd_db(args: argparse.Namespace) -> int:
    from .engine import Engine, socket_path

    engine = Engine()
    if args.db_command == "start":
        state, started = engine.start(data=args.data, port=args.port, tcp=args.tcp)
        word = "started" if started else "already running"
        where = f"socket {socket_path(state.host, state.port)}" if state.on_socket else f"port {state.port}"
        _print(f"embedded engine {word}: pid {state.pid}, {where}, data {state.data}")
        return _EXIT_OK
    if args.db_command == "stop":
        _print("embedded engine stopped" if engine.stop() else "embedded engine was not running")
        return _EXIT_OK
    if args.db_command == "status":
        status = engine.status()
        if args.format == "json":
            _print(json.dumps(status))
        elif status["running"]:
            _print(
                f"running: pid {status['pid']}, port {status['port']}, data {status['data']}, "
                + (
                    "accepting connections"
                    if status["answering"]
                    else "accepting connections but answering no query within 3 s (a statement that runs "
                    "long, or never ends: `agefacts db stop` then start ends it)"
                    if status["accepting"]
                    else "NOT accepting connections"
                )
                + (
                    "; started by an earlier install of agefacts (`agefacts db stop`, then any command, "
                    "runs this one's)"
                    if status.get("outdated")
                    else ""
                )
            )
        elif status.get("unconfirmed"):
            _print(f"not confirmed: {status['hint']}")
        else:
            _print("not running")
        # A script asks "can I use it?": running but not answering is not a yes.
        if not status["running"]:
            return 3
        return _EXIT_OK if status["answering"] else 4
    if args.db_command == "url":
        running = engine.state()
        if running is None and (unsure := engine.unconfirmed()) is not None:
            raise AgeFactsError(engine.unconfirmed_hint(*unsure))
        if running is None:
            raise AgeFactsError("the embedded engine is not running; start it with `agefacts db start`")
        _print(running.dsn)
        return _EXIT_OK
    raise UsageError("usage: agefacts db {start,stop,status,url}")


# -- query ----------------------------------------------------------------------------------------
def _args_query(sub: _Commands, shared: _Shared) -> None:
    """`agefacts query`'s arguments."""
    p = sub.add_parser("query", parents=[shared.db], help="run a Cypher query and print the rows")
    p.add_argument("cypher", nargs="?", help="the Cypher query")
    p.add_argument("--name", help="run a named query instead (see --list)")
    p.add_argument("--list", action="store_true", help="list the named queries and their parameters")
    p.add_argument("--param", action="append", metavar="NAME=VALUE", help="a query parameter ($NAME)")
    p.add_argument("--columns", help="comma-separated result column names (default: read from RETURN)")
    _format_option(p, ("table", "json", "jsonl", "csv"))
    p.set_defaults(func=_cmd_query, access=_READS)


def _cmd_query(args: argparse.Namespace) -> int:
    from . import named, output, query

    if args.list:
        rows = [(q.name, q.kind, q.params_doc, q.description) for q in named.named_queries().values()]
        _print(output.render(["name", "kind", "params", "description"], rows, args.format))
        return _EXIT_OK
    if bool(args.cypher) == bool(args.name):
        raise UsageError("agefacts query takes a Cypher query or --name NAME (see --list), not both")
    params = _parse_params(args.param)
    columns = [c.strip() for c in args.columns.split(",")] if args.columns else None
    with _open_db(args) as db:
        if args.name:
            table = named.run_named(db, args.name, params)
        else:
            table = query.run(db, args.cypher, params, columns)
    _print(output.render(table.columns, table.rows, args.format))
    return _EXIT_OK


# What a fact is, in the tables facts and ask print; each adds its own times and citation.
_FACT_COLUMNS = ("subject", "predicate", "value", "object", "valid_from", "valid_until")


def _args_facts(sub: _Commands, shared: _Shared) -> None:
    """`agefacts facts`'s arguments."""
    p = sub.add_parser(
        "facts", parents=[shared.db, shared.as_of], help="the facts about an entity, as of a valid and a known time"
    )
    p.add_argument("entity", help="an entity key, name or mention; 'user' is the namespace's owner")
    _all_namespaces_option(p)
    _format_option(p, ("table", "json", "jsonl", "csv"))
    p.set_defaults(func=_cmd_facts, access=_READS_REPLICA)


def _cmd_facts(args: argparse.Namespace) -> int:
    from .timeline import FACT_COLUMNS

    with _memory(args) as memory:
        facts = memory.facts(
            args.entity,
            namespace=args.namespace,
            all_namespaces=args.all_namespaces,
            valid_at=args.valid_at,
            known_at=args.known_at,
        )
    keep = ["namespace"] if args.namespace is None else []
    keep += [*_FACT_COLUMNS, "recorded_at", "superseded_at", "quote", "conversation"]
    _print(_render([f.row() for f in facts], FACT_COLUMNS, args.format, keep))
    return _EXIT_OK


def _args_history(sub: _Commands, shared: _Shared) -> None:
    """`agefacts history`'s arguments."""
    p = sub.add_parser("history", parents=[shared.db], help="an entity's values for one predicate over time")
    p.add_argument("entity", help="an entity key, name or mention; 'user' is the namespace's owner")
    p.add_argument("predicate", help="a predicate, such as lives_in")
    p.add_argument("--namespace", help="whose memory")
    p.add_argument(
        "--ontology",
        default=None,
        help="ontology file (default: the one the graph was loaded with, else the shipped one)",
    )
    _all_namespaces_option(p)
    _format_option(p, ("table", "json", "jsonl", "csv"))
    p.set_defaults(func=_cmd_history, access=_READS_REPLICA)


def _cmd_history(args: argparse.Namespace) -> int:
    from .named import named_queries

    with _memory(args) as memory:
        entries = memory.history(
            args.entity, args.predicate, namespace=args.namespace, all_namespaces=args.all_namespaces
        )
    keep = ["namespace"] if args.namespace is None else []
    keep += ["subject", "kind", "value", "object", "valid_from", "valid_until", "recorded_at", "quote"]
    columns = named_queries()["history"].columns
    _print(_render([e.row() for e in entries], columns, args.format, keep))
    return _EXIT_OK


def _args_ask(sub: _Commands, shared: _Shared) -> None:
    """`agefacts ask`'s arguments."""
    p = sub.add_parser(
        "ask", parents=[shared.db, shared.as_of], help="facts about the entities a question names, with citations"
    )
    p.add_argument("question")
    p.add_argument("-k", "--k", type=_positive_int, default=10, help="at most this many facts (default 10)")
    p.add_argument(
        "--ontology",
        default=None,
        help="ontology file that facts must fit (default: the one the graph was loaded with, else the shipped one)",
    )
    _all_namespaces_option(p)
    _format_option(p, ("table", "json", "context"))
    _embed_options(p)
    p.set_defaults(func=_cmd_ask, access=_READS_REPLICA)


def _cmd_ask(args: argparse.Namespace) -> int:
    from . import output
    from .retrieve import about

    with _memory(args, embedder=_embedder(args)) as memory:
        recall = memory.ask(
            args.question,
            namespace=args.namespace,
            all_namespaces=args.all_namespaces,
            k=args.k,
            valid_at=args.valid_at,
            known_at=args.known_at,
        )
    answer = recall.answer
    assert answer is not None  # a memory's recall keeps the answer it was made from
    if args.format == "json":
        _print(json.dumps(answer.to_json(), ensure_ascii=False, indent=2))
        return _EXIT_OK
    if args.format == "context":
        _print(answer.context())
        return _EXIT_OK
    if not answer.entities and not answer.messages:
        _print(f"Nothing found: {answer.reason}.")
        return _EXIT_OK
    ns = ["namespace"] if args.namespace is None else []
    if answer.entities:
        _print("Linked: " + answer.linked())
        if answer.as_of:
            _print(f"As of {answer.as_of}, the time the question names (--valid-at reads another).")
        cols = [*ns, *_FACT_COLUMNS, "quote", "conversation", "message"]
        _print(output.render(cols, [[f[c] for c in cols] for f in answer.facts], "table"))
        for r in answer.rejected:
            _print(f"not served: {r['subject']} {r['predicate']} {r['object'] or r['value']}: {r['reason']}")
    if answer.messages:
        _print("Messages:")
        cols = ns + ["conversation", "message", "at", "who", "matched", "text"]
        rows = [{**m, "who": m["name"] or m["speaker"], "matched": about(m)} for m in answer.messages]
        _print(output.render(cols, [[m[c] for c in cols] for m in rows], "table"))
    return _EXIT_OK


def _args_show(sub: _Commands, shared: _Shared) -> None:
    """`agefacts show`'s arguments."""
    p = sub.add_parser("show", parents=[shared.db, shared.as_of], help="draw an entity and its facts as HTML or SVG")
    p.add_argument("entity", help="an entity key, name or mention")
    p.add_argument("--out", required=True, help="FILE.html (interactive page) or FILE.svg")
    p.set_defaults(func=_cmd_show, access=_READS_REPLICA)


def _cmd_show(args: argparse.Namespace) -> int:
    from pathlib import Path

    from . import picture

    # Where the picture goes is checked before any work is done for it.
    out = Path(args.out)
    if out.is_dir():
        raise UsageError(f"--out {out} is a folder; give a file name in it, such as {out / 'picture.html'}")
    if out.suffix.lower() not in (".svg", ".html", ".htm"):
        raise UsageError(f"--out {out}: give a .html or .svg file")
    if not out.parent.is_dir():
        raise UsageError(f"--out {out}: the folder {out.parent} does not exist; create it or write elsewhere")
    with _open_db(args) as db:
        pic = picture.picture_of(
            db,
            args.entity,
            namespace=args.namespace,
            valid_at=args.valid_at,
            known_at=args.known_at,
            html_page=out.suffix.lower() != ".svg",
        )
    try:
        out.write_text(pic.text, encoding="utf-8")
    except OSError as exc:
        raise AgeFactsError(f"cannot write {out}: {exc.strerror}") from None
    _print(f"wrote {out} ({len(pic.facts)} facts about {pic.entity['name'] or pic.entity['key']})")
    return _EXIT_OK


def _args_bench(sub: _Commands, shared: _Shared) -> None:
    """`agefacts bench`'s arguments."""
    p = sub.add_parser("bench", parents=[shared.db, shared.ontology], help="time the loader against its references")
    p.add_argument("--statements", type=_positive_int, default=10_000, help="statements to generate (default 10000)")
    p.add_argument(
        "--per-conversation", type=_positive_int, default=10, help="statements per conversation (default 10)"
    )
    p.add_argument(
        "--reference-cap",
        type=_positive_int,
        default=10_000,
        help="run the slow reference path on at most this many statements (default 10000)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_cmd_bench)


def _cmd_bench(args: argparse.Namespace) -> int:
    from .bench import engine_pid_for, run_bench
    from .db import resolve_dsn

    dsn = resolve_dsn(args.dsn, port=args.port)
    result = run_bench(
        dsn,
        _ontology(args),
        statements=args.statements,
        per_conversation=args.per_conversation,
        reference_cap=args.reference_cap,
        engine_pid=engine_pid_for(args.dsn),
        log=(lambda s: print(f"bench: {s}", file=sys.stderr)) if not args.json else (lambda s: None),
    )
    _print(json.dumps(result.data, indent=2) if args.json else result.table())
    return _EXIT_OK


def _args_bench_extract(sub: _Commands, shared: _Shared) -> None:
    """`agefacts bench-extract`'s arguments."""
    p = sub.add_parser(
        "bench-extract",
        parents=[shared.ontology],
        help="time extraction against a local model endpoint, per concurrency",
    )
    p.add_argument("--conversations", type=int, default=16, help="conversations (default %(default)s)")
    p.add_argument("--turns", type=int, default=5, help="user turns per conversation (default %(default)s)")
    p.add_argument(
        "--latency", type=float, default=0.2, help="seconds the endpoint takes per reply (default %(default)g)"
    )
    p.add_argument(
        "--concurrency", type=int, action="append", default=None, help="a concurrency to try (repeat; default 1, 4, 8)"
    )
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(func=_cmd_bench_extract)


def _cmd_bench_extract(args: argparse.Namespace) -> int:
    from .bench import run_extract_bench

    for name in ("conversations", "turns"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} must be at least 1")
    if args.latency < 0 or any(n < 1 for n in args.concurrency or []):
        raise UsageError("--latency must be 0 or more and each --concurrency at least 1")
    result = run_extract_bench(
        _ontology(args),
        conversations=args.conversations,
        turns=args.turns,
        latency=args.latency,
        concurrencies=tuple(args.concurrency or (1, 4, 8)),
        log=(lambda s: print(f"bench-extract: {s}", file=sys.stderr)) if not args.json else (lambda s: None),
    )
    _print(json.dumps(result.__dict__, indent=2) if args.json else result.table())
    return _EXIT_OK


def _args_bench_add(sub: _Commands, shared: _Shared) -> None:
    """`agefacts bench-add`'s arguments."""
    p = sub.add_parser(
        "bench-add",
        parents=[shared.db, shared.ontology],
        help="time Memory.add of one message as its conversation grows",
    )
    p.add_argument(
        "--turns",
        type=int,
        action="append",
        default=None,
        help="a conversation length to try (repeat; default 10, 100, 1000)",
    )
    p.add_argument("--adds", type=int, default=30, help="single-message adds timed per length (default %(default)s)")
    p.add_argument(
        "--model",
        dest="model_path",
        action="store_true",
        help="add the person's messages without their extraction, asked of a local stand-in for a model endpoint",
    )
    p.add_argument("--opening", choices=["user", "assistant"], default="user", help="who opens each conversation")
    p.add_argument("--async", dest="use_async", action="store_true", help="through AsyncMemory")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(func=_cmd_bench_add)


def _cmd_bench_add(args: argparse.Namespace) -> int:
    from .bench import run_add_bench
    from .db import resolve_dsn

    sizes = tuple(args.turns or (10, 100, 1000))
    if args.adds < 1 or any(n < 2 for n in sizes):
        raise UsageError("--adds must be at least 1 and each --turns at least 2")
    result = run_add_bench(
        resolve_dsn(args.dsn, port=args.port),
        _ontology(args),
        sizes=sizes,
        adds=args.adds,
        log=(lambda s: print(f"bench-add: {s}", file=sys.stderr)) if not args.json else (lambda s: None),
        model=args.model_path,
        opening=args.opening,
        asynchronous=args.use_async,
    )
    _print(json.dumps(result.__dict__, indent=2) if args.json else result.table())
    return _EXIT_OK if result.digest_equal else _EXIT_FAILED


def _args_move(sub: _Commands, shared: _Shared) -> None:
    """`agefacts move`'s arguments."""
    p = sub.add_parser(
        "move",
        parents=[shared.db],
        help="move a namespace's memory to another server of a placement (safe to run again)",
    )
    p.add_argument("--namespace", required=True, help="whose memory to move")
    p.add_argument("--to", required=True, help="the server (by its name in the placement) to move it to")
    p.set_defaults(func=_cmd_move)


def _cmd_move(args: argparse.Namespace) -> int:
    from .placed import move

    placement = _placement(args)
    if placement is None:
        raise UsageError("agefacts move moves a namespace between the servers of a placement: give --placement FILE")
    move(
        placement,
        args.namespace,
        args.to,
        args.graph,
        progress=lambda step: _step(f"move: {step}"),
    )
    return _EXIT_OK


def _args_digest(sub: _Commands, shared: _Shared) -> None:
    """`agefacts digest`'s arguments."""
    p = sub.add_parser("digest", parents=[shared.db], help="print the hash of the graph's logical content")
    p.add_argument("--namespace", default=None, help="of this namespace's content only")
    p.set_defaults(func=_cmd_digest, access=_READS_REPLICA)


def _cmd_digest(args: argparse.Namespace) -> int:
    from . import reads

    with _open_db(args) as db:
        _print(reads.digest(db, args.namespace))
    return _EXIT_OK


def _ontology(args: argparse.Namespace) -> Ontology:
    from .ontology import load_ontology

    return load_ontology(getattr(args, "ontology", None))


def _read_ontology(args: argparse.Namespace, db: Database) -> Ontology:
    """For a read: the --ontology given, else the one the graph was loaded with, else the
    shipped one (a graph loaded with another ontology judged its facts by the shipped one
    unless it was given again, and served none of them)."""
    from .ledger import graph_ontology_or_shipped
    from .ontology import load_ontology

    if getattr(args, "ontology", None):
        return load_ontology(args.ontology)
    return graph_ontology_or_shipped(db)


def _one_or_more_conversations(
    paths: Sequence[str],
) -> tuple[list[tuple[str, Conversation]], list[tuple[str, InputError]]]:
    from .errors import InputError
    from .inputs import read_conversations

    good: list[tuple[str, Conversation]] = []
    bad: list[tuple[str, InputError]] = []
    for source, item in read_conversations(paths):
        if isinstance(item, InputError):
            bad.append((source, item))
        else:
            good.append((source, item))
    return good, bad


def _args_schema(sub: _Commands, shared: _Shared) -> None:
    """`agefacts schema`'s arguments."""
    p = sub.add_parser("schema", parents=[shared.ontology], help="print a JSON Schema: conversation, result, or reply")
    p.add_argument("what", choices=["conversation", "result", "reply"])
    p.set_defaults(func=_cmd_schema)


def _cmd_schema(args: argparse.Namespace) -> int:
    from .models import Conversation, ConversationResult

    if args.what == "conversation":
        schema = Conversation.model_json_schema()
    elif args.what == "result":
        schema = ConversationResult.model_json_schema()
    else:
        schema = _ontology(args).result_schema()
    _print(json.dumps(schema, indent=2, ensure_ascii=False))
    return _EXIT_OK


def _args_ontology(sub: _Commands, shared: _Shared) -> None:
    """`agefacts ontology`'s arguments."""
    p = sub.add_parser(
        "ontology",
        parents=[shared.ontology],
        help="list the entity types and predicates facts may use, and what each means",
    )
    _format_option(p, ("table", "json"))
    p.set_defaults(func=_cmd_ontology)


def _cmd_ontology(args: argparse.Namespace) -> int:
    from . import output

    onto = _ontology(args)
    rows = onto.vocabulary()
    if args.format == "json":
        _print(json.dumps({"entity_types": onto.entity_types, "predicates": rows}, indent=2, ensure_ascii=False))
        return _EXIT_OK
    _print(f"entity types: {', '.join(onto.entity_types)} (the person speaking is 'user', a {onto.user_type})")
    columns = list(rows[0]) if rows else ["predicate"]
    _print(output.render(columns, [tuple(r[c] for c in columns) for r in rows], "table"))
    return _EXIT_OK


def _args_compile(sub: _Commands, shared: _Shared) -> None:
    """`agefacts compile`'s arguments."""
    p = sub.add_parser("compile", parents=[shared.ontology], help="print the Cypher a conversation compiles to")
    p.add_argument("conversation", nargs="+", help="conversation file(s) (JSON or JSONL)")
    p.add_argument(
        "--workers",
        type=_positive_int,
        default=1,
        metavar="N",
        help="compile in N worker processes (default 1: in this one); the output is the same",
    )
    p.set_defaults(func=_cmd_compile)


def _cmd_compile(args: argparse.Namespace) -> int:
    from .compile import compile_conversation
    from .errors import InputError
    from .inputs import parse_text, read_texts

    ontology = _ontology(args)
    bad: list[tuple[str, InputError]] = []

    def compiled() -> Iterator[tuple[str, str | InputError]]:
        if args.workers > 1:
            from . import workers

            with workers.start(args.workers, ontology) as pool:
                yield from workers.ordered(
                    pool,
                    workers.compile_chunk,
                    read_texts(args.conversation),
                    ahead=2 * args.workers,
                    here=functools.partial(workers.compile_chunk, onto=ontology),
                )
        else:
            for raw in read_texts(args.conversation):
                for source, item in parse_text(raw):
                    yield source, item if isinstance(item, InputError) else compile_conversation(item, ontology)

    for source, out in compiled():
        if isinstance(out, InputError):
            bad.append((source, out))
        else:
            sys.stdout.write(out)
    for _, exc in bad:
        print(f"agefacts: error: {exc}", file=sys.stderr)
    return _EXIT_FAILED if bad else _EXIT_OK


def _args_setup(sub: _Commands, shared: _Shared) -> None:
    """`agefacts setup`'s arguments."""
    p = sub.add_parser(
        "setup",
        parents=[shared.db, shared.ontology],
        help="set a graph up as its owner, and grant roles that load or read it",
    )
    p.add_argument("--app", action="append", default=None, help="a role that loads (repeat for more)")
    p.add_argument("--reader", action="append", default=None, help="a role that only reads (repeat for more)")
    p.add_argument(
        "--tenant",
        action="append",
        default=None,
        metavar="ROLE=NAMESPACE",
        help="a role the database keeps to one namespace by row-level security: it loads and reads that "
        "namespace only (repeat for more; AGE 1.7.0 or newer)",
    )
    p.set_defaults(func=_cmd_setup)


def _cmd_setup(args: argparse.Namespace) -> int:
    from .provision import setup

    with _open_db(args, create=True) as db:
        done, refused = setup(
            db, _ontology(args), app=args.app or [], reader=args.reader or [], tenants=_tenants(args.tenant or [])
        )
    _print(f"graph {args.graph!r} is set up, with a label and key index for every type the ontology names")
    for statement in done:
        _print(f"granted: {statement}")
    if refused:
        print(
            "agefacts: this role may not grant these; a superuser can: " + "; ".join(refused),
            file=sys.stderr,
        )
        return _EXIT_FAILED
    return _EXIT_OK


def _tenants(given: Sequence[str]) -> list[tuple[str, str]]:
    out = []
    for item in given:
        role, sep, namespace = item.partition("=")
        if not sep or not role or not namespace:
            raise UsageError(f"--tenant {item!r} is not ROLE=NAMESPACE (for example --tenant ann_mcp=ann)")
        out.append((role, namespace))
    return out


def _args_migrate(sub: _Commands, shared: _Shared) -> None:
    """`agefacts migrate`'s arguments."""
    p = sub.add_parser(
        "migrate",
        parents=[shared.db],
        help="bring a graph an earlier agefacts wrote to this one's keys (its kept conversations loaded again, "
        "in one transaction)",
    )
    p.set_defaults(func=_cmd_migrate)


def _cmd_migrate(args: argparse.Namespace) -> int:
    from .migrate import migrate

    with _open_db(args) as db:
        n = migrate(db, progress=_step)
    _print(
        f"migrated {n} conversation(s) of graph {args.graph!r}" if n else f"graph {args.graph!r} needed no migration"
    )
    return _EXIT_OK


def _args_derive(sub: _Commands, shared: _Shared) -> None:
    """`agefacts derive`'s arguments."""
    p = sub.add_parser(
        "derive",
        parents=[shared.db, shared.ontology],
        help="recompute the fact versions from the statements (after compiled Cypher run by hand, or an upgrade)",
    )
    p.add_argument("--namespace", default=None, help="of this namespace only")
    p.set_defaults(func=_cmd_derive)


def _cmd_derive(args: argparse.Namespace) -> int:
    from .load import Loader

    with _open_db(args) as db:
        n = Loader(db, _ontology(args)).derive(args.namespace)
    scope = f"namespace {args.namespace!r}" if args.namespace else f"graph {args.graph!r}"
    _print(f"derived the fact versions of {n} chain(s) of {scope}")
    return _EXIT_OK


def _args_forget(sub: _Commands, shared: _Shared) -> None:
    """`agefacts forget`'s arguments."""
    p = sub.add_parser(
        "forget",
        parents=[shared.db, shared.ontology],
        help="remove what a namespace's conversations wrote, and their log rows",
    )
    p.add_argument("--namespace", required=True, help="whose memory")
    p.add_argument("--conversation", action="append", default=None, help="only this conversation id (repeat for more)")
    p.add_argument("--via", choices=["bulk", "cypher"], default="bulk", help="how to recompute what remains")
    p.set_defaults(func=_cmd_forget)


def _cmd_forget(args: argparse.Namespace) -> int:
    with _memory(args) as memory:
        gone = memory.forget(args.namespace, args.conversation)
    if not gone:
        _print(f"namespace {args.namespace!r} has no conversations in graph {args.graph!r}; nothing to forget")
        return _EXIT_OK
    _print(f"forgot {len(gone)} conversation(s) of namespace {args.namespace!r}: {', '.join(gone)}")
    return _EXIT_OK


def _args_correct(sub: _Commands, shared: _Shared) -> None:
    """`agefacts correct`'s arguments."""
    p = sub.add_parser(
        "correct",
        parents=[shared.db, shared.ontology],
        help="take one fact back (an authored correction, forgotten like a conversation)",
    )
    p.add_argument("entity", help="whose fact: a key, a name or a mention; 'user' is the namespace's owner")
    p.add_argument("predicate", help="the fact's predicate, e.g. allergic_to")
    p.add_argument("said", help="what was said that is wrong: the object's name or the value, as facts show it")
    p.add_argument("--namespace", required=True, help="whose memory")
    p.add_argument("--by", required=True, help="who corrects it (kept in the correction's text and title)")
    p.add_argument("--instead", default=None, help="what is right instead (an entity's name or a value)")
    p.add_argument("--reason", default=None, help="why, in a few words (kept with it)")
    p.add_argument("--at", default=None, help="when it was corrected (ISO-8601; default now): its known time")
    p.add_argument("--via", choices=["bulk", "cypher"], default="bulk", help="the load path")
    p.set_defaults(func=_cmd_correct)


def _cmd_correct(args: argparse.Namespace) -> int:
    with _memory(args) as memory:
        added = memory.correct(
            args.entity,
            args.predicate,
            args.said,
            namespace=args.namespace,
            by=args.by,
            instead=args.instead,
            reason=args.reason,
            at=args.at,
        )
    _print(
        f"{added.status} correction {added.conversation!r} in namespace {added.namespace!r}: {added.correction}\n"
        f"(undo it: agefacts forget --namespace {added.namespace} --conversation {added.conversation})"
    )
    return _EXIT_OK


def _args_export(sub: _Commands, shared: _Shared) -> None:
    """`agefacts export`'s arguments."""
    p = sub.add_parser(
        "export", parents=[shared.db], help="write a namespace's conversations as loaded, to load elsewhere"
    )
    p.add_argument("--namespace", required=True, help="whose memory")
    p.add_argument("--conversation", action="append", default=None, help="only this conversation id (repeat for more)")
    p.add_argument("--format", choices=["jsonl"], default="jsonl", help="one conversation per line")
    p.add_argument("--out", default=None, help="write to this file (default: standard output)")
    p.set_defaults(func=_cmd_export)


def _cmd_export(args: argparse.Namespace) -> int:
    with _memory(args) as memory:
        convs = memory.export(args.namespace, args.conversation)
    lines = "".join(c.model_dump_json(exclude_none=True) + "\n" for c in convs)
    if args.out is None:
        sys.stdout.write(lines)
        return _EXIT_OK
    from .recordings import write_atomically

    write_atomically(args.out, lines)
    print(f"wrote {len(convs)} conversation(s) of namespace {args.namespace!r} to {args.out}", file=sys.stderr)
    return _EXIT_OK


def _args_mcp(sub: _Commands, shared: _Shared) -> None:
    """`agefacts mcp`'s arguments."""
    p = sub.add_parser(
        "mcp", parents=[shared.db, shared.ontology], help="serve the memory to an assistant over MCP (stdio)"
    )
    p.add_argument(
        "--namespace", default=None, help="the one namespace this server keeps (default: each call names its own)"
    )
    _llm_options(
        p,
        os.environ.get("AGEFACTS_LLM_URL"),
        "model endpoint that `remember` extracts facts with (default: $AGEFACTS_LLM_URL; without one, "
        "remember keeps messages, which recall finds by their words, and facts wait for a model)",
    )
    _embed_options(p)
    p.add_argument(
        "--server-only",
        action="store_true",
        help="refuse the embedded engine: serve the server that --dsn, AGEFACTS_DSN or PG* names, or fail "
        "(an MCP host passes few of its user's environment variables)",
    )
    p.set_defaults(func=_cmd_mcp)


def _cmd_mcp(args: argparse.Namespace) -> int:
    from .db import chooses_embedded, resolve_dsn
    from .dberrors import describe_dsn
    from .engine import Engine
    from .mcp_server import serve

    llm = _llm_client(args) if args.llm_url else None
    placement = _placement(args)
    engine: Engine | None = None
    ours = False
    if placement is not None:
        dsn, serves = None, f"the servers of the placement ({', '.join(sorted(placement.servers))})"
    elif chooses_embedded(args.dsn):
        if args.server_only:
            # An MCP host passes a server little of its user's environment (HOME, PATH, SHELL,
            # TERM with the SDK): AGEFACTS_DSN set in a shell does not reach it.
            raise UsageError(
                "agefacts mcp --server-only: no server is named (no --dsn, AGEFACTS_DSN or PG* variable "
                "reached this process; an MCP host passes few of its user's variables): give --dsn in the "
                'server\'s "args", or AGEFACTS_DSN in its "env" block'
            )
        engine = Engine()
        ours = engine.state() is None
        dsn = resolve_dsn(args.dsn, port=args.port)
        state = engine.state()
        serves = (
            f"the embedded engine on port {state.port} (data {state.data}"
            + (", started by this server and stopped with it)" if ours else ")")
            if state is not None
            else "the embedded engine"
        )
    else:
        dsn = resolve_dsn(args.dsn, port=args.port)
        serves = describe_dsn(dsn)
    print(f"agefacts mcp: serving graph {args.graph!r} on {serves}", file=sys.stderr, flush=True)
    try:
        # stdout is the protocol's channel: nothing else may be printed there.
        serve(
            dsn,
            args.graph,
            placement=placement,
            namespace=args.namespace,
            # Without --ontology, the memory reads the graph's own.
            ontology=_ontology(args) if args.ontology else None,
            llm=llm,
            embedder=_embedder(args),
            serves=serves,
        )
    finally:
        if ours and engine is not None:
            # Started for this session only: not left running when the host closes it.
            engine.stop()
    return _EXIT_OK


@contextlib.contextmanager
def _first_interrupt_finishes_the_batch() -> Iterator[Any]:
    """While loading, a first Ctrl-C lets the batch being written finish (a second interrupts
    at once). Interrupting a statement makes the database client ask the engine to cancel it
    and wait for an answer, which the embedded engine never gives: 5 s of silence, measured."""
    import signal
    import threading

    asked = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield asked
        return

    def on_interrupt(signum: int, frame: Any) -> None:
        asked.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        print("\nagefacts: stopping after the batch being written (Ctrl-C again to stop at once)", file=sys.stderr)

    before = signal.signal(signal.SIGINT, on_interrupt)
    try:
        yield asked
    finally:
        signal.signal(signal.SIGINT, before)


def _whole(least: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            n = least - 1
        if n < least:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least {least}")
        return n

    return parse


_positive_int = _whole(1)
_count = _whole(0)


def _seconds(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        x = 0.0
    if not x > 0 or x == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return x


def _port(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (1 to 65535)")
    return n


def _args_load(sub: _Commands, shared: _Shared) -> None:
    """`agefacts load`'s arguments."""
    p = sub.add_parser("load", parents=[shared.db, shared.ontology], help="load conversations into the graph")
    p.add_argument("paths", nargs="+", help="files, folders or JSONL files")
    p.add_argument("--force", action="store_true", help="load conversations even when already loaded unchanged")
    p.add_argument(
        "--show-rejections",
        action="store_true",
        help="say each claim that did not become a fact, with its conversation, turn and why (the counts by "
        "reason are always printed; --format json carries both)",
    )
    p.add_argument(
        "--via",
        choices=["bulk", "cypher"],
        default="bulk",
        help="bulk: set-wise SQL into the label tables (default); cypher: the compiled Cypher, line by line",
    )
    p.add_argument(
        "--batch-statements",
        type=_positive_int,
        default=5000,
        metavar="N",
        help="statements written per transaction (default %(default)s, measured fastest); a conversation is "
        "never split, and an interrupted load keeps every batch it finished",
    )
    p.add_argument(
        "--workers",
        type=_positive_int,
        default=None,
        metavar="N",
        help="processes that prepare batches (ground, gate, compile) from the second batch on (default: one "
        "per core this process may use, at most 4; 1: a thread of this process); the graph is the same",
    )
    _format_option(p)
    p.set_defaults(func=_cmd_load)


def _cmd_load(args: argparse.Namespace) -> int:
    from .errors import LoadInterrupted
    from .load import load_paths, terminal_progress
    from .workers import default_workers

    if args.workers is None:
        args.workers = default_workers()

    ontology = _ontology(args)
    progress = terminal_progress() if args.format == "table" else None
    placement = _placement(args) if args.server is None else None
    try:
        with _first_interrupt_finishes_the_batch() as asked:

            def run(load: Callable[..., Summary]) -> Summary:
                return load(
                    args.paths,
                    ontology,
                    force=args.force,
                    via=args.via,
                    progress=progress,
                    stop=asked.is_set,
                    batch_statements=args.batch_statements,
                    tune_interpreter=True,  # this process only loads
                    workers=args.workers,
                )

            if placement is not None:
                from .placed import load_placed

                summary = run(functools.partial(load_placed, placement, args.graph))
            else:
                with _open_db(args, create=True) as db:
                    summary = run(functools.partial(load_paths, db))
    except LoadInterrupted as stop:
        if progress:
            sys.stderr.write("\r\033[K")
        _print(stop.summary.text())
        print(
            f"agefacts: interrupted: {stop.summary.count('loaded')} conversation(s) were loaded, each whole; "
            "run the same command again to load the rest (what was loaded is skipped)",
            file=sys.stderr,
        )
        return 130
    if progress:
        sys.stderr.write("\r\033[K")
    if args.format == "json":
        _print(json.dumps(summary.to_json(), ensure_ascii=False, indent=2))
    else:
        _print(summary.text(show_rejections=args.show_rejections))
    return _EXIT_FAILED if summary.failed else _EXIT_OK


def _args_extract(sub: _Commands, shared: _Shared) -> None:
    """`agefacts extract`'s arguments."""
    p = sub.add_parser(
        "extract",
        parents=[shared.ontology],
        help="record extractions from an OpenAI-compatible model, or keyphrases with no model (--extractor statistical)",
    )
    p.add_argument("conversations", nargs="+", help="conversation files (JSON or JSONL)")
    p.add_argument("--out", required=True, help="folder for the recorded conversations")
    p.add_argument(
        "--extractor",
        choices=["llm", "statistical"],
        default="llm",
        help="llm (default): entities, statements and follow-ups from the model endpoint; statistical: "
        "keyphrases of each user turn by YAKE, offline and deterministic (pip install 'agefacts[statistical]')",
    )
    p.add_argument("--top", type=int, default=5, help="statistical: keyphrases per message at most (default 5)")
    p.add_argument("--max-words", type=int, default=3, help="statistical: words per keyphrase at most (default 3)")
    p.add_argument("--language", default="en", help="statistical: the messages' language, for stop words (default en)")
    _llm_options(
        p,
        os.environ.get("AGEFACTS_LLM_URL", "http://127.0.0.1:8080/v1"),
        "the endpoint's base URL (default: $AGEFACTS_LLM_URL, here %(default)s)",
    )
    p.add_argument(
        "--concurrency",
        type=_positive_int,
        default=4,
        help="requests in flight at once (default 4); a backoff holds none",
    )
    p.add_argument(
        "--context-turns",
        type=_count,
        default=8,
        help="earlier turns sent with each request (default %(default)s; the known entities are always sent)",
    )
    p.add_argument(
        "--redo",
        action="store_true",
        help="ask again for turns already recorded (by default they are kept, and only turns without "
        "a recording, or with an error, are sent)",
    )
    p.set_defaults(func=_cmd_extract)


def _cmd_extract(args: argparse.Namespace) -> int:
    import asyncio
    from pathlib import Path

    from .extract import Progress, extract_to, extract_with, unasked_turns

    ontology = _ontology(args)
    statistical = None
    if args.extractor == "statistical":
        from .keyphrases import StatisticalExtractor

        if args.top < 1 or args.max_words < 1:
            raise UsageError(f"--top ({args.top}) and --max-words ({args.max_words}) must be at least 1")
        statistical = StatisticalExtractor(top=args.top, max_words=args.max_words, language=args.language)
    good, bad = _one_or_more_conversations(args.conversations)
    for _, exc in bad:
        print(f"agefacts: error: {exc}", file=sys.stderr)
    out = Path(args.out)
    client = _llm_client(args, args.concurrency)

    def show(p: Progress) -> None:
        sys.stderr.write("\r\033[K" + p.line())
        sys.stderr.flush()

    on_terminal = sys.stderr.isatty()

    async def run() -> list[ConversationOutcome]:
        if statistical is not None:  # no network: nothing to probe
            return await extract_with(
                statistical,
                [c for _, c in good],
                folder=out,
                redo=args.redo,
                progress=show if on_terminal else None,
            )
        async with client:
            await client.probe()
            return await extract_to(
                client,
                [c for _, c in good],
                ontology,
                out,
                args.concurrency,
                redo=args.redo,
                context_turns=args.context_turns,
                progress=show if on_terminal else None,
            )

    try:
        outcomes = asyncio.run(run())
    finally:
        if on_terminal:
            sys.stderr.write("\n")
    failed = bool(bad)
    for oc in outcomes:
        for err in oc.errors:
            failed = True
            print(f"agefacts: error: {err}", file=sys.stderr)
    # Counted by what each extractor did (a model's recording or keyphrases), never inferred
    # from the model's fields: the statistical extractor records keyphrases only.
    turns = sum(1 for oc in outcomes for t in oc.conversation.turns if t.speaker == "user")
    recorded = sum(oc.recorded for oc in outcomes)
    errored = sum(oc.failed for oc in outcomes)
    kept = sum(oc.kept for oc in outcomes)
    # A model's run counts what still waits for it (a turn an earlier run recorded waits for
    # nothing); the keyphrase extractor records no model's extraction, so it counts its own.
    unasked = unasked_turns(outcomes) if statistical is None else turns - recorded - errored - kept
    if statistical is None and client.down is not None:
        failed = True
        print(
            f"agefacts: error: stopped asking: {client.down}; {unasked} user turn(s) were not asked, and the same "
            f"command again asks them (what was recorded is in {out})",
            file=sys.stderr,
        )
    _print(
        f"extracted {len(outcomes)} conversation(s) into {out}: {recorded} user turn(s) "
        f"recorded, {errored} failed, {kept} kept from earlier recordings (--redo asks for them again)"
        + (f", {unasked} not asked" if unasked else "")
    )
    return _EXIT_FAILED if failed else _EXIT_OK


def _args_grade(sub: _Commands, shared: _Shared) -> None:
    """`agefacts grade`'s arguments."""
    p = sub.add_parser("grade", parents=[shared.ontology], help="compare recorded extractions with gold")
    p.add_argument("fixtures", nargs="+", help="conversation files with gold")
    _format_option(p, ("table", "json", "jsonl"))
    p.set_defaults(func=_cmd_grade)


def _cmd_grade(args: argparse.Namespace) -> int:
    from . import output
    from .grade import grade_table

    good, bad = _one_or_more_conversations(args.fixtures)
    for _, exc in bad:
        print(f"agefacts: error: {exc}", file=sys.stderr)
    columns, rows = grade_table([conv for _, conv in good], _ontology(args), flat=args.format == "table")
    _print(output.render(columns, rows, args.format))
    return _EXIT_FAILED if bad else _EXIT_OK


def _args_eval_recall(sub: _Commands, shared: _Shared) -> None:
    """`agefacts eval`'s arguments."""
    p = sub.add_parser("eval", help="measure retrieval: recall of ask beside a BM25 baseline")
    esub = p.add_subparsers(dest="what", metavar="WHAT", required=True)
    p = esub.add_parser(
        "recall",
        parents=[shared.db, shared.ontology],
        help="R@5/10/20 (as far as --k reaches, and R@k), hit@10 and MRR per category for ask and BM25 over the "
        "same messages",
        description="Ask every question of a JSON Lines file (question, namespace, evidence: "
        "[{conversation, message}], optional category) and score the messages found against "
        "its evidence, beside an in-process BM25 over the namespace's messages (docs/recall.md).",
    )
    p.add_argument("questions", help="questions file (JSON Lines)")
    p.add_argument("--k", type=int, default=20, help="messages asked for per question (default 20)")
    _format_option(p, ("table", "json", "csv"))
    _embed_options(p)
    p.set_defaults(func=_cmd_eval_recall, access=_READS)


def _cmd_eval_recall(args: argparse.Namespace) -> int:
    from pathlib import Path

    from . import output
    from .recall import evaluate, read_questions

    _need_k(args.k)
    questions = read_questions(Path(args.questions))
    with _open_db(args) as db:
        # The process serving the database, when it can be read from here: the embedded
        # engine, or a server's backend on this machine (a placement's server never the
        # embedded engine's).
        from .bench import engine_pid_for, serving_process

        engine = engine_pid_for(args.dsn) if db.server is None else None
        report = evaluate(
            db,
            questions,
            _read_ontology(args, db),
            k=args.k,
            embedder=_embedder(args),
            server=serving_process(db, engine),
        )
    if args.format == "json":
        _print(json.dumps(report.to_json(), indent=2))
        return _EXIT_OK
    columns, rows = report.rows()
    _print(output.render(columns, rows, args.format))
    if args.format == "table":
        lat = report.latency_ms
        cpu = "" if report.engine_cpu_ms is None else f"; the engine's CPU {report.engine_cpu_ms} ms per ask"
        _print(
            f"{report.questions} questions; ask's latency p50 {lat['p50']} ms, p95 {lat['p95']} ms{cpu} (k={report.k})"
        )
    return _EXIT_OK


def _embed_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--embed-url",
        default=None,
        help="an OpenAI-compatible embeddings endpoint's base URL (default: $AGEFACTS_EMBED_URL; without one, "
        "no embeddings): the messages nearest the question in meaning are fused in (docs/recall.md)",
    )
    p.add_argument(
        "--embed-model", default=None, help="the embedding model to ask for (default: $AGEFACTS_EMBED_MODEL)"
    )


def _embedder(args: argparse.Namespace) -> Any:
    from .embed import embedder_from_env

    return embedder_from_env(args.embed_url, args.embed_model)


def _need_k(k: int) -> None:
    if k < 1:
        raise UsageError(f"--k is how many messages to ask for and score, at least 1, not {k}")


def _args_demo(sub: _Commands, shared: _Shared) -> None:
    """`agefacts demo`'s arguments."""
    p = sub.add_parser(
        "demo", parents=[shared.db, shared.ontology], help="load the shipped examples and show some facts"
    )
    p.set_defaults(func=_cmd_demo)


def _cmd_demo(args: argparse.Namespace) -> int:
    from . import output

    with _open_db(args, create=True) as db:
        if db.keys_stale():
            # The demo's graph is the default one, which an earlier agefacts may have filled: a
            # first command after an upgrade should work, and migrating loses nothing.
            from .migrate import migrate

            _step(
                f"agefacts: graph {db.graph!r} was written by an earlier agefacts; migrating it first "
                "(what `agefacts migrate` does)"
            )
            migrate(db, progress=_step)
        summary, table = _demo(db, _ontology(args))
    _print(summary.text())
    _print("\nSome facts, with the words they were read from:")
    _print(output.render(table.columns, table.rows, "table"))
    return _EXIT_FAILED if summary.failed else _EXIT_OK


def _demo(db: Database, ontology: Ontology) -> tuple[Summary, Table]:
    """Load the shipped example conversations and read some current facts with their quotes
    (what ``agefacts demo`` prints)."""
    from importlib import resources

    from .db import Table
    from .load import load_paths
    from .reads import current_facts

    with resources.as_file(resources.files("agefacts.examples")) as folder:
        summary = load_paths(db, [folder], ontology)
    shown = ("namespace", "subject", "predicate", "object", "quote")
    rows = sorted(
        (
            (
                r["namespace"],
                r["subject"],
                r["predicate"],
                r["object"] if r["object"] is not None else r["value"],
                r["quote"],
            )
            for r in current_facts(db).dicts()
        ),
        key=lambda row: tuple("" if x is None else str(x) for x in row),
    )
    return summary, Table(list(shown), rows[:12])


# -- the parser -----------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agefacts",
        description="Turn conversations into a queryable, temporal knowledge graph in Apache AGE.",
    )
    parser.add_argument("--version", action="version", version=f"agefacts {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    as_of = argparse.ArgumentParser(add_help=False)
    as_of.add_argument("--namespace", help="whose memory")
    as_of.add_argument("--valid-at", help="what was true at this time (default: now)")
    as_of.add_argument("--known-at", help="as it was known at this instant (default: now)")
    ontology = argparse.ArgumentParser(add_help=False)
    ontology.add_argument("--ontology", default=None, help="ontology file (JSON; default: the shipped one)")
    shared = _Shared(_db_options(), as_of, ontology)
    # In the order `agefacts --help` lists them; each command's arguments are beside its handler.
    for command in (
        _args_db,
        _args_query,
        _args_facts,
        _args_history,
        _args_ask,
        _args_show,
        _args_bench,
        _args_bench_extract,
        _args_bench_add,
        _args_digest,
        _args_move,
        _args_ontology,
        _args_schema,
        _args_compile,
        _args_load,
        _args_setup,
        _args_derive,
        _args_migrate,
        _args_forget,
        _args_correct,
        _args_mcp,
        _args_export,
        _args_extract,
        _args_grade,
        _args_eval_recall,
        _args_demo,
    ):
        command(sub, shared)
    return parser


def _access(args: argparse.Namespace) -> str:
    """What the command does to the database, as its parser declares (``access=``)."""
    return str(getattr(args, "access", _WRITES))


@contextlib.contextmanager
def _embedded_interrupt(args: argparse.Namespace, interrupted: list[str]) -> Iterator[None]:
    """Ctrl-C during a read on the embedded engine ends the statement. The engine runs it on
    its one thread and answers no cancel request, so the database client, which asks for one
    and waits, ignored Ctrl-C until the statement ended, and every other command was refused
    meanwhile. The first Ctrl-C restarts the engine (this home's own process, on the same
    data and port); what the command read is dropped, nothing written is lost."""
    import signal
    import threading

    from .db import chooses_embedded

    placed = getattr(args, "placement", None) or os.environ.get("AGEFACTS_PLACEMENT")
    embedded = chooses_embedded(getattr(args, "dsn", None)) and not (placed and getattr(args, "dsn", None) is None)
    if (
        _access(args) not in (_READS, _READS_REPLICA)
        or not embedded
        or threading.current_thread() is not threading.main_thread()
    ):
        yield
        return

    def on_interrupt(signum: int, frame: Any) -> None:
        if interrupted:
            raise KeyboardInterrupt
        from .engine import Engine

        interrupted.append("the embedded engine cannot cancel a running statement, so it was restarted")
        print("agefacts: stopping: restarting the embedded engine to end the statement", file=sys.stderr)
        try:
            if Engine().restart_now() is None:
                interrupted[0] = "the statement runs on in the embedded engine until it ends"
                raise KeyboardInterrupt
        except AgeFactsError as exc:
            interrupted[0] = f"restarting the embedded engine failed: {exc}"
            raise KeyboardInterrupt from None
        # Not raised: the client, interrupted, would ask the new engine to cancel and wait 5 s
        # for an answer; its connection is gone with the old engine, which ends the statement.

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return _EXIT_USAGE
    interrupted: list[str] = []
    try:
        _check_text_arguments(args)
        with _embedded_interrupt(args, interrupted):
            status: int = args.func(args)
        if interrupted:
            raise KeyboardInterrupt
        return status
    except BrokenPipeError:
        # The reader stopped reading (`agefacts demo | head -3`): what it wanted was printed.
        # stdout goes to /dev/null, so the interpreter's last flush has nowhere to fail.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return _EXIT_OK
    except UsageError as exc:
        print(f"agefacts: {exc}", file=sys.stderr)
        return _EXIT_USAGE
    except AgeFactsError as exc:
        if interrupted:  # the connection went with the engine's restart
            print(f"agefacts: interrupted; {interrupted[0]}", file=sys.stderr)
            return 130
        print(f"agefacts: error: {exc}", file=sys.stderr)
        return _EXIT_FAILED
    except KeyboardInterrupt:
        print("agefacts: interrupted" + (f"; {interrupted[0]}" if interrupted else ""), file=sys.stderr)
        return 130
    except Exception as exc:
        # A failure no check foresaw is a bug: one line a user can report, and the traceback
        # for whoever sets AGEFACTS_TRACEBACK=1.
        if os.environ.get("AGEFACTS_TRACEBACK") == "1":
            raise
        print(
            f"agefacts: internal error: {type(exc).__name__}: {exc} (a bug in agefacts; run again with "
            "AGEFACTS_TRACEBACK=1 to see where, and report it with the command that caused it)",
            file=sys.stderr,
        )
        return _EXIT_SOFTWARE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
