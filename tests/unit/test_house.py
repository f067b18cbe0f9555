"""The rules that keep the package easy to change, checked on its source: every module says
what it offers in ``__all__`` (and offers nothing else by accident), and no stage of the
pipeline imports a later one. Each check is a function over source text, so the tests also
plant a violation and watch it caught."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import agefacts

PACKAGE = Path(agefacts.__file__).parent

# Earlier before later: a module may import only modules of an earlier rank. The foundations
# first, then the engine and the database, then the pipeline's stages in their order, then
# what reads the graph, then the commands that use all of it.
RANKS: list[set[str]] = [
    {"_version", "errors"},
    {"names", "agtype", "temporal", "fake_model", "typography", "placement", "limits", "clock"},
    {"cypher"},
    {"models"},
    {"keys", "ontology"},
    {"derive"},
    {"timeline"},
    {"engine"},
    {"dberrors"},
    {"graphadmin"},
    {"db"},
    {"asyncdb"},
    {"replica"},
    {"model_client", "recordings"},
    {"extract", "embed"},
    {"ground"},
    {"keyphrases"},
    {"gate"},
    {"consolidate"},
    {"compile"},
    {"tables"},
    {"retract"},
    {"bulk", "inputs", "ledger", "summary"},
    {"firstload"},
    {"workers"},
    {"preparing"},
    {"load"},
    {"query", "append", "migrate", "provision"},
    {"named"},
    {"plans"},
    {"reads"},
    {"retrieve", "picture", "output", "correction"},
    {"placed", "results"},
    {"adding"},
    {"memory"},
    {"mcp_server", "langchain"},
    {"corpus"},
    {"grade", "bench", "recall"},
    {"cli"},
    {"__main__"},
]
RANK = {m: i for i, group in enumerate(RANKS) for m in group}


def modules() -> dict[str, str]:
    """Every module of the package by its name inside the package ("engine" for the
    subpackage), with its source; the package's own ``__init__`` is the public surface, not
    a stage, and is left out."""
    out = {p.stem: p.read_text() for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    out["engine"] = (PACKAGE / "engine" / "__init__.py").read_text()
    return out


def imported(name: str, source: str) -> set[str]:
    """The package's modules that ``source`` imports, at the top or inside a function."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level:
            # "from .x import y" names module x; "from . import x" names x; in the engine
            # subpackage "from .. import x" is the same.
            if node.module:
                out.add(node.module.split(".")[0])
            else:
                out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("agefacts."):
            out.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            out |= {a.name.split(".")[1] for a in node.names if a.name.startswith("agefacts.")}
    out.discard(name)
    return out


def import_violations(sources: dict[str, str]) -> list[str]:
    problems = []
    for name, source in sorted(sources.items()):
        if name not in RANK:
            problems.append(f"{name} has no place in RANKS")
            continue
        for other in sorted(imported(name, source)):
            if other in RANK and RANK[other] >= RANK[name]:
                problems.append(f"{name} imports {other}, which is not an earlier stage")
    return problems


def public_names(source: str) -> set[str]:
    """Names a module binds at its top level by def, class or assignment, not starting with
    an underscore (imports are not its own)."""
    names: set[str] = set()
    for node in ast.parse(source).body:
        targets: list[ast.expr] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name):
                    names.add(n.id)
    return {n for n in names if not n.startswith("_")}


def declared_all(source: str) -> list[str] | None:
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    return None


def all_violations(sources: dict[str, str]) -> list[str]:
    problems = []
    for name, source in sorted(sources.items()):
        if name.startswith("_"):
            continue
        declared = declared_all(source)
        if declared is None:
            problems.append(f"{name} has no __all__")
            continue
        public = public_names(source)
        if missing := sorted(public - set(declared)):
            problems.append(f"{name}: public but not in __all__: {missing}")
        if foreign := sorted(set(declared) - public):
            problems.append(f"{name}: in __all__ but not defined there: {foreign}")
        if len(declared) != len(set(declared)):
            problems.append(f"{name}: __all__ names something twice")
    return problems


# -- the package as it is ----------------------------------------------------------------------
def test_every_module_has_a_place_and_imports_only_earlier_stages():
    assert import_violations(modules()) == []


def test_every_modules_all_is_exactly_its_public_names():
    assert all_violations(modules()) == []


def test_the_package_exports_the_library_and_each_name_resolves():
    for name in agefacts.__all__:
        assert getattr(agefacts, name) is not None, name
    for name in ("Database", "Loader", "load_paths", "facts", "history", "ask", "default_ontology", "digest"):
        assert name in agefacts.__all__
    # Each name is the library's own object, from the module that defines it.
    assert agefacts.Database is importlib.import_module("agefacts.db").Database
    assert sorted(agefacts.__all__) == sorted(set(agefacts.__all__))


def test_importing_the_package_does_not_import_the_stages():
    # The CLI starts by importing the package; the stages come only with the command.
    import subprocess
    import sys

    code = "import sys, agefacts; print(sorted(m for m in sys.modules if m.startswith('agefacts.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "agefacts.db" not in out and "agefacts.load" not in out, out


# -- the checks catch what they are for ------------------------------------------------------------
def test_a_planted_backward_import_is_caught():
    sources = modules()
    sources["extract"] += "\n\ndef _late():\n    from .load import Loader\n    return Loader\n"
    assert import_violations(sources) == ["extract imports load, which is not an earlier stage"]
    sources = modules()
    sources["gate"] = "from agefacts.compile import plan\n" + sources["gate"]
    assert import_violations(sources) == ["gate imports compile, which is not an earlier stage"]


def test_a_module_that_no_rank_names_is_caught():
    sources = modules()
    sources["newstage"] = "X = 1\n__all__ = ['X']\n"
    assert import_violations(sources) == ["newstage has no place in RANKS"]


def test_a_planted_public_name_or_foreign_export_is_caught():
    sources = modules()
    sources["keys"] += "\n\ndef helper():\n    return 1\n"
    assert all_violations(sources) == ["keys: public but not in __all__: ['helper']"]
    sources = modules()
    sources["temporal"] = sources["temporal"].replace("__all__ = [", '__all__ = [\n    "json",', 1)
    assert all_violations(sources) == ["temporal: in __all__ but not defined there: ['json']"]
    sources = modules()
    sources["output"] = sources["output"].replace("__all__", "exported", 1)
    assert "output has no __all__" in all_violations(sources)


def test_the_errors_a_caller_can_meet_live_in_errors_and_are_exported():
    """LoadInterrupted, ConversationMoved, EndpointDown and the agtype reader's error were
    each defined in the stage that raises them and not exported: a caller had to know where."""
    import pytest

    from agefacts.agtype import decode

    for name in ("LoadInterrupted", "ConversationMoved", "EndpointDown", "AgtypeError"):
        cls = getattr(agefacts, name)
        assert cls.__module__ == "agefacts.errors" and name in agefacts.__all__, name
    assert issubclass(agefacts.LoadInterrupted, KeyboardInterrupt)
    assert issubclass(agefacts.EndpointDown, agefacts.ExtractionError)
    with pytest.raises(agefacts.AgtypeError):
        decode('{"a": 1} trailing')
    with pytest.raises(ValueError):  # as before, for callers that caught ValueError
        decode("[1, 2")


# -- the layers docs/architecture.md draws -------------------------------------------------------
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"


def documented_layers(text: str) -> list[tuple[str, list[str]]]:
    """The rows of the architecture page's layer table, top to bottom: each layer's name and
    its modules (the backquoted names of its second column)."""
    import re

    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 3 and cells[0] not in ("layer", "---"):
            rows.append((cells[0], re.findall(r"`([^`]+)`", cells[1])))
    return rows


def layer_violations(sources: dict[str, str], layers: list[tuple[str, list[str]]]) -> list[str]:
    """Modules the page leaves out or names twice, and imports that run up the page's layers."""
    level: dict[str, int] = {}
    problems = []
    for depth, (_, names) in enumerate(reversed(layers)):
        for name in names:
            if name in level:
                problems.append(f"{name} is in two layers")
            level[name] = depth
    problems += [f"{name} is in no layer" for name in sorted(set(sources) - set(level))]
    problems += [f"{name} is no module" for name in sorted(set(level) - set(sources))]
    for name, source in sorted(sources.items()):
        for other in sorted(imported(name, source)):
            if name in level and other in level and level[other] > level[name]:
                problems.append(f"{name} imports {other}, a layer above its own")
    return problems


def drawn_layers(text: str, names: list[str]) -> list[tuple[str, list[str]]]:
    """The layers the page's drawing shows (its first code block), top to bottom: each line
    that starts with a layer's name opens it, and the words of it and of the lines under it
    that are modules are its modules."""
    import re

    block = text.split("```", 2)[1]
    out: list[tuple[str, list[str]]] = []
    modules_ = set(modules())
    for line in block.splitlines():
        head = next((n for n in names if line.strip().startswith(n + "  ")), None)
        if head is not None:
            out.append((head, []))
            line = line.strip()[len(head) :]
        if out:
            out[-1][1].extend(w for w in re.findall(r"[\w]+", line) if w in modules_)
    return out


def test_the_architecture_page_names_every_module_in_one_layer_and_no_import_runs_up():
    text = ARCHITECTURE.read_text()
    layers = documented_layers(text)
    assert [name for name, _ in layers][0] == "command line" and len(layers) >= 5
    assert layer_violations(modules(), layers) == []
    drawn = drawn_layers(text, [name for name, _ in layers])
    assert [(name, sorted(ms)) for name, ms in drawn] == [(name, sorted(ms)) for name, ms in layers]


def test_a_module_missing_from_the_page_or_an_import_up_its_layers_is_caught():
    layers = documented_layers(ARCHITECTURE.read_text())
    sources = modules()
    assert layer_violations({**sources, "newroom": ""}, layers) == ["newroom is in no layer"]
    planted = {**sources, "keys": sources["keys"] + "\nfrom .memory import Memory\n"}
    assert layer_violations(planted, layers) == ["keys imports memory, a layer above its own"]


# -- the command line: each command's arguments beside what runs it ---------------------------------
def apart_from_handlers(source: str) -> list[str]:
    """Each function that adds a command's arguments (``_args_*``) whose next function is not
    the handler it names (``set_defaults(func=...)``), and each handler no such function
    stands before."""
    body = [n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)]
    problems = []
    beside: set[str] = set()
    for node, after in zip(body, body[1:], strict=False):
        if not node.name.startswith("_args_"):
            continue
        handlers = {
            kw.value.id
            for call in ast.walk(node)
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "set_defaults"
            for kw in call.keywords
            if kw.arg == "func" and isinstance(kw.value, ast.Name)
        }
        if handlers != {after.name}:
            problems.append(f"{node.name} runs {sorted(handlers)} but stands before {after.name}")
        beside |= handlers
    problems += [
        f"{n.name} has no arguments beside it" for n in body if n.name.startswith("_cmd_") and n.name not in beside
    ]
    return problems


def test_each_commands_arguments_stand_beside_its_handler():
    source = (PACKAGE / "cli.py").read_text()
    assert apart_from_handlers(source) == []
    # Every command the parser knows is added by one of them, one each.
    import argparse

    from agefacts.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert len(commands) == source.count("\ndef _args_") > 20


def test_arguments_moved_away_from_their_handler_are_caught():
    source = (PACKAGE / "cli.py").read_text()
    moved = source.replace("\ndef _cmd_digest(", "\ndef _elsewhere():\n    pass\n\n\ndef _cmd_digest(", 1)
    assert apart_from_handlers(moved) == ["_args_digest runs ['_cmd_digest'] but stands before _elsewhere"]
