"""A graph knows the ontology it was loaded with: reads judge facts by it without being
given it again (ask served none of a custom ontology's facts, and history refused its
predicates, unless --ontology was given to every read)."""

from __future__ import annotations

import json

from agefacts.cli import main
from agefacts.db import Database
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


def _plays(cid: str, text: str, quote: str, value: str, at: str):
    said = {
        "entities": [],
        "statements": [
            {"subject": "user", "predicate": "plays", "value": value, "quote": quote}
            | {"polarity": "asserted", "tense": "current"}
        ],
        "followups": [],
    }
    return conversation(cid, [{"speaker": "user", "text": text, "at": at, "recorded": said}], namespace="vio")


def test_forget_and_export_on_the_command_line_do_what_the_memory_does(cli_env, tmp_path, dsn, graph_name, capsys):
    """`agefacts forget` and `export` are ``Memory.forget`` and ``Memory.export`` on a graph
    loaded with its own ontology (a single-valued "plays", which the shipped one lacks): what
    is left is what a load of the conversations kept writes, with the violin current."""
    single = _custom().model_dump(mode="json")
    single["predicates"][-1]["single_valued"] = True
    onto = tmp_path / "onto.json"
    onto.write_text(json.dumps(single))
    convs = [
        _plays("band-1", "I play the cello.", "I play the cello", "cello", "2024-05-01T10:00:00Z"),
        _plays("band-2", "I play the violin now.", "I play the violin", "violin", "2024-06-01T10:00:00Z"),
        _plays("band-3", "I play the violin daily.", "I play the violin", "violin", "2024-07-01T10:00:00Z"),
    ]
    folder = tmp_path / "convs"
    folder.mkdir()
    for c in convs:
        (folder / f"{c.id}.json").write_text(c.model_dump_json())
    assert main(["load", str(folder), "--ontology", str(onto)]) == 0
    capsys.readouterr()

    assert main(["forget", "--namespace", "vio", "--conversation", "band-3"]) == 0
    capsys.readouterr()
    assert main(["facts", "user", "--namespace", "vio", "--format", "json"]) == 0
    assert [f["value"] for f in json.loads(capsys.readouterr().out)] == ["violin"]
    assert main(["digest"]) == 0
    forgotten = capsys.readouterr().out

    # The same graph as a load of what remains, with the graph's ontology.
    assert main(["export", "--namespace", "vio"]) == 0
    exported = capsys.readouterr().out
    assert [json.loads(line)["id"] for line in exported.splitlines()] == ["band-1", "band-2"]
    again = tmp_path / "again.jsonl"
    again.write_text(exported)
    other = graph_name + "_again"
    try:
        assert main(["load", str(again), "--ontology", str(onto), "--graph", other]) == 0
        assert main(["digest", "--graph", other]) == 0
        assert capsys.readouterr().out.splitlines()[-1] == forgotten.strip()
        with Memory(dsn, graph_name) as memory:
            assert [f.value for f in memory.facts("user", namespace="vio")] == ["violin"]
    finally:
        Database(dsn, other).connect().drop_graph()
