"""The Cypher recipes of docs/querying.md, by name, as a person copies them."""

from __future__ import annotations

import re
from pathlib import Path

from agefacts.db import Database
from agefacts.query import run

PAGE = Path(__file__).parents[2] / "docs" / "querying.md"
_BLOCK = re.compile(r"```cypher\n// recipe: (?P<name>[^\n]+)\n(?P<body>.*?)```", re.S)


def recipe(name: str) -> str:
    found = {m["name"].strip(): m["body"] for m in _BLOCK.finditer(PAGE.read_text())}
    assert name in found, f"docs/querying.md has no recipe {name!r} (it has {sorted(found)})"
    return found[name]


def ask(db: Database, name: str, **params: str) -> list[dict]:
    """Run a recipe as ``agefacts query`` does."""
    return run(db, recipe(name), params).dicts()
