"""The command line, run in-process against the test engine."""

from __future__ import annotations


def test_every_command_is_documented_in_the_readme():
    from pathlib import Path

    from agefacts.cli import build_parser

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    missing = [name for name in sub.choices if f"agefacts {name}" not in readme]
    assert not missing, f"commands missing from the README: {missing}"
