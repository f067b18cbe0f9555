"""agefacts: conversations into a queryable, temporal knowledge graph in Apache AGE.

The library's entry points, all importable from here::

    from agefacts import Database, Loader, load_paths, default_ontology, facts, history, ask

    db = Database(resolve_dsn(), "facts").connect()   # the embedded engine, started if needed
    load_paths(db, ["path/to/conversations/"], default_ontology())   # files or folders
    print(facts(db, "Tom", namespace="ann", valid_at="2024-10-01").dicts())

or, for an assistant, ``Memory`` (``AsyncMemory``): ``add`` messages, ``ask`` a question.
"""

import importlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

# The public surface is what this file imports, each name once, as ``name as name``: the
# errors now (they are small), the rest on first use (below), so that ``import agefacts`` and
# the CLI, which imports each stage only for the command that needs it, stay fast. The
# modules behind these names are the implementation: what they hold may change between
# versions; what is imported here is the library.
from ._version import __version__ as __version__
from .errors import AgeFactsError as AgeFactsError
from .errors import AgtypeError as AgtypeError
from .errors import CompileError as CompileError
from .errors import ConversationMoved as ConversationMoved
from .errors import DatabaseError as DatabaseError
from .errors import EmbeddingError as EmbeddingError
from .errors import EndpointDown as EndpointDown
from .errors import EngineError as EngineError
from .errors import ExtractionError as ExtractionError
from .errors import InputError as InputError
from .errors import LoadInterrupted as LoadInterrupted
from .errors import NamespaceMoved as NamespaceMoved
from .errors import NotFound as NotFound
from .errors import OntologyError as OntologyError
from .errors import QueryError as QueryError
from .errors import UsageError as UsageError
from .errors import WorkerLost as WorkerLost

if TYPE_CHECKING:
    from .clock import StageClock as StageClock
    from .compile import compile_conversation as compile_conversation
    from .consolidate import result_of as result_of
    from .db import DEFAULT_GRAPH as DEFAULT_GRAPH
    from .db import Database as Database
    from .db import Table as Table
    from .db import resolve_dsn as resolve_dsn
    from .embed import Embedder as Embedder
    from .engine import Engine as Engine
    from .extract import extract_all as extract_all
    from .extract import extract_conversation as extract_conversation
    from .inputs import parse_conversation as parse_conversation
    from .inputs import read_conversations as read_conversations
    from .keyphrases import StatisticalExtractor as StatisticalExtractor
    from .langchain import AgefactsRetriever as AgefactsRetriever
    from .load import Loader as Loader
    from .load import load_paths as load_paths
    from .memory import AsyncMemory as AsyncMemory
    from .memory import Memory as Memory
    from .model_client import LLMClient as LLMClient
    from .models import Conversation as Conversation
    from .models import ConversationResult as ConversationResult
    from .named import run_named as run_named
    from .ontology import Ontology as Ontology
    from .ontology import default_ontology as default_ontology
    from .ontology import load_ontology as load_ontology
    from .query import run as run
    from .reads import digest as digest
    from .reads import facts as facts
    from .reads import find_entities as find_entities
    from .reads import history as history
    from .results import Added as Added
    from .results import Citation as Citation
    from .results import HistoryEntry as HistoryEntry
    from .results import Known as Known
    from .results import MemoryFact as MemoryFact
    from .results import Recall as Recall
    from .results import Remembered as Remembered
    from .results import TopicMessage as TopicMessage
    from .retrieve import Answer as Answer
    from .retrieve import ask as ask
    from .summary import Outcome as Outcome
    from .summary import Summary as Summary


def _surface() -> dict[str, str]:
    """Each public name and the module it comes from, read from this file's imports above
    (the one list of them)."""
    source = Path(__file__).read_text(encoding="utf-8")
    return {m[2]: m[1] for m in re.finditer(r"^\s*from \.(\w+) import (\w+) as \2$", source, re.MULTILINE)}


_SURFACE = _surface()
__all__ = sorted(_SURFACE)


def __getattr__(name: str) -> Any:
    module = _SURFACE.get(name)
    if module is None:
        raise AttributeError(f"module 'agefacts' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
