"""A local stand-in for an OpenAI-compatible model endpoint, for measuring extraction and for
tests: a real HTTP server on 127.0.0.1 that answers ``POST .../chat/completions`` with what
its ``answer`` function says, after a fixed latency, and ``GET .../models`` with one model.
It counts what it was asked and how many requests it held at once, over time, so the mean
number of requests in flight is measured where it happens, on the server."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "Answer",
    "FakeModel",
    "completion",
    "empty_extraction",
    "main",
]

Answer = tuple[int, Any, dict[str, str]]
"""An HTTP status, a JSON body (or text), and headers."""


def completion(content: str, model: str = "fake-model") -> dict[str, Any]:
    """A chat completion whose first choice says ``content``."""
    return {
        "id": "fake",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
    }


def empty_extraction(body: dict[str, Any]) -> Answer:
    """An answer that extracts nothing: a well-formed reply with empty lists."""
    return 200, completion(json.dumps({"entities": [], "statements": [], "followups": []})), {}


class FakeModel:
    """``with FakeModel(answer, latency=0.2) as model: model.url`` serves until the block ends."""

    def __init__(self, answer: Callable[[dict[str, Any]], Answer] = empty_extraction, *, latency: float = 0.0):
        self.answer = answer
        self.latency = latency
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self._lock = threading.Lock()
        self._busy = 0.0  # the integral of in_flight over time, in request-seconds
        self._last = self._end = time.monotonic()
        self._first: float | None = None
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._httpd is not None, "start the server first"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> FakeModel:
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                if self.path.endswith("/stats"):
                    self._send(200, model.stats(), {})
                    return
                self._send(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]}, {})

            def do_POST(self) -> None:
                if self.path.endswith("/reset"):
                    model.reset()
                    self._send(200, {}, {})
                    return
                # In flight from the request's arrival until its answer is ready to send (once
                # it is sent, the client may send the next before this thread could count).
                model._enter()
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                    with model._lock:
                        model.requests.append(body)
                        model.headers.append(dict(self.headers))
                    if model.latency:
                        time.sleep(model.latency)
                    status, payload, headers = model.answer(body)
                finally:
                    model._leave()
                self._send(status, payload, headers)

            def _send(self, status: int, payload: Any, headers: dict[str, str]) -> None:
                data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout under test): nothing to answer

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        # A short poll interval: stop() waits up to one interval.
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()
        self.reset()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        self._httpd = None

    def reset(self) -> None:
        """Start counting again (requests, and the in-flight measure)."""
        with self._lock:
            self.requests.clear()
            self.headers.clear()
            self.most_in_flight = 0
            self._busy = 0.0
            self._last = self._end = time.monotonic()
            self._first = None

    def stats(self) -> dict[str, Any]:
        """What was asked since the last reset: requests, and the mean and most in flight."""
        mean = self.mean_in_flight()
        with self._lock:
            return {"requests": len(self.requests), "mean_in_flight": mean, "most_in_flight": self.most_in_flight}

    def mean_in_flight(self) -> float:
        """The mean number of requests held at once since the last :meth:`reset`, over the
        time from the first request's arrival to the last answer (a client's start-up
        before its first request is not the endpoint's idle time)."""
        with self._lock:
            self._tick()
            if self._first is None:
                return 0.0
            elapsed = self._end - self._first
            return self._busy / elapsed if elapsed > 0 else 0.0

    def _tick(self) -> None:
        now = time.monotonic()
        self._busy += self.in_flight * (now - self._last)
        self._last = now

    def _enter(self) -> None:
        with self._lock:
            self._tick()
            if self._first is None:
                self._first = self._last
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._tick()
            self.in_flight -= 1
            self._end = self._last


def main(argv: list[str] | None = None) -> None:
    """``python -m agefacts.fake_model --latency 0.2``: serve in a process of its own (so the
    client measured does not share an interpreter with it), print the URL, and serve until
    standard input closes. ``GET .../stats`` and ``POST .../reset`` read and restart its
    counts."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m agefacts.fake_model")
    parser.add_argument("--latency", type=float, default=0.2)
    args = parser.parse_args(argv)
    with FakeModel(latency=args.latency) as model:
        print(model.url, flush=True)
        sys.stdin.read()


if __name__ == "__main__":  # pragma: no cover
    main()
