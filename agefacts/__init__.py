"""agefacts: conversations into a queryable, temporal knowledge graph in Apache AGE.

The library's entry points, all importable from here::

    from agefacts import Database, Loader, load_paths, default_ontology, facts, history, ask

    db = Database(resolve_dsn(), "facts").connect()   # the embedded engine, started if needed
    load_paths(db, ["path/to/conversations/"], default_ontology())   # files or folders
    print(facts(db, "Tom", namespace="ann", valid_at="2024-10-01").dicts())

or, for an assistant, ``Memory`` (``AsyncMemory``): ``add`` messages, ``ask`` a question.
"""

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__
from .errors import (
    AgeFactsError,
    AgtypeError,
    CompileError,
    ConversationMoved,
    DatabaseError,
    EndpointDown,
    EngineError,
    ExtractionError,
    InputError,
    LoadInterrupted,
    OntologyError,
    QueryError,
    UsageError,
)

if TYPE_CHECKING:
    from .compile import compile_conversation
    from .consolidate import result_of
    from .db import DEFAULT_GRAPH, Database, Table, resolve_dsn
    from .embed import Embedder, EmbeddingError
    from .engine import Engine
    from .extract import LLMClient, extract_all, extract_conversation
    from .inputs import parse_conversation, read_conversations
    from .keyphrases import StatisticalExtractor
    from .load import Loader, Outcome, Summary, load_paths
    from .memory import (
        Added,
        AsyncMemory,
        Citation,
        HistoryEntry,
        Known,
        Memory,
        MemoryFact,
        Recall,
        Remembered,
        TopicMessage,
    )
    from .models import Conversation, ConversationResult
    from .ontology import Ontology, default_ontology, load_ontology
    from .query import digest, facts, find_entities, history, run, run_named
    from .retrieve import Answer, ask

# The rest is imported on first use, so that ``import agefacts`` (and the CLI, which imports
# each stage only for the command that needs it) stays fast.
_LAZY = {
    "Added": "memory",
    "AsyncMemory": "memory",
    "Citation": "memory",
    "HistoryEntry": "memory",
    "Memory": "memory",
    "MemoryFact": "memory",
    "Recall": "memory",
    "TopicMessage": "memory",
    "Known": "memory",
    "Remembered": "memory",
    "Embedder": "embed",
    "EmbeddingError": "embed",
    "StatisticalExtractor": "keyphrases",
    "Answer": "retrieve",
    "Conversation": "models",
    "ConversationResult": "models",
    "DEFAULT_GRAPH": "db",
    "Database": "db",
    "Engine": "engine",
    "LLMClient": "extract",
    "Loader": "load",
    "Ontology": "ontology",
    "Outcome": "load",
    "Summary": "load",
    "Table": "db",
    "ask": "retrieve",
    "compile_conversation": "compile",
    "default_ontology": "ontology",
    "digest": "query",
    "extract_all": "extract",
    "extract_conversation": "extract",
    "facts": "query",
    "find_entities": "query",
    "history": "query",
    "load_ontology": "ontology",
    "load_paths": "load",
    "parse_conversation": "inputs",
    "read_conversations": "inputs",
    "resolve_dsn": "db",
    "result_of": "consolidate",
    "run": "query",
    "run_named": "query",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agefacts' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "DEFAULT_GRAPH",
    "Added",
    "AgeFactsError",
    "AgtypeError",
    "Answer",
    "AsyncMemory",
    "Citation",
    "CompileError",
    "Conversation",
    "ConversationMoved",
    "ConversationResult",
    "Database",
    "DatabaseError",
    "Embedder",
    "EmbeddingError",
    "EndpointDown",
    "Engine",
    "EngineError",
    "ExtractionError",
    "HistoryEntry",
    "InputError",
    "Known",
    "LLMClient",
    "LoadInterrupted",
    "Loader",
    "Memory",
    "MemoryFact",
    "Ontology",
    "OntologyError",
    "Outcome",
    "QueryError",
    "Recall",
    "Remembered",
    "StatisticalExtractor",
    "Summary",
    "Table",
    "TopicMessage",
    "UsageError",
    "__version__",
    "ask",
    "compile_conversation",
    "default_ontology",
    "digest",
    "extract_all",
    "extract_conversation",
    "facts",
    "find_entities",
    "history",
    "load_ontology",
    "load_paths",
    "parse_conversation",
    "read_conversations",
    "resolve_dsn",
    "result_of",
    "run",
    "run_named",
]
