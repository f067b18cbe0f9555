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
