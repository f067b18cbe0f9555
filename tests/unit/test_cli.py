"""The command line, run in-process against the test engine."""

from __future__ import annotations


def test_every_command_is_documented_in_the_readme():
    from pathlib import Path

    from agefacts.cli import build_parser

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    missing = [name for name in sub.choices if f"agefacts {name}" not in readme]
    assert not missing, f"commands missing from the README: {missing}"


def test_a_batch_size_that_is_not_a_positive_number_is_refused_by_name(capsys):
    import pytest

    from agefacts.cli import main

    for bad in ("0", "-5", "many"):
        with pytest.raises(SystemExit) as exit_:
            main(["load", "conversations/", "--batch-statements", bad])
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert f"--batch-statements: {bad!r} is not a whole number of at least 1" in err and "Traceback" not in err


def test_every_number_an_option_takes_is_checked_by_name(capsys):
    """A count of zero, a negative time or a port outside 1-65535 is refused by the option's
    name before anything runs (`bench --statements 0` ended in an IndexError traceback)."""
    import pytest

    from agefacts.cli import main

    cases = [
        (["bench", "--statements", "0"], "--statements: '0' is not a whole number of at least 1"),
        (["bench", "--per-conversation", "0"], "--per-conversation: '0' is not a whole number of at least 1"),
        (["bench", "--reference-cap", "-1"], "--reference-cap: '-1' is not a whole number of at least 1"),
        (["ask", "Where do I live?", "-k", "0"], "-k: '0' is not a whole number of at least 1"),
        (["extract", "x.json", "--out", "o", "--model", "m", "--retries", "-1"], "--retries: '-1' is not a whole number of at least 0"),
        (["extract", "x.json", "--out", "o", "--model", "m", "--timeout", "0"], "--timeout: '0' is not a number of seconds above 0"),
        (["extract", "x.json", "--out", "o", "--model", "m", "--concurrency", "0"], "--concurrency: '0' is not a whole number of at least 1"),
        (["extract", "x.json", "--out", "o", "--model", "m", "--context-turns", "-3"], "--context-turns: '-3' is not a whole number of at least 0"),
        (["facts", "user", "--port", "99999999"], "--port: '99999999' is not a port (1 to 65535)"),
        (["db", "start", "--port", "0"], "--port: '0' is not a port (1 to 65535)"),
    ]  # fmt: skip
    for argv, said in cases:
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and said in err and "Traceback" not in err, (argv, err)


def test_a_failure_nobody_foresaw_is_one_sentence_not_a_traceback(monkeypatch, capsys):
    from agefacts import cli

    def broken(args):
        raise ZeroDivisionError("integer division or modulo by zero")

    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    sub.choices["schema"].set_defaults(func=broken)
    assert cli.main(["schema", "conversation"]) == 70
    err = capsys.readouterr().err
    assert "ZeroDivisionError: integer division or modulo by zero" in err  # the fault happened
    assert "Traceback" not in err and "AGEFACTS_TRACEBACK=1" in err
    monkeypatch.setenv("AGEFACTS_TRACEBACK", "1")
    import pytest

    with pytest.raises(ZeroDivisionError):
        cli.main(["schema", "conversation"])


def test_what_a_command_does_to_the_database_is_declared_where_it_is_defined_not_by_its_handlers_name(monkeypatch):
    """Which commands only read (Ctrl-C may restart the embedded engine under them; a replica
    may serve them) was decided by matching the handler's function name: a rename changed it
    in silence. It is declared beside each command's arguments, and a handler of another name
    keeps what its command declares."""
    import agefacts.cli as cli

    parser = cli.build_parser()
    declared = {
        argv[0]: cli._access(parser.parse_args(argv))
        for argv in (
            ["query", "RETURN 1"],
            ["facts", "user"],
            ["history", "user", "lives_in"],
            ["ask", "where?"],
            ["show", "user", "--out", "x.svg"],
            ["digest"],
            ["eval", "recall", "q.jsonl"],
            ["load", "x.json"],
            ["forget", "--namespace", "n"],
            ["setup"],
        )
    }
    assert declared == {
        "query": cli._READS,
        "facts": cli._READS_REPLICA,
        "history": cli._READS_REPLICA,
        "ask": cli._READS_REPLICA,
        "show": cli._READS_REPLICA,
        "digest": cli._READS_REPLICA,
        "eval": cli._READS,
        "load": cli._WRITES,
        "forget": cli._WRITES,
        "setup": cli._WRITES,
    }
    args = parser.parse_args(["facts", "user"])

    def renamed(a):  # the same command under another handler name
        return 0

    args.func = renamed
    assert cli._access(args) == cli._READS_REPLICA


def test_the_ontology_command_lists_types_and_predicates_with_what_each_means(capsys):
    """No command listed the ontology: a refusal named a type that was wrong and none that
    were right."""
    import json

    from agefacts.cli import main

    assert main(["ontology"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("entity types: Person, Place, Organization, Group, Event, Activity")
    assert "lives_in" in out and "where someone lives" in out
    assert main(["ontology", "--format", "json"]) == 0
    got = json.loads(capsys.readouterr().out)
    works = next(p for p in got["predicates"] if p["predicate"] == "works_at")
    assert works == {
        "predicate": "works_at",
        "subject": "Person",
        "object": "Organization",
        "one_at_a_time": True,
        "means": "someone's employer",
    }


def test_ask_takes_k_spelled_as_eval_recall_spells_it():
    """`ask Q --k 5` was read as `--known-at 5` (an abbreviation of it), and failed saying '5'
    is not a time; `eval recall` spells the option `--k`."""
    from agefacts.cli import build_parser

    args = build_parser().parse_args(["ask", "Where do I live?", "--k", "5"])
    assert args.k == 5 and args.known_at is None
