"""The package's local model endpoint (a real HTTP server), answering from a script of replies
per message text; it records every request it gets."""

from __future__ import annotations

import json
import threading
import time

import pytest

from agefacts.fake_model import FakeModel

REPLY_LYON = {
    "entities": [{"handle": "e1", "type": "Place", "mention": "Lyon", "resolution": "resolved", "name": "Lyon"}],
    "statements": [
        {
            "subject": "user",
            "predicate": "lives_in",
            "object": "e1",
            "quote": "I live in Lyon",
            "polarity": "asserted",
            "tense": "current",
        }
    ],
    "followups": [],
}


def completion(content: str, model: str = "test-model-1") -> dict:
    return {
        "id": "x",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
    }


class Script:
    """What the server answers for each message text: a list of steps, used in order (the
    last one again once the others are used). A step is ("json", status, body[, headers]),
    or ("sleep", seconds): wait, then answer REPLY_LYON."""

    def __init__(self, steps: dict[str, list[tuple]], model: FakeModel):
        self.steps = {k: list(v) for k, v in steps.items()}
        self.model = model
        self.lock = threading.Lock()

    @property
    def requests(self) -> list[dict]:
        return self.model.requests

    @property
    def headers(self) -> list[dict]:
        return self.model.headers

    @property
    def most_in_flight(self) -> int:
        return self.model.most_in_flight

    def next(self, utterance: str) -> tuple:
        with self.lock:
            queue = self.steps.get(utterance) or [
                ("json", 200, completion(json.dumps({"entities": [], "statements": [], "followups": []})))
            ]
            return queue.pop(0) if len(queue) > 1 else queue[0]

    def answer(self, body: dict) -> tuple:
        utterance = (
            body["messages"][-1]["content"].split("Message to extract from:\n", 1)[1].rsplit("\n\nReply with", 1)[0]
        )
        step = self.next(utterance)
        if step[0] == "sleep":
            time.sleep(step[1])
            step = ("json", 200, completion(json.dumps(REPLY_LYON)))
        return step[1], step[2], step[3] if len(step) > 3 else {}


@pytest.fixture
def server():
    """``url, script = server(steps)``: the package's FakeModel, answering from a script."""
    holder: dict = {}
    with FakeModel(lambda body: holder["script"].answer(body)) as model:

        def use(steps):
            model.reset()
            holder["script"] = Script(steps, model)
            return model.url, holder["script"]

        yield use
