"""The statistical extractor: keyphrases per message, with no model and no network.

YAKE (the ``yake`` package, an optional extra: ``pip install 'agefacts[statistical]'``) scores
the candidate phrases of one message by how the message itself uses their words (position,
case, frequency, spread): no corpus, no training, and the same message gives the same phrases
whatever else is in the run. Its scores are lower for better phrases and unbounded; a
keyphrase's ``score`` here is ``1 / (1 + s)``, in (0, 1] with higher better, rounded to four
places so that the numbers written are the same on every machine.

The phrases are recorded on each user turn (``keyphrases``), beside what a model recorded
(``recorded``): the two extractors never take each other's work for their own, and either can
run first. Spans are made at load, by the grounding that finds quotes; a phrase YAKE reports
that the message does not hold as written (YAKE rejoins words split by line breaks) is
located there the same way, or dropped. Co-occurrence is counted at compile time
(:func:`agefacts.compile.cooccurrence`).

Determinism: output depends only on the text and the settings (sorted by score, then the
phrase), which a property test checks across runs and hash seeds.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import ExtractionError
from .extract import ConversationOutcome
from .ground import locate
from .models import Conversation, Keyphrase, Turn

__all__ = [
    "DEFAULT_MAX_WORDS",
    "DEFAULT_TOP",
    "StatisticalExtractor",
]

DEFAULT_TOP = 5
DEFAULT_MAX_WORDS = 3

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})
# What is left of a contraction split from its word: "'re", "'s", "n't".
_FRAGMENT = re.compile(r"['\u2018\u2019\u02bc]\w*|n['\u2019]t", re.IGNORECASE)


def _yake() -> Any:
    try:
        import yake  # type: ignore[import-untyped]
    except ImportError:
        raise ExtractionError(
            "the statistical extractor needs the 'yake' package: pip install 'agefacts[statistical]'"
        ) from None
    return yake


@dataclass
class StatisticalExtractor:
    """Keyphrases of every user turn by YAKE: at most ``top`` per message, each of at most
    ``max_words`` words, for texts in ``language`` (YAKE's stop-word lists: en, de, fr,
    es, pt, it, nl and more)."""

    top: int = DEFAULT_TOP
    max_words: int = DEFAULT_MAX_WORDS
    language: str = "en"
    _kw: Any = field(default=None, init=False, repr=False)
    _provenance: str = field(default="", init=False, repr=False)

    def __post_init__(self) -> None:
        if self.top < 1 or self.max_words < 1:
            raise ExtractionError(f"top ({self.top}) and max_words ({self.max_words}) must be at least 1")
        yake = _yake()
        self._kw = yake.KeywordExtractor(lan=self.language, n=self.max_words, top=self.top)
        # Read once: the package's metadata is read from disk (milliseconds, per message).
        version = importlib.metadata.version("yake")
        self._provenance = f"statistical:yake-{version}/top{self.top}-n{self.max_words}-{self.language}"

    @property
    def provenance(self) -> str:
        """``statistical:yake-<version>/top<top>-n<max words>-<language>``: what made the
        phrases, with the settings that change them."""
        return self._provenance

    def keyphrases(self, text: str) -> list[Keyphrase]:
        """The message's keyphrases, best first (ties by the phrase), each found in ``text``."""
        if not text.strip():
            return []
        try:
            # YAKE splits words at a typographic apostrophe ("don’t" -> "don", "’t"), making
            # keyphrases of the fragments ("n’t coming", "’re watching"); it reads the ASCII
            # apostrophe as part of the word. The fold keeps every offset (one character for
            # one), and a phrase is found in the message by the grounding, which folds them too.
            found = self._kw.extract_keywords(text.translate(_APOSTROPHES))
        except Exception as exc:  # noqa: BLE001 - the library's own failure, said as ours
            # None seen in 3,000 generated texts; if one comes, it is this message's alone.
            raise ExtractionError(f"YAKE failed on this message ({type(exc).__name__}: {exc})") from exc
        best: dict[str, float] = {}
        for phrase, s in found:
            if any(_FRAGMENT.fullmatch(w) for w in phrase.split()):
                continue
            span = locate(text, phrase)
            if span is None:
                continue
            score = round(1.0 / (1.0 + max(0.0, float(s))), 4)
            if score > best.get(span.quote, -1.0):
                best[span.quote] = score
        who = self.provenance
        return [
            Keyphrase(mention=m, score=sc, extractor=who) for m, sc in sorted(best.items(), key=lambda x: (-x[1], x[0]))
        ]

    def pending(self, conv: Conversation, redo: bool = False) -> int:
        return sum(1 for t in conv.turns if t.speaker == "user" and (redo or t.keyphrases is None))

    async def conversation(
        self,
        conv: Conversation,
        *,
        redo: bool = False,
        on_turn: Callable[[bool], None] | None = None,
        checkpoint: Callable[[int, Turn], None] | None = None,
    ) -> ConversationOutcome:
        turns: list[Turn] = []
        errors: list[str] = []
        kept = 0
        done = [0, 0]  # recorded, failed
        for i, turn in enumerate(conv.turns):
            if turn.speaker != "user":
                turns.append(turn)
            elif turn.keyphrases is not None and not redo:
                turns.append(turn)
                kept += 1
            else:
                try:
                    found: list[Keyphrase] | None = self.keyphrases(turn.text)
                except ExtractionError as exc:
                    # The turn keeps no keyphrases, so the next run tries it again.
                    errors.append(f"conversation {conv.id!r} turn {i}: {exc}")
                    found = None
                turns.append(turn.model_copy(update={"keyphrases": found}))
                done[found is None] += 1
                if found is not None and checkpoint is not None:
                    checkpoint(i, turns[-1])
                if on_turn is not None:
                    on_turn(found is not None)
        return ConversationOutcome(
            conv.model_copy(update={"turns": turns}), errors, kept, recorded=done[0], failed=done[1]
        )
