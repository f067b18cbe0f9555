"""Fixtures every test may use. Those of the engine are in ``integration/conftest.py``, so a
unit test (``tests/unit``) cannot reach the engine even by accident."""

from __future__ import annotations

from pathlib import Path

import pytest

from agefacts.ontology import Ontology

from .helpers import EXAMPLES, ONTO
from .leftovers import pytest_configure, pytest_sessionfinish  # noqa: F401  (the suite's own leftovers fail it)
from .llm_server import server  # noqa: F401  (the fixture, for every test)


@pytest.fixture
def examples() -> Path:
    """The shipped example conversations' folder."""
    return EXAMPLES


@pytest.fixture
def ontology() -> Ontology:
    return ONTO
