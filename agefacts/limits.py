"""The sizes agefacts reads, each with its default and the variable that raises it: a file (or a
JSONL line), a message, a question. Bounded so that no input can take the process or the
embedded engine with it (a file that never ends, a message of 50 MB, a question of 2 MB), with
defaults far above what a person's chat holds.

Measured for the defaults: of LoCoMo's 5,882 dialogue turns the longest is 454 characters; a
question of 4,000 characters (a page of text) is answered in about twice the time of a short one
(docs/performance.md)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from .errors import InputError, UsageError

__all__ = ["FILE_MB", "Limit", "MESSAGE_CHARS", "QUESTION_CHARS"]


@dataclass(frozen=True)
class Limit:
    """One limit: what it bounds, its unit, its default and the environment variable that sets
    it."""

    what: str
    unit: str
    default: int
    variable: str

    def value(self) -> int:
        """The limit in force: the variable's whole number when set, else the default."""
        raw = os.environ.get(self.variable)
        if raw is None or raw == "":
            return self.default
        try:
            n = int(raw)
        except ValueError:
            n = 0
        if n < 1:
            raise UsageError(f"{self.variable}={raw!r} is not a whole number of {self.unit} of at least 1")
        return n

    def exceeded(self, size: int, what: str | None = None) -> str:
        """The sentence for ``size`` over the limit: what is too large (by default, what the
        limit bounds), and how to raise the limit."""
        return (
            f"{what or self.what} is {size:,} {self.unit}, more than the {self.value():,} agefacts reads "
            f"(set {self.variable} to raise the limit)"
        )

    def beyond(self, what: str | None = None) -> str:
        """The sentence for something larger than the limit whose size is not known (reading
        stopped at the limit: a file that may never end)."""
        return (
            f"{what or self.what} is larger than {self.value():,} {self.unit}, more than agefacts reads at once "
            f"(set {self.variable} to raise the limit)"
        )

    def check(self, size: int, what: str | None = None, error: type[Exception] = InputError) -> None:
        if size > self.value():
            raise error(self.exceeded(size, what))


FILE_MB = Limit("the file (or JSONL line)", "MB", 256, "AGEFACTS_MAX_INPUT_MB")
MESSAGE_CHARS = Limit("the message", "characters", 100_000, "AGEFACTS_MAX_MESSAGE_CHARS")
QUESTION_CHARS = Limit("the question", "characters", 4_000, "AGEFACTS_MAX_QUESTION_CHARS")
