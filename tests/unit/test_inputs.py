"""Reading conversation files: a bad file or line is refused by name, and the others are read."""

from __future__ import annotations

import json

from agefacts.errors import InputError
from agefacts.inputs import read_conversations

from ..helpers import claim, conversation, user_turn


def good(cid: str) -> dict:
    conv = conversation(
        cid,
        [
            user_turn(
                "I like tea", "2024-01-01T10:00:00Z", statements=[claim("user", "likes", "I like tea", value="tea")]
            )
        ],
    )
    return conv.model_dump(mode="json", exclude_none=True)


def test_json_nested_too_deeply_is_refused_by_file_and_the_rest_are_read(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(good("a")))
    (tmp_path / "b.json").write_text("[" * 100_000)
    deep = good("c")
    deep["turns"][0]["recorded"]["entities"] = [{"handle": "e1", "type": "Person", "attrs": {"x": "y"}}]
    text = json.dumps(deep).replace('"y"', "[" * 50_000 + "]" * 50_000)
    (tmp_path / "c.json").write_text(text)
    (tmp_path / "d.jsonl").write_text("[" * 100_000 + "\n" + json.dumps(good("d")) + "\n")
    got = list(read_conversations([tmp_path]))
    assert [s for s, item in got if not isinstance(item, InputError)] == [
        str(tmp_path / "a.json"),
        f"{tmp_path / 'd.jsonl'}:2",
    ]
    bad = {s: str(item) for s, item in got if isinstance(item, InputError)}
    assert set(bad) == {str(tmp_path / "b.json"), str(tmp_path / "c.json"), f"{tmp_path / 'd.jsonl'}:1"}
    for source, why in bad.items():
        assert why.startswith(source) and ("too deeply" in why or "schema" in why), why


def test_an_instant_out_of_range_fails_its_conversation_only(tmp_path):
    for cid, at in (
        ("ok", "2024-01-01T10:00:00Z"),
        ("early", "0001-01-01T00:00:00+01:00"),
        ("late", "9999-12-31T23:30:00-01:00"),
    ):
        conv = good(cid)
        conv["turns"][0]["at"] = at
        (tmp_path / f"{cid}.json").write_text(json.dumps(conv))
    got = dict(read_conversations([tmp_path]))
    assert not isinstance(got[str(tmp_path / "ok.json")], InputError)
    for cid in ("early", "late"):
        why = str(got[str(tmp_path / f"{cid}.json")])
        assert "outside the years 0001 to 9999" in why and f"{cid}.json" in why, why


def test_an_id_namespace_or_gap_too_long_for_a_key_is_refused_by_conversation(tmp_path):
    long = "x" * 3000
    for name, change in (("id", {"id": long}), ("namespace", {"namespace": long})):
        (tmp_path / f"{name}.json").write_text(json.dumps({**good(name), **change}))
    gap = good("gap")
    gap["turns"][0]["recorded"]["followups"] = [{"gap": long, "priority": "banked", "question": "?"}]
    (tmp_path / "gap.json").write_text(json.dumps(gap))
    (tmp_path / "ok.json").write_text(json.dumps(good("ok")))
    got = dict(read_conversations([tmp_path]))
    assert not isinstance(got[str(tmp_path / "ok.json")], InputError)
    for name in ("id", "namespace", "gap"):
        why = str(got[str(tmp_path / f"{name}.json")])
        assert "at most 200 characters" in why and name in why, why


def test_a_folder_is_read_whatever_the_case_of_its_suffixes_and_ndjson_is_jsonl(tmp_path):
    # Exports and dataset dumps name their files .JSON, .JSONL or .ndjson as often as not.
    (tmp_path / "a.JSON").write_text(json.dumps(good("a")))
    (tmp_path / "b.ndjson").write_text(json.dumps(good("b")) + "\n" + json.dumps(good("c")) + "\n")
    (tmp_path / "d.Jsonl").write_text(json.dumps(good("d")) + "\n")
    (tmp_path / "notes.txt").write_text("not a conversation")
    got = list(read_conversations([tmp_path]))
    assert [(s, item.id) for s, item in got] == [
        (str(tmp_path / "a.JSON"), "a"),
        (f"{tmp_path / 'b.ndjson'}:1", "b"),
        (f"{tmp_path / 'b.ndjson'}:2", "c"),
        (f"{tmp_path / 'd.Jsonl'}:1", "d"),
    ]


def test_a_folder_without_conversation_files_is_an_error_naming_it(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("hello")
    (tmp_path / "ok.json").write_text(json.dumps(good("ok")))
    got = list(read_conversations([tmp_path / "empty", tmp_path / "other", tmp_path / "ok.json"]))
    assert [s for s, _ in got] == [str(tmp_path / "empty"), str(tmp_path / "other"), str(tmp_path / "ok.json")]
    for _, item in got[:2]:
        assert isinstance(item, InputError)
        assert "no .json, .jsonl or .ndjson files" in str(item), item
    assert got[2][1].id == "ok"


def test_a_conversation_this_process_checked_reads_back_the_same_and_still_by_its_types():
    # A load's worker reads the JSON the loading process made of conversations it validated,
    # without the checks written in Python: what it reads is what a full reading gives, and
    # JSON of another shape is still refused.
    from importlib import resources

    import pytest
    from pydantic import ValidationError

    from agefacts.corpus import generate
    from agefacts.models import CHECKED, Conversation

    shipped = [c for _, c in read_conversations([str(resources.files("agefacts.examples"))])]
    assert shipped and all(isinstance(c, Conversation) for c in shipped)
    for conv in [*shipped, *(Conversation.model_validate(c) for c in generate(200, 10))]:
        document = conv.model_dump_json()
        assert (
            Conversation.model_validate_json(document, context=CHECKED)
            == Conversation.model_validate_json(document)
            == conv
        )
    with pytest.raises(ValidationError):
        Conversation.model_validate_json('{"id": "c", "namespace": "n", "turns": "not a list"}', context=CHECKED)
