"""Reading conversations from files: folders, JSON files and JSONL files, one conversation
at a time so memory stays flat. A bad file or line becomes an :class:`InputError` in its
place, naming the file (and line), and the rest are still read."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .errors import InputError
from .limits import FILE_MB
from .models import Conversation, describe

__all__ = [
    "Raw",
    "input_size",
    "parse_conversation",
    "parse_text",
    "read_conversations",
    "read_texts",
]


_TOO_DEEP = (
    "its JSON nests arrays or objects too deeply to read (thousands of levels); "
    "a conversation is one JSON object with a list of turns"
)


def parse_conversation(data: Any, source: str) -> Conversation:
    if not isinstance(data, dict):
        raise InputError(f"{source}: a conversation is a JSON object, not {type(data).__name__}")
    try:
        return Conversation.model_validate(data)
    except RecursionError:
        raise InputError(f"{source}: {_TOO_DEEP}") from None
    except ValidationError as exc:
        cid = data.get("id")
        who = f" conversation {cid!r}" if isinstance(cid, str) else ""
        raise InputError(
            f"{source}{who} does not match the conversation schema: {describe(exc)} "
            "(see `agefacts schema conversation`)"
        ) from None


# Suffixes are compared case-blind: exports and dataset dumps write .JSON and .ndjson too.
_JSON = (".json",)
_JSONL = (".jsonl", ".ndjson")


def _is_jsonl(path: Path) -> bool:
    return path.suffix.lower() in _JSONL


def _files(paths: Iterable[str | Path]) -> Iterator[tuple[Path, InputError | None]]:
    """The files to read, in order; a folder holding none is an error in its place (a wrong
    folder would otherwise load nothing and say it succeeded)."""
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted(q for q in p.rglob("*") if q.suffix.lower() in _JSON + _JSONL and q.is_file())
            if not found:
                yield (
                    p,
                    InputError(
                        f"{p}: the folder holds no .json, .jsonl or .ndjson files (searched with its subfolders); "
                        "name the folder that holds the conversations, or the files themselves"
                    ),
                )
            for q in found:
                yield q, None
        else:
            yield p, None


def input_size(paths: Iterable[str | Path]) -> int:
    """The bytes of the files ``read_conversations`` would read (those that exist)."""
    return sum(f.stat().st_size for f, _ in _files(paths) if f.is_file())


Raw = tuple[str, "str | InputError", bool]
"""A conversation file's text, or a JSONL file's line, as read: its source (file, or file and
line), the text (or why it could not be read), and whether it is a JSONL line."""


def read_conversations(paths: Iterable[str | Path]) -> Iterator[tuple[str, Conversation | InputError]]:
    """Conversations from files, folders (``*.json``, ``*.jsonl``, ``*.ndjson``, any case,
    recursively, in name order) and JSONL files, one at a time so memory stays flat. A bad file
    or line, or a folder without such files, is yielded as an :class:`InputError` in its place,
    and the rest are still read."""
    for raw in read_texts(paths):
        yield from parse_text(raw)


def read_texts(paths: Iterable[str | Path]) -> Iterator[Raw]:
    """What :func:`read_conversations` parses, unparsed: each JSON file's text and each JSONL
    file's line (parsed elsewhere by :func:`parse_text`, a worker process for one). No more
    than :data:`agefacts.limits.FILE_MB` is read of one file or line (``/dev/zero`` ends)."""
    most = FILE_MB.value() * 2**20
    for path, error in _files(paths):
        if error is not None:
            yield str(path), error, False
            continue
        if not path.exists():
            yield str(path), InputError(f"{path}: no such file or folder"), False
            continue
        if _is_jsonl(path):
            try:
                fh = path.open(encoding="utf-8", errors="strict")
            except OSError as exc:
                yield str(path), InputError(f"{path}: cannot read it: {exc.strerror}"), True
                continue
            with fh:
                lineno = 0
                while True:
                    src = f"{path}:{lineno + 1}"
                    try:
                        line = fh.readline(most + 1)
                    except UnicodeDecodeError as exc:
                        yield src, InputError(f"{src}: not UTF-8 text ({exc.reason}); save the file as UTF-8"), True
                        break
                    if not line:
                        break
                    lineno += 1
                    if len(line) > most:
                        # Where its end is cannot be known without reading on, perhaps for ever.
                        refused = f"{src}: {FILE_MB.beyond('the line')}; a JSONL file holds one conversation a line"
                        yield src, InputError(refused + ", and the rest of the file is not read"), True
                        break
                    if not line.strip():
                        continue
                    yield src, line, True
            continue
        try:
            with path.open(encoding="utf-8") as fh:
                text = fh.read(most + 1)
            if len(text) > most:
                yield str(path), InputError(f"{path}: {FILE_MB.beyond('the file')}"), False
                continue
        except UnicodeDecodeError as exc:
            yield str(path), InputError(f"{path}: not UTF-8 text ({exc.reason}); save the file as UTF-8"), False
            continue
        except OSError as exc:
            yield str(path), InputError(f"{path}: cannot read it: {exc.strerror}"), False
            continue
        yield str(path), text, False


def parse_text(raw: Raw) -> Iterator[tuple[str, Conversation | InputError]]:
    """The conversations of one text :func:`read_texts` read (a JSON file may hold a list of
    them), each with its source, or why one is not a conversation."""
    source, text, line = raw
    if isinstance(text, InputError):
        yield source, text
        return
    if line:
        yield source, _parse_text(text, source)
        return
    try:
        data = json.loads(text)
    except RecursionError:
        yield source, InputError(f"{source}: {_TOO_DEEP}")
        return
    except ValueError as exc:
        yield source, InputError(f"{source}: not valid JSON ({exc}); a conversation file holds one JSON object")
        return
    items = data if isinstance(data, list) else [data]
    for i, item in enumerate(items):
        src = f"{source}[{i}]" if isinstance(data, list) else source
        try:
            yield src, parse_conversation(item, src)
        except InputError as exc:
            yield src, exc


def _parse_text(line: str, source: str) -> Conversation | InputError:
    try:
        data = json.loads(line)
    except RecursionError:
        return InputError(f"{source}: {_TOO_DEEP}")
    except ValueError as exc:
        return InputError(f"{source}: not valid JSON ({exc}); a JSONL file holds one conversation object per line")
    try:
        return parse_conversation(data, source)
    except InputError as exc:
        return exc
