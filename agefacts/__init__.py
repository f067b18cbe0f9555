"""agefacts: conversations into a queryable, temporal knowledge graph in Apache AGE."""

from .errors import (
    AgeFactsError,
    CompileError,
    DatabaseError,
    EngineError,
    ExtractionError,
    InputError,
    LoadError,
    OntologyError,
    QueryError,
)

__version__ = "0.1.0"

__all__ = [
    "AgeFactsError",
    "CompileError",
    "DatabaseError",
    "EngineError",
    "ExtractionError",
    "InputError",
    "LoadError",
    "OntologyError",
    "QueryError",
    "__version__",
]
