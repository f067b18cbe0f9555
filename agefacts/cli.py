"""The ``agefacts`` command: parse, make one library call, print.

Exit status: 0 when everything asked for was done; 1 when some input failed (the summary says
which); 2 for usage errors.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from . import __version__
from .errors import AgeFactsError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class UsageError(AgeFactsError):
    pass


# -- shared options ---------------------------------------------------------------------------
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
    return p


def _format_option(p: argparse.ArgumentParser, choices: Sequence[str] = ("table", "json")) -> None:
    p.add_argument("--format", choices=list(choices), default="table", help="output format")


def _open_db(args: argparse.Namespace):
    from .db import Database, resolve_dsn

    return Database(resolve_dsn(args.dsn), args.graph).connect()


def _print(text: str) -> None:
    if text:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


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
    return out


# -- db -----------------------------------------------------------------------------------------
def cmd_db(args: argparse.Namespace) -> int:
    from .engine import Engine

    engine = Engine()
    if args.db_command == "start":
        state, started = engine.start(data=args.data, port=args.port)
        word = "started" if started else "already running"
        _print(f"embedded engine {word}: pid {state.pid}, port {state.port}, data {state.data}")
        return EXIT_OK
    if args.db_command == "stop":
        _print("embedded engine stopped" if engine.stop() else "embedded engine was not running")
        return EXIT_OK
    if args.db_command == "status":
        status = engine.status()
        if args.format == "json":
            _print(json.dumps(status))
        elif status["running"]:
            _print(
                f"running: pid {status['pid']}, port {status['port']}, data {status['data']}, "
                f"{'accepting connections' if status['accepting'] else 'NOT accepting connections'}"
            )
        else:
            _print("not running")
        return EXIT_OK if status["running"] else 3
    if args.db_command == "url":
        state = engine.state()
        if state is None:
            raise AgeFactsError("the embedded engine is not running; start it with `agefacts db start`")
        _print(state.dsn)
        return EXIT_OK
    raise UsageError("usage: agefacts db {start,stop,status,url}")


# -- query ----------------------------------------------------------------------------------------
def cmd_query(args: argparse.Namespace) -> int:
    from . import output, query

    if not args.cypher:
        raise UsageError("agefacts query needs a Cypher query")
    params = _parse_params(args.param)
    columns = [c.strip() for c in args.columns.split(",")] if args.columns else None
    with _open_db(args) as db:
        table = query.run(db, args.cypher, params, columns)
    _print(output.render(table.columns, table.rows, args.format))
    return EXIT_OK


def cmd_digest(args: argparse.Namespace) -> int:
    from . import query

    with _open_db(args) as db:
        _print(query.digest(db))
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from . import output, query

    with _open_db(args) as db:
        table = query.run(db, "RETURN 'agefacts is connected' AS status, 1 + 1 AS two")
    _print(output.render(table.columns, table.rows, "table"))
    return EXIT_OK


# -- the parser -----------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agefacts",
        description="Turn conversations into a queryable, temporal knowledge graph in Apache AGE.",
    )
    parser.add_argument("--version", action="version", version=f"agefacts {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    dbo = _db_options()

    p = sub.add_parser("db", help="start, stop and inspect the embedded engine")
    dbsub = p.add_subparsers(dest="db_command", metavar="ACTION")
    s = dbsub.add_parser("start", help="start the embedded engine in the background")
    s.add_argument("--data", default=None, help="data folder, or 'memory' for a throwaway database")
    s.add_argument("--port", type=int, default=None, help="TCP port on 127.0.0.1 (default 54329)")
    dbsub.add_parser("stop", help="stop the embedded engine")
    s = dbsub.add_parser("status", help="is the embedded engine running? (exit 3 when not)")
    _format_option(s)
    dbsub.add_parser("url", help="print the embedded engine's DSN")
    p.set_defaults(func=cmd_db)

    p = sub.add_parser("query", parents=[dbo], help="run a Cypher query and print the rows")
    p.add_argument("cypher", nargs="?", help="the Cypher query")
    p.add_argument("--param", action="append", metavar="NAME=VALUE", help="a query parameter ($NAME)")
    p.add_argument("--columns", help="comma-separated result column names (default: read from RETURN)")
    _format_option(p, ("table", "json", "jsonl", "csv"))
    p.set_defaults(func=cmd_query)

    p = sub.add_parser("digest", parents=[dbo], help="print the hash of the graph's logical content")
    p.set_defaults(func=cmd_digest)
    p = sub.add_parser("demo", parents=[dbo], help="run the demonstration on the embedded engine")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return args.func(args)
    except UsageError as exc:
        print(f"agefacts: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except AgeFactsError as exc:
        print(f"agefacts: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("agefacts: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
