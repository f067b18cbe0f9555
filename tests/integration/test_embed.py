"""Optional embeddings: a real local HTTP server speaking the OpenAI embeddings API, vectors
stored with pgvector, the nearest messages fused into ask; without an embedder, nothing."""

from __future__ import annotations

import asyncio
import json
import math
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agefacts.cli import main
from agefacts.embed import Embedder, EmbeddingError, embed_missing
from agefacts.errors import EndpointDown
from agefacts.load import Loader
from agefacts.memory import AsyncMemory, Memory
from agefacts.retrieve import ask

from ..helpers import ONTO, conversation

# A toy model with meaning: words of one concept share a dimension, so "car" is near
# "automobile" though no word is shared.
CONCEPTS = [{"car", "automobile", "vehicle"}, {"doctor", "physician", "clinic"}, {"dog", "puppy", "hound"}]


def _vector(text: str) -> list[float]:
    v = [0.0] * 8
    for w in re.findall(r"\w+", text.lower()):
        hit = [i for i, c in enumerate(CONCEPTS) if w in c]
        if hit:
            v[hit[0]] += 1.0
        else:
            v[3 + sum(map(ord, w)) % 5] += 0.1
    n = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / n for x in v]


@pytest.fixture
def embeddings():
    """A local embeddings endpoint; ``.inputs`` holds every text it was sent, ``.fail`` makes
    it answer what it is set to (a status and a body)."""
    seen: list[str] = []
    fail: list[tuple[int, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the standard library's name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            assert self.path == "/v1/embeddings" and body["model"] == "toy"
            seen.extend(body["input"])
            status, reply = (
                fail[0]
                if fail
                else (
                    200,
                    json.dumps({"data": [{"index": i, "embedding": _vector(t)} for i, t in enumerate(body["input"])]}),
                )
            )
            data = reply.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()

    class Endpoint:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        inputs = seen
        failing = fail

    yield Endpoint
    httpd.shutdown()
    httpd.server_close()


SAID = ["I bought a new automobile last week.", "My puppy chewed the sofa.", "We met at the clinic downtown."]


def _load(db, texts=SAID, cid="e-1"):
    conv = conversation(cid, [{"speaker": "user", "text": t} for t in texts], namespace="em")
    Loader(db, ONTO).load(conv)


def test_without_an_embedder_nothing_changes_and_with_one_meaning_finds_what_words_cannot(db, embeddings):
    _load(db)
    plain = ask(db, "What car did I get?", ONTO, namespace="em")
    assert plain.messages == [] and plain.reason
    assert embeddings.inputs == []  # never asked
    embedder = Embedder(embeddings.url, "toy")
    found = ask(db, "What car did I get?", ONTO, namespace="em", k=3, embedder=embedder)
    assert found.messages[0]["text"] == SAID[0]
    assert sorted(embeddings.inputs) == sorted([*SAID, "What car did I get?"])
    # Made once: a second question sends only itself.
    embeddings.inputs.clear()
    again = ask(db, "Which physician?", ONTO, namespace="em", k=1, embedder=embedder)
    assert again.messages[0]["text"] == SAID[2] and embeddings.inputs == ["Which physician?"]


def test_a_replaced_message_loses_its_vector_and_a_new_one_gets_one(db, embeddings):
    embedder = Embedder(embeddings.url, "toy")
    _load(db)
    assert embed_missing(db, embedder, "em") == 3
    _load(db, ["My puppy chewed the sofa."], cid="e-1")  # the conversation replaced, shorter
    embeddings.inputs.clear()
    assert embed_missing(db, embedder, "em") == 1  # its one message, now at ordinal 0
    (count,) = db.table("SELECT count(*) FROM agefacts.message_vectors WHERE graph = %s", (db.graph,)).rows[0]
    assert count == 1
    assert ask(db, "a car?", ONTO, namespace="em", embedder=embedder).messages[0]["text"] == "My puppy chewed the sofa."


def test_an_endpoint_that_is_down_or_answers_nonsense_is_said_so(db, embeddings):
    _load(db)
    with pytest.raises(EndpointDown, match="not answering"):
        ask(db, "a car?", ONTO, namespace="em", embedder=Embedder("http://127.0.0.1:9/v1", "toy"))
    embeddings.failing.append((500, "overloaded"))
    with pytest.raises(EmbeddingError, match="HTTP 500: overloaded"):
        ask(db, "a car?", ONTO, namespace="em", embedder=Embedder(embeddings.url, "toy"))
    embeddings.failing[0] = (200, json.dumps({"data": [{"embedding": ["x"]}]}))
    with pytest.raises(EmbeddingError, match="did not answer with embeddings"):
        ask(db, "a car?", ONTO, namespace="em", embedder=Embedder(embeddings.url, "toy"))
    assert len(embeddings.inputs) >= 2  # the faults were met, not skipped


def test_memory_async_memory_and_the_command_line_use_it(dsn, graph_name, embeddings, cli_env, tmp_path, capsys):
    embedder = Embedder(embeddings.url, "toy")
    with Memory(dsn, graph_name, embedder=embedder) as memory:
        _load(memory.db)
        assert memory.ask("my car?", namespace="em").messages[0].text == SAID[0]

    async def run() -> str:
        async with AsyncMemory(dsn, graph_name, embedder=embedder) as memory:
            return (await memory.ask("the hound?", namespace="em")).messages[0].text

    assert asyncio.run(run()) == SAID[1]
    argv = ["ask", "my vehicle?", "--namespace", "em", "--graph", graph_name, "--format", "json"]
    assert main([*argv, "--embed-url", embeddings.url, "--embed-model", "toy"]) == 0
    assert json.loads(capsys.readouterr().out)["messages"][0]["text"] == SAID[0]
    assert main([*argv, "--embed-url", embeddings.url]) == 2  # no model named
    assert "embeddings need a model name" in capsys.readouterr().err


def test_a_tenant_reads_no_other_namespaces_vectors(db, embeddings):
    """message_vectors had no policy: a tenant read every namespace's vectors, and its own
    ask over every namespace deleted the others'."""
    import uuid

    from agefacts.graphadmin import age_version_at_least
    from agefacts.provision import setup

    if not age_version_at_least(db.age_version, (1, 7, 0)):
        return  # setup refuses tenants there (test_tenants holds it)
    embedder = Embedder(embeddings.url, "toy")
    for ns in ("em", "other"):
        conv = conversation(f"{ns}-1", [{"speaker": "user", "text": t} for t in SAID], namespace=ns)
        Loader(db, ONTO).load(conv)
        assert embed_missing(db, embedder, ns) == 3
    role = "tenant_" + uuid.uuid4().hex[:8]
    db.execute(f'CREATE ROLE "{role}" LOGIN')
    try:
        setup(db, ONTO, tenants=[(role, "em")])
        db.role = role
        try:
            seen = db.execute("SELECT DISTINCT namespace FROM agefacts.message_vectors WHERE graph = %s", (db.graph,))
            assert seen == [("em",)]
            db.execute("DELETE FROM agefacts.message_vectors WHERE graph = %s", (db.graph,))
        finally:
            db.role = None
        left = db.execute(
            "SELECT namespace, count(*) FROM agefacts.message_vectors WHERE graph = %s GROUP BY 1", (db.graph,)
        )
        assert left == [("other", 3)]  # its own went; the other namespace's stayed
    finally:
        db.execute("DELETE FROM agefacts.tenants WHERE role = %s", (role,))
        db.execute(f'DROP OWNED BY "{role}"')
        db.execute(f'DROP ROLE "{role}"')
