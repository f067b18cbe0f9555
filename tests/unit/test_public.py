"""The library's public surface: what ``agefacts`` exports, listed once (its own imports), is
what a caller needs; every error a caller can meet is one of the exported errors; the docs
use nothing else."""

from __future__ import annotations

import importlib
import inspect
import re
import subprocess
import sys
from pathlib import Path

import agefacts
from agefacts import errors

ROOT = Path(agefacts.__file__).parent.parent
PACKAGE = Path(agefacts.__file__).parent


def test_every_exported_name_resolves_and_star_import_gives_exactly_them():
    assert agefacts.__all__ == sorted(set(agefacts.__all__)) and "Memory" in agefacts.__all__
    for name in agefacts.__all__:
        assert getattr(agefacts, name) is not None, name
    scope: dict[str, object] = {}
    exec("from agefacts import *", scope)
    assert sorted(k for k in scope if k != "__builtins__") == agefacts.__all__
    assert not hasattr(agefacts, "plan") and "plan" not in dir(agefacts)


def test_import_agefacts_loads_no_stage_until_a_name_is_used():
    # The CLI imports each stage only for the command that needs it.
    code = "import sys, agefacts; print(sorted(m for m in sys.modules if m.startswith('agefacts.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert eval(out) == ["agefacts._version", "agefacts.errors"]


def _classes() -> list[tuple[str, type]]:
    out = []
    for path in sorted(PACKAGE.glob("*.py")):
        if path.stem in ("__init__", "__main__"):
            continue
        module = importlib.import_module(f"agefacts.{path.stem}")
        out += [
            (path.stem, c) for _, c in inspect.getmembers(module, inspect.isclass) if c.__module__ == module.__name__
        ]
    return out


def test_every_error_a_caller_can_meet_lives_in_errors_and_is_exported():
    elsewhere = [
        f"{m}.{c.__name__}"
        for m, c in _classes()
        if m != "errors" and issubclass(c, BaseException) and not c.__name__.startswith("_")
    ]
    assert elsewhere == []  # an error class outside errors.py is private to its module
    ours = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, errors.AgeFactsError)]
    assert len(ours) > 10
    for c in ours:
        assert c.__name__ in agefacts.__all__, c.__name__
        assert getattr(agefacts, c.__name__) is c


def test_the_docs_import_only_what_the_package_exports():
    texts = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    imported: set[str] = set()
    for path in texts:
        text = path.read_text()
        assert not re.search(r"^\s*from agefacts\.\w+ import", text, re.MULTILINE), path.name
        for names in re.findall(r"^\s*from agefacts import ([^\n(]+)", text, re.MULTILINE):
            imported |= {n.strip() for n in names.split(",")}
    assert imported and imported <= set(agefacts.__all__), imported - set(agefacts.__all__)
