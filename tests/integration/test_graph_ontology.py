"""A graph knows the ontology it was loaded with: reads judge facts by it without being
given it again (ask served none of a custom ontology's facts, and history refused its
predicates, unless --ontology was given to every read)."""

from __future__ import annotations

import json

from agefacts.cli import main
from agefacts.ledger import graph_ontology
from agefacts.memory import Memory
from agefacts.ontology import default_ontology, parse_ontology

from ..helpers import conversation


def _custom():
    data = default_ontology().model_dump(mode="json")
    data["predicates"].append(
        {
            "name": "plays",
            "subject": ["Person"],
            "value": True,
            "description": "an instrument someone plays",
            "words": ["play", "plays"],
        }
    )
    return parse_ontology(data)


def _band():
    said = {
        "entities": [],
        "statements": [
            {"subject": "user", "predicate": "plays", "value": "cello", "quote": "I play the cello"}
            | {"polarity": "asserted", "tense": "current"}
        ],
        "followups": [],
    }
    turn = {"speaker": "user", "text": "I play the cello.", "at": "2024-05-01T10:00:00Z", "recorded": said}
    return conversation("band-1", [turn], namespace="vio")


def test_reads_use_the_ontology_the_graph_was_loaded_with(cli_env, tmp_path, dsn, graph_name, capsys):
    onto = tmp_path / "onto.json"
    onto.write_text(json.dumps(_custom().model_dump(mode="json")))
    conv = tmp_path / "band.json"
    conv.write_text(_band().model_dump_json())
    assert main(["load", str(conv), "--ontology", str(onto)]) == 0
    capsys.readouterr()
    assert main(["ask", "What do I play?", "--namespace", "vio", "--format", "json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert [f["value"] for f in answer["facts"]] == ["cello"] and answer["rejected"] == []
    assert main(["history", "user", "plays", "--namespace", "vio", "--format", "json"]) == 0
    assert [r["value"] for r in json.loads(capsys.readouterr().out)] == ["cello"]
    # Given again, an ontology still wins: the shipped one has no "plays".
    shipped = tmp_path / "shipped.json"
    shipped.write_text(json.dumps(default_ontology().model_dump(mode="json")))
    assert main(["ask", "What do I play?", "--namespace", "vio", "--ontology", str(shipped), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["rejected"][0]["reason"] == "predicate 'plays' is not in the ontology"
    with Memory(dsn, graph_name) as memory:
        assert memory.ontology.predicate("plays") is not None
        assert [f.value for f in memory.ask("What do I play?", namespace="vio").facts] == ["cello"]


def test_the_last_load_decides_and_the_same_ontology_again_writes_nothing(db):
    from agefacts.load import Loader

    assert graph_ontology(db) is None
    Loader(db, _custom()).load(_band())
    assert graph_ontology(db).predicate("plays") is not None
    before = db.execute("SELECT loaded_at FROM agefacts.graph_ontology WHERE graph = %s", (db.graph,))
    Loader(db, _custom()).load(_band().model_copy(update={"id": "band-2"}))
    assert db.execute("SELECT loaded_at FROM agefacts.graph_ontology WHERE graph = %s", (db.graph,)) == before
    Loader(db, default_ontology()).load(_band().model_copy(update={"id": "band-3"}))
    assert graph_ontology(db).predicate("plays") is None


def test_a_dropped_graph_forgets_its_ontology_and_a_new_load_keeps_one_again(db):
    from agefacts.load import Loader

    Loader(db, _custom()).load(_band())
    db.drop_graph()
    db.ensure_graph()
    assert graph_ontology(db) is None  # the graph made again under the name starts empty
    Loader(db, _custom()).load(_band())  # on the same connection, which had kept it before
    assert graph_ontology(db).predicate("plays") is not None
