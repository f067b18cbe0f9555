"""Recordings: a conversation with what the model returned for each user turn, written to a
folder as one JSON file a conversation (atomically), with a journal of each turn as it is
answered, so that an interrupted run is resumed rather than paid for again."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .errors import AgeFactsError
from .models import Conversation, Turn

__all__ = ["Journal", "recording_name", "resumed", "write_atomically", "write_recording"]


def recording_name(conv: Conversation) -> str:
    """The file name of a conversation's recording: readable (its namespace and id, every
    character a file name should not hold replaced by ``_``, cut to a length every file system
    takes) and unique per (namespace, id) by construction (a hash of the two ends it), so
    ``trip/2023`` and ``trip_2023``, or one id in two namespaces, never share a file."""

    def safe(text: str, n: int) -> str:
        # At most n bytes of UTF-8: file systems limit a name's bytes (255), not its letters.
        kept = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text)
        return kept.encode("utf-8")[:n].decode("utf-8", "ignore")

    h = hashlib.sha256(f"{conv.namespace}\0{conv.id}".encode()).hexdigest()[:10]
    return f"{safe(conv.namespace, 60)}--{safe(conv.id, 100)}-{h}.json"


def write_recording(conv: Conversation, folder: Path) -> Path:
    """Write a conversation with its recordings into ``folder``, atomically (a temporary file
    renamed over the name), so an interrupted run never leaves half a file."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / recording_name(conv)
    text = json.dumps(conv.model_dump(mode="json", exclude_none=True), ensure_ascii=False, indent=2) + "\n"
    write_atomically(path, text)
    return path


def write_atomically(path: str | Path, text: str) -> None:
    """Write a file whole or not at all: a temporary file beside it, renamed over the name."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=path.suffix + ".part")
    except OSError as exc:
        raise AgeFactsError(f"cannot write {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise AgeFactsError(f"cannot write {path}: {exc.strerror}") from None
        raise


class Journal:
    """Each turn recorded for one conversation, appended to ``<recording>.journal`` beside the
    recording as soon as it is answered, so that a run killed inside a long conversation (a
    dialogue of hundreds of turns is written whole only when it is done) loses at most the
    requests in flight. :func:`resumed` reads it; it is removed once the recording is
    written. A line cut off by the kill is passed over."""

    def __init__(self, folder: Path, conv: Conversation):
        self.path = folder / (recording_name(conv) + ".journal")
        self._file: Any = None

    def write(self, i: int, turn: Turn) -> None:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
        line = {"turn": i, **turn.model_dump(mode="json", exclude_none=True)}
        self._file.write(json.dumps(line, ensure_ascii=False) + "\n")
        self._file.flush()  # to the operating system: a killed process loses nothing written

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()

    def turns(self) -> dict[int, Turn]:
        """What the journal holds, by turn position (a later line for a turn wins)."""
        out: dict[int, Turn] = {}
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except OSError:
            return out
        for line in lines:
            try:
                data = json.loads(line)
                i = int(data.pop("turn"))
                out[i] = Turn.model_validate(data)
            except (ValueError, TypeError, KeyError, ValidationError):
                continue  # the last line of a killed run may be cut off
        return out


def resumed(conv: Conversation, folder: Path) -> Conversation:
    """``conv`` with the recordings an earlier run left in ``folder`` for its turns (its
    recording, then its journal): a turn takes an earlier recording when that recording is of
    the same turn (same position, speaker, text and time) and has no error, so an interrupted
    run, or a conversation that grew, is extended rather than paid for again; a turn whose
    earlier recording failed keeps that error until it is asked again."""
    path = folder / recording_name(conv)
    earlier: dict[int, Turn] = {}
    model = None
    try:
        whole = Conversation.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    else:
        if (whole.namespace, whole.id) == (conv.namespace, conv.id):
            earlier = dict(enumerate(whole.turns))
            model = whole.model
    earlier.update(Journal(folder, conv).turns())
    turns = list(conv.turns)
    for i, turn in enumerate(turns):
        old = earlier.get(i)
        if old is None:
            continue
        same = (old.speaker, old.text, old.at) == (turn.speaker, turn.text, turn.at)
        if same and turn.recorded is None and old.recorded is not None and old.error is None:
            turns[i] = turns[i].model_copy(update={"recorded": old.recorded, "error": None})
        elif same and turn.recorded is None and turn.error is None and old.error is not None:
            # Its earlier failure, kept until it is asked again: a run that stops before it
            # wrote it with neither a recording nor an error, and a load counted it as nothing.
            turns[i] = turns[i].model_copy(update={"error": old.error})
        if same and turn.keyphrases is None and old.keyphrases is not None:
            turns[i] = turns[i].model_copy(update={"keyphrases": old.keyphrases})
    return conv.model_copy(update={"turns": turns, "model": conv.model or model})
