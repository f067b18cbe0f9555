"""A real local HTTP server that answers like an OpenAI-compatible model endpoint, from a
script of replies per message text; it records every request it gets."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

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
    """What the server answers for each message text: a list of steps, used in order."""

    def __init__(self, steps: dict[str, list[tuple]]):
        self.steps = {k: list(v) for k, v in steps.items()}
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.lock = threading.Lock()
        self.in_flight = 0
        self.most_in_flight = 0

    def next(self, utterance: str) -> tuple:
        with self.lock:
            queue = self.steps.get(utterance) or [
                ("json", 200, completion(json.dumps({"entities": [], "statements": [], "followups": []})))
            ]
            return queue.pop(0) if len(queue) > 1 else queue[0]


@pytest.fixture
def server():
    holder: dict = {}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # keep test output quiet
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            script: Script = holder["script"]
            with script.lock:
                script.requests.append(body)
                script.headers.append(dict(self.headers))
            utterance = (
                body["messages"][-1]["content"].split("Message to extract from:\n", 1)[1].rsplit("\n\nReply with", 1)[0]
            )
            step = script.next(utterance)
            kind = step[0]
            with script.lock:
                script.in_flight += 1
                script.most_in_flight = max(script.most_in_flight, script.in_flight)
            try:
                if kind == "sleep":
                    time.sleep(step[1])
                    step = ("json", 200, completion(json.dumps(REPLY_LYON)))
            finally:
                with script.lock:
                    script.in_flight -= 1
            status, payload = step[1], step[2]
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                if len(step) > 3:
                    for k, v in step[3].items():
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except BrokenPipeError:
                pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # A short poll interval: shutdown() waits up to one interval (0.5 s by default) per test.
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()

    def use(steps):
        holder["script"] = Script(steps)
        return f"http://127.0.0.1:{httpd.server_address[1]}/v1", holder["script"]

    yield use
    httpd.shutdown()
    httpd.server_close()
