"""The ontology: validation, and the contract sent to the model."""

from __future__ import annotations

import json

import pytest

from agefacts.cli import main
from agefacts.errors import OntologyError
from agefacts.ontology import default_ontology, load_ontology, parse_ontology

BASE = {"name": "t", "entity_types": ["Person", "Place"], "predicates": ["lives_in"], "system_prompt": "x"}


@pytest.mark.parametrize(
    "change, message",
    [
        ({"entity_types": []}, "entity_types' is empty"),
        ({"predicates": []}, "predicates' is empty"),
        ({"system_prompt": " "}, "system_prompt' is empty"),
        ({"entity_types": ["Person", "Person"]}, "duplicates: Person"),
        ({"predicates": ["a", "a"]}, "duplicates: a"),
        ({"entity_types": ["person"]}, "cannot be a graph label"),
        ({"entity_types": ["Person", "Place`) DETACH"]}, "cannot be a graph label"),
        ({"entity_types": ["Person", "Statement"]}, "reserved"),
        ({"entity_types": ["Person", "ABOUT"]}, "reserved"),
        ({"entity_types": ["Person", "SUPERSEDES"]}, "reserved"),
        ({"entity_types": ["Person", "Fact"]}, "reserved"),
        ({"entity_types": ["Person", "HOLDS"]}, "reserved"),
        ({"entity_types": ["Person", "Person_id_seq"]}, "_id_seq"),
        ({"entity_types": ["Person", "P" + "x" * 40]}, "longer than 40"),
        ({"predicates": ["Lives In"]}, "lower-case"),
        ({"predicates": [{"name": "x", "subject": ["Robot"]}]}, "not in entity_types"),
        ({"user_type": "Robot"}, "user_type"),
        # What the graph stores of an ontology, and what a search is given of its words, is text
        # PostgreSQL must hold: a NUL or a lone surrogate anywhere is refused, where it is.
        ({"predicates": [{"name": "lives_in", "words": ["home", "ho\x00me"]}]}, "NUL character"),
        ({"system_prompt": "be \x00 brief"}, "NUL character"),
        ({"predicates": [{"name": "lives_in", "description": "lives \ud800"}]}, "lone surrogate"),
    ],
)
def test_invalid_ontologies_are_refused_with_the_reason(change, message):
    with pytest.raises(OntologyError, match=message):
        parse_ontology({**BASE, **change})


def test_ontology_files_name_themselves_in_errors(tmp_path):
    bad = tmp_path / "onto.json"
    bad.write_text("{not json")
    with pytest.raises(OntologyError, match=str(bad)):
        load_ontology(bad)
    with pytest.raises(OntologyError, match="cannot read"):
        load_ontology(tmp_path / "missing.json")


def test_the_reply_schema_locks_the_vocabulary_to_enums():
    onto = default_ontology()
    schema = onto.result_schema()
    stmt = schema["properties"]["statements"]["items"]["properties"]
    assert stmt["predicate"]["enum"] == [p.name for p in onto.predicates]
    assert stmt["polarity"]["enum"] == ["asserted", "negated", "hedged", "hypothetical", "reported"]
    assert stmt["tense"]["enum"] == ["current", "past", "future"]
    ent = schema["properties"]["entities"]["items"]["properties"]
    assert ent["type"]["enum"] == onto.entity_types
    assert ent["resolution"]["enum"] == ["resolved", "nil_placeholder"]
    assert schema["properties"]["followups"]["items"]["properties"]["priority"]["enum"] == ["immediate", "banked"]


def test_the_prompt_carries_the_vocabulary():
    prompt = default_ontology().prompt()
    assert "- lives_in (subject: Person|Group; object: Place; one value at a time)" in prompt
    assert "Entity types: Person, Place" in prompt


def test_schema_command_prints_json_schemas(capsys):
    assert main(["schema", "conversation"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert set(schema["required"]) >= {"id", "namespace", "turns"}
    assert main(["schema", "result"]) == 0
    assert "statements" in json.loads(capsys.readouterr().out)["properties"]
    assert main(["schema", "reply"]) == 0
    assert "enum" in json.dumps(json.loads(capsys.readouterr().out))
