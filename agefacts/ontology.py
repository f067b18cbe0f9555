"""The ontology: a deployment's closed vocabulary of predicates and entity types, its gating
policy, and the system prompt, plus the JSON schema that locks a model's reply to them.

Labels are written into Cypher, so every name here is checked against a strict pattern; the
names that agefacts' own graph uses (Statement, Message, Conversation) cannot be entity types.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import OntologyError
from .models import Input, Polarity, Tense, describe
from .names import CORE_EDGE_LABELS, CORE_VERTEX_LABELS, MAX_TYPE_LENGTH, USER, is_label, is_predicate

__all__ = [
    "Admit",
    "Ontology",
    "PredicateSpec",
    "RESERVED_LABELS",
    "default_ontology",
    "load_ontology",
    "parse_ontology",
]

# SUPERSEDES: the label of an earlier agefacts' write-time succession, still in graphs it
# loaded until `agefacts derive` removes it.
RESERVED_LABELS = CORE_VERTEX_LABELS | CORE_EDGE_LABELS | {"SUPERSEDES"}


class PredicateSpec(BaseModel):
    """A predicate. ``subject`` / ``object`` list the entity types allowed (None: any).
    ``value`` says whether it takes a literal; when neither ``object`` nor ``value`` is given
    it takes either. ``single_valued`` predicates hold one value at a time: where values
    overlap, the later start wins (docs/time.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    subject: list[str] | None = None
    object: list[str] | None = None
    value: bool | None = None
    # A literal that is a number (an age, a count): "thirty" and 30 are one value, the digits'
    # (agefacts.gate.as_number); a value that is no number is refused.
    number: bool = False
    single_valued: bool = False
    description: str | None = None
    # Words a question uses when it asks about this predicate ("live", "home", "moved" for
    # lives_in): retrieval ranks facts by them. They change no fact, so the fingerprint that
    # decides "already loaded" leaves them out.
    words: list[str] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not is_predicate(v):
            raise ValueError(
                f"predicate {v!r} must be lower-case ASCII letters, digits and underscores, "
                "starting with a letter (it is stored as a property value and used in queries)"
            )
        return v

    @property
    def takes_object(self) -> bool:
        return self.object is not None or not self.value

    @property
    def takes_value(self) -> bool:
        return bool(self.value) or (self.object is None and self.value is None)


class Admit(BaseModel):
    """The gating policy: which polarities and tenses become facts. ``dated_tenses`` lets a
    past or future statement through when it carries its own validity (a date or a
    recurrence). ``negation_ends_validity`` turns a negated current statement of a
    single-valued predicate ("I don't live in Amman any more") into the end of the matching
    fact rather than a rejection."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    polarity: list[Polarity] = Field(default_factory=lambda: list[Polarity](["asserted"]))
    tense: list[Tense] = Field(default_factory=lambda: list[Tense](["current"]))
    dated_tenses: list[Tense] = Field(default_factory=list)
    negation_ends_validity: bool = False


class Ontology(Input):
    """A person's file, read as every input is (:class:`agefacts.models.Input`): the graph keeps
    the ontology it was loaded with and a search is given its words, so its text must be text
    PostgreSQL can hold."""

    name: str
    version: str = "1"
    entity_types: list[str]
    predicates: list[PredicateSpec]
    admit: Admit = Field(default_factory=Admit)
    unresolvable_subjects: list[str] = Field(default_factory=list)
    user_type: str = "Person"
    system_prompt: str

    @field_validator("predicates", mode="before")
    @classmethod
    def _bare_names(cls, v: Any) -> Any:
        if isinstance(v, list):
            return [{"name": p} if isinstance(p, str) else p for p in v]
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Ontology:
        if not self.name.strip():
            raise ValueError("'name' is empty")
        if not self.entity_types:
            raise ValueError('\'entity_types\' is empty; list the entity types, e.g. ["Person", "Place"]')
        if not self.predicates:
            raise ValueError("'predicates' is empty; list the predicate vocabulary")
        if not self.system_prompt.strip():
            raise ValueError("'system_prompt' is empty; it instructs the model")
        for t in self.entity_types:
            if not is_label(t):
                raise ValueError(
                    f"entity type {t!r} cannot be a graph label: start with an upper-case ASCII "
                    "letter, then letters, digits or underscores"
                )
            if t in RESERVED_LABELS:
                raise ValueError(f"entity type {t!r} is reserved for agefacts' own graph; rename it")
            if len(t) > MAX_TYPE_LENGTH:
                raise ValueError(f"entity type {t!r} is longer than {MAX_TYPE_LENGTH} characters; shorten it")
            if t.endswith("_id_seq"):
                raise ValueError(f"entity type {t!r} ends in _id_seq, the name AGE gives a label's sequence; rename it")
        _no_duplicates("entity_types", self.entity_types)
        _no_duplicates("predicates", [p.name for p in self.predicates])
        types = set(self.entity_types)
        for p in self.predicates:
            for side in ("subject", "object"):
                for t in getattr(p, side) or ():
                    if t not in types:
                        raise ValueError(f"predicate {p.name!r} names {side} type {t!r}, which is not in entity_types")
            if p.value is False and p.object is None:
                raise ValueError(f"predicate {p.name!r} takes neither an object nor a value")
        if self.user_type not in types:
            raise ValueError(f"user_type {self.user_type!r} is not in entity_types")
        return self

    # -- lookups ------------------------------------------------------------------------
    def predicate(self, name: str) -> PredicateSpec | None:
        # The gate and the compiler ask for a predicate per statement, and a scan of the list
        # took a tenth of the gate's time: each is found through an index of the list, kept
        # beside the fields (pydantic compares and dumps fields only) and made again for
        # another list (a copy made with other predicates brings the old index along).
        index = self.__dict__.get("_predicate_index")
        if index is None or index[0] is not self.predicates:
            # The first of a name, as the scan found it (a copy may skip the check of names).
            index = (self.predicates, {p.name: p for p in reversed(self.predicates)})
            self.__dict__["_predicate_index"] = index
        return index[1].get(name)

    @property
    def ref(self) -> str:
        """``name@version``: recorded on statements as ``schema_ref``."""
        return f"{self.name}@{self.version}"

    def fingerprint(self) -> str:
        gating = self.model_dump(mode="json", exclude={"predicates": {"__all__": {"words"}}})
        return hashlib.sha256(json.dumps(gating, sort_keys=True).encode()).hexdigest()

    def nearest_predicates(self, name: str, n: int = 3) -> list[str]:
        """The predicates whose names are nearest ``name`` (a word it does not have), nearest
        first: what a refusal suggests instead."""
        import difflib

        return difflib.get_close_matches(name, sorted(p.name for p in self.predicates), n=n)

    def vocabulary(self) -> list[dict[str, Any]]:
        """Each predicate as a person reads it: what it is said of (``subject``), what it
        points at (entity types, or ``a value``, ``a number``), whether it holds one value at
        a time, and what it means (its description, else its words)."""
        out = []
        for p in self.predicates:
            if p.object is not None:
                takes = " | ".join(p.object) + (" or a value" if p.takes_value else "")
            elif p.takes_object and p.takes_value:
                takes = "an entity or a value"
            else:
                takes = "a number" if p.number else "a value"
            out.append(
                {
                    "predicate": p.name,
                    "subject": " | ".join(p.subject) if p.subject else "any entity",
                    "object": takes,
                    "one_at_a_time": p.single_valued,
                    "means": p.description or (", ".join(p.words[:6]) if p.words else ""),
                }
            )
        return out

    def unresolvable(self) -> frozenset[str]:
        return frozenset(t.strip().casefold() for t in self.unresolvable_subjects)

    # -- the contract sent to the model ---------------------------------------------------
    def result_schema(self) -> dict[str, Any]:
        """JSON Schema of one turn's reply, with predicate, entity type, resolution, priority,
        polarity and tense locked to enums, so that generation is constrained rather than
        fuzzy-matched afterwards."""
        handle = {"type": "string", "description": f"an entity handle such as e1, or {USER!r} for the person speaking"}
        return {
            "type": "object",
            "additionalProperties": False,
            "required": ["entities", "statements", "followups"],
            "properties": {
                "entities": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["handle", "type", "mention", "resolution"],
                        "properties": {
                            "handle": {"type": "string"},
                            "type": {"type": "string", "enum": list(self.entity_types)},
                            "mention": {"type": "string"},
                            "resolution": {"type": "string", "enum": ["resolved", "nil_placeholder"]},
                            "name": {"type": "string"},
                            "attrs": {"type": "object", "additionalProperties": {"type": "string"}},
                        },
                    },
                },
                "statements": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["subject", "predicate", "quote", "polarity", "tense"],
                        "properties": {
                            "subject": handle,
                            "predicate": {"type": "string", "enum": [p.name for p in self.predicates]},
                            "object": handle,
                            "value": {"type": ["string", "number", "boolean"]},
                            "valid_from": {"type": "string", "description": "ISO-8601"},
                            "valid_until": {"type": "string", "description": "ISO-8601"},
                            "recurrence": {"type": "string", "description": "iCalendar RRULE"},
                            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                            "quote": {"type": "string", "description": "the exact words of the message"},
                            "polarity": {
                                "type": "string",
                                "enum": ["asserted", "negated", "hedged", "hypothetical", "reported"],
                            },
                            "tense": {"type": "string", "enum": ["current", "past", "future"]},
                            "correction": {
                                "type": "boolean",
                                "description": "true on a negated statement that corrects what was said before "
                                "(a mistake), not a change in the world; a plan called off is negated with tense "
                                "future instead",
                            },
                        },
                    },
                },
                "followups": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["gap", "priority", "question"],
                        "properties": {
                            "gap": {"type": "string", "description": "handle.field, e.g. e1.name"},
                            "priority": {"type": "string", "enum": ["immediate", "banked"]},
                            "question": {"type": "string"},
                            "reason": {"type": "string"},
                        },
                    },
                },
            },
        }

    def prompt(self) -> str:
        """The system prompt with the predicate vocabulary appended."""
        lines = [self.system_prompt.rstrip(), "", "Predicates (use only these):"]
        for p in self.predicates:
            sig = []
            if p.subject:
                sig.append("subject: " + "|".join(p.subject))
            if p.object:
                sig.append("object: " + "|".join(p.object))
            if p.takes_value and p.takes_object and not p.object:
                sig.append("object or value")
            elif p.takes_value and not p.object:
                sig.append("value: literal")
            if p.single_valued:
                sig.append("one value at a time")
            desc = f" - {p.description}" if p.description else ""
            lines.append(f"- {p.name}" + (f" ({'; '.join(sig)})" if sig else "") + desc)
        lines += ["", "Entity types: " + ", ".join(self.entity_types)]
        return "\n".join(lines)


def _no_duplicates(what: str, names: list[str]) -> None:
    seen, dup = set(), []
    for n in names:
        if n in seen:
            dup.append(n)
        seen.add(n)
    if dup:
        raise ValueError(f"{what} has duplicates: {', '.join(sorted(set(dup)))}")


def parse_ontology(data: Any, source: str = "ontology") -> Ontology:
    try:
        return Ontology.model_validate(data)
    except ValidationError as exc:
        raise OntologyError(f"{source} is not a valid ontology: {describe(exc, limit=20)}") from None


def load_ontology(path: str | Path | None = None) -> Ontology:
    """Read and validate an ontology file (JSON); without a path, the shipped default."""
    if path is None:
        return default_ontology()
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise OntologyError(f"cannot read ontology {p}: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise OntologyError(f"{p} is not JSON ({exc}); an ontology is a JSON object") from None
    return parse_ontology(data, str(p))


def default_ontology() -> Ontology:
    text = (resources.files("agefacts.data") / "ontology.json").read_text(encoding="utf-8")
    return parse_ontology(json.loads(text), "the shipped ontology")
