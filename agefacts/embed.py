"""Optional embeddings: messages found by meaning through any OpenAI-compatible
``/v1/embeddings`` endpoint (Ollama, vLLM, llama.cpp and TEI serve one), stored with
``pgvector`` and fused with the rest of ask's lists (:func:`agefacts.retrieve.fuse`).

Nothing here runs unless an :class:`Embedder` is given: without one, ask is what it was.
Vectors live in ``agefacts.message_vectors``, one per message and model, apart from the
graph: they depend on a model, so the graph (and its digest) never holds them. A message's
vector is made the first time its namespace is searched with that model (only messages that
have none for their text as it is now are sent), and when some were made, the vectors of
messages gone since (forgotten, or replaced by a shorter conversation) are dropped; one left
meanwhile is never returned, since a message is read from the graph by its key. The embedded engine loads ``pgvector``; a server needs
it installed (``CREATE EXTENSION vector``, as a superuser, once).

How good the messages found are depends on the model: a small static model measured below a
plain BM25 on LoCoMo, which is why words are searched first and meaning is one list of four.
"""

from __future__ import annotations

import json
import math
import os
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from .asyncdb import AsyncDatabase
from .db import Database
from .errors import DatabaseError, EmbeddingError, EndpointDown, UsageError

__all__ = [
    "DEFAULT_BATCH",
    "Embedder",
    "embed_missing",
    "embed_missing_async",
    "embedder_from_env",
    "nearest_messages",
    "nearest_messages_async",
]

DEFAULT_BATCH = 64


@dataclass(frozen=True)
class Embedder:
    """An OpenAI-compatible embeddings endpoint: ``url`` is its base (``.../v1``), ``model``
    the model to ask for; the key, when it needs one, from ``api_key``."""

    url: str
    model: str
    api_key: str | None = None
    timeout: float = 60.0
    batch: int = DEFAULT_BATCH

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise UsageError(
                f"the embeddings URL {self.url!r} is not an http(s) URL (for example http://127.0.0.1:11434/v1)"
            )
        if not self.model:
            raise UsageError("embeddings need a model name (--embed-model or AGEFACTS_EMBED_MODEL)")

    def _request(self, texts: Sequence[str]) -> tuple[str, dict[str, Any], dict[str, str]]:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return self.url.rstrip("/") + "/embeddings", {"model": self.model, "input": list(texts)}, headers

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        out: list[list[float]] = []
        with httpx.Client(timeout=self.timeout) as client:
            for i in range(0, len(texts), self.batch):
                part = texts[i : i + self.batch]
                url, body, headers = self._request(part)
                try:
                    reply = client.post(url, json=body, headers=headers)
                except httpx.HTTPError as exc:
                    raise EndpointDown(f"the embeddings endpoint {self.url} is not answering ({exc})") from None
                out += self._vectors(reply, len(part))
        return out

    async def embed_async(self, texts: Sequence[str]) -> list[list[float]]:
        """:meth:`embed` without blocking the event loop."""
        out: list[list[float]] = []
        async with httpx.AsyncClient(timeout=self.timeout) as client:
            for i in range(0, len(texts), self.batch):
                part = texts[i : i + self.batch]
                url, body, headers = self._request(part)
                try:
                    reply = await client.post(url, json=body, headers=headers)
                except httpx.HTTPError as exc:
                    raise EndpointDown(f"the embeddings endpoint {self.url} is not answering ({exc})") from None
                out += self._vectors(reply, len(part))
        return out

    def _vectors(self, reply: httpx.Response, n: int) -> list[list[float]]:
        where = f"the embeddings endpoint {self.url}"
        if reply.status_code != 200:
            raise EmbeddingError(f"{where} answered HTTP {reply.status_code}: {reply.text[:200]}")
        try:
            data = reply.json()["data"]
            ordered = sorted(data, key=lambda d: d.get("index", 0))
            vectors = [[float(x) for x in d["embedding"]] for d in ordered]
        except (ValueError, KeyError, TypeError, AttributeError):
            raise EmbeddingError(f"{where} did not answer with embeddings ({reply.text[:200]!r})") from None
        if len(vectors) != n or not vectors or len({len(v) for v in vectors}) != 1 or not vectors[0]:
            raise EmbeddingError(f"{where} answered {len(vectors)} vectors of unequal or no length for {n} texts")
        if not all(math.isfinite(x) for v in vectors for x in v):
            raise EmbeddingError(f"{where} answered a vector that is not all finite numbers")
        return vectors


def embedder_from_env(url: str | None = None, model: str | None = None) -> Embedder | None:
    """The embedder the flags or ``AGEFACTS_EMBED_URL`` / ``AGEFACTS_EMBED_MODEL`` (key:
    ``AGEFACTS_EMBED_API_KEY``) name, or None when no URL is given."""
    url = url or os.environ.get("AGEFACTS_EMBED_URL")
    if not url:
        return None
    return Embedder(
        url, model or os.environ.get("AGEFACTS_EMBED_MODEL") or "", os.environ.get("AGEFACTS_EMBED_API_KEY")
    )


# -- storage ------------------------------------------------------------------------------------
_STORE = [
    "CREATE EXTENSION IF NOT EXISTS vector",
    "CREATE TABLE IF NOT EXISTS agefacts.message_vectors ("
    " graph text NOT NULL, model text NOT NULL, message text NOT NULL, namespace text NOT NULL,"
    " text_md5 text NOT NULL, embedding vector NOT NULL, PRIMARY KEY (graph, model, message))",
    "CREATE INDEX IF NOT EXISTS message_vectors_namespace ON agefacts.message_vectors (graph, model, namespace)",
    # Kept to tenants as the logs are, from the moment it exists (it had no policy at all).
    "SELECT agefacts.protect_table('message_vectors')",
]
_NO_VECTOR = (
    "embeddings need the pgvector extension in this database: install it on the server and run "
    "CREATE EXTENSION vector as a superuser once (the embedded engine has it)"
)

# The namespace's messages that have no vector for the model of their text as it is now (the
# Message label's own key and text: a replaced conversation keeps its messages' keys), and the
# vectors whose message is gone or says something else now.
_MISSING = (
    "SELECT ag_catalog.agtype_object_field_text(m.properties, 'k'),"
    " ag_catalog.agtype_object_field_text(m.properties, 'namespace'),"
    " coalesce(ag_catalog.agtype_object_field_text(m.properties, 'text'), '')"
    ' FROM {graph}."Message" m'
    " WHERE (%(ns)s::text IS NULL OR agefacts.message_namespace(m.properties) = %(ns)s::text)"
    " AND NOT EXISTS (SELECT 1 FROM agefacts.message_vectors v WHERE v.graph = %(graph)s AND v.model = %(model)s"
    " AND v.message = ag_catalog.agtype_object_field_text(m.properties, 'k')"
    " AND v.text_md5 = md5(coalesce(ag_catalog.agtype_object_field_text(m.properties, 'text'), '')))"
    " ORDER BY 1"
)
_STALE = (
    "DELETE FROM agefacts.message_vectors v WHERE v.graph = %(graph)s AND v.model = %(model)s"
    " AND (%(ns)s::text IS NULL OR v.namespace = %(ns)s::text)"
    ' AND NOT EXISTS (SELECT 1 FROM {graph}."Message" m'
    " WHERE ag_catalog.agtype_access_operator(m.properties, '\"k\"'::ag_catalog.agtype)"
    " = to_json(v.message)::text::ag_catalog.agtype"
    " AND md5(coalesce(ag_catalog.agtype_object_field_text(m.properties, 'text'), '')) = v.text_md5)"
)
_INSERT = (
    "INSERT INTO agefacts.message_vectors (graph, model, message, namespace, text_md5, embedding)"
    " SELECT %(graph)s, %(model)s, r.k, r.ns, md5(r.t), r.v::vector"
    " FROM jsonb_to_recordset(%(rows)s::jsonb) AS r(k text, ns text, t text, v text)"
    " ON CONFLICT (graph, model, message) DO UPDATE SET namespace = EXCLUDED.namespace,"
    " text_md5 = EXCLUDED.text_md5, embedding = EXCLUDED.embedding"
)
_NEAREST = (
    "SELECT message, embedding <=> %(q)s::vector AS distance FROM agefacts.message_vectors"
    " WHERE graph = %(graph)s AND model = %(model)s AND (%(ns)s::text IS NULL OR namespace = %(ns)s::text)"
    " ORDER BY distance, message LIMIT %(n)s"
)


def _sql(text: str, db: Database | AsyncDatabase) -> Any:
    from psycopg import sql

    return sql.SQL(text).format(graph=sql.Identifier(db.graph))


def _vector(v: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in v) + "]"


def _has_messages(labels: dict[str, str]) -> bool:
    return labels.get("Message") == "v"


# Connections that have found the vector table in place: it is looked for once, not on every
# question (its DDL needs rights a reading role does not have, even when the table exists).
_STORE_FOUND: weakref.WeakSet[Database | AsyncDatabase] = weakref.WeakSet()
_STORE_EXISTS = "SELECT to_regclass('agefacts.message_vectors') IS NOT NULL"


def embed_missing(db: Database, embedder: Embedder, namespace: str | None) -> int:
    """Make the vectors the namespace's messages lack (every namespace's when None), and drop
    those of messages that are gone or changed; how many were made."""
    if not _has_messages(db.labels()):
        return 0
    params = {"graph": db.graph, "model": embedder.model, "ns": namespace}
    try:
        if db not in _STORE_FOUND:
            if not db.table(_STORE_EXISTS).rows[0][0]:
                for stmt in _STORE:
                    db.table(stmt)
            _STORE_FOUND.add(db)
        missing = db.table(_sql(_MISSING, db), params).rows
        if missing:  # the namespace changed: what it no longer says goes now
            db.table(_sql(_STALE, db), params)
    except DatabaseError as exc:
        raise EmbeddingError(_NO_VECTOR if "vector" in str(exc) else f"storing embeddings: {exc}") from None
    if not missing:
        return 0
    vectors = embedder.embed([t for _, _, t in missing])
    db.table(_INSERT, _rows(params, missing, vectors))
    return len(missing)


async def embed_missing_async(db: AsyncDatabase, embedder: Embedder, namespace: str | None) -> int:
    """:func:`embed_missing` on an asynchronous connection."""
    if not _has_messages(await db.labels()):
        return 0
    params = {"graph": db.graph, "model": embedder.model, "ns": namespace}
    try:
        if db not in _STORE_FOUND:
            if not (await db.table(_STORE_EXISTS)).rows[0][0]:
                for stmt in _STORE:
                    await db.table(stmt)
            _STORE_FOUND.add(db)
        missing = (await db.table(_sql(_MISSING, db), params)).rows
        if missing:
            await db.table(_sql(_STALE, db), params)
    except DatabaseError as exc:
        raise EmbeddingError(_NO_VECTOR if "vector" in str(exc) else f"storing embeddings: {exc}") from None
    if not missing:
        return 0
    vectors = await embedder.embed_async([t for _, _, t in missing])
    await db.table(_INSERT, _rows(params, missing, vectors))
    return len(missing)


def _rows(params: dict[str, Any], missing: list[tuple[Any, ...]], vectors: list[list[float]]) -> dict[str, Any]:
    rows = [{"k": k, "ns": ns, "t": t, "v": _vector(v)} for (k, ns, t), v in zip(missing, vectors, strict=True)]
    return {**params, "rows": json.dumps(rows)}


def nearest_messages(db: Database, embedder: Embedder, namespace: str | None, question: str, n: int) -> list[str]:
    """The keys of the ``n`` messages nearest the question in meaning (cosine distance),
    nearest first, their vectors made first where missing."""
    embed_missing(db, embedder, namespace)
    (q,) = embedder.embed([question])
    params = {"graph": db.graph, "model": embedder.model, "ns": namespace, "q": _vector(q), "n": n}
    try:
        return [r[0] for r in db.table(_NEAREST, params).rows]
    except DatabaseError as exc:
        raise EmbeddingError(f"searching embeddings: {exc} (a model's vectors all have one length)") from None


async def nearest_messages_async(
    db: AsyncDatabase, embedder: Embedder, namespace: str | None, question: str, n: int
) -> list[str]:
    """:func:`nearest_messages` on an asynchronous connection."""
    await embed_missing_async(db, embedder, namespace)
    (q,) = await embedder.embed_async([question])
    params = {"graph": db.graph, "model": embedder.model, "ns": namespace, "q": _vector(q), "n": n}
    try:
        return [r[0] for r in (await db.table(_NEAREST, params)).rows]
    except DatabaseError as exc:
        raise EmbeddingError(f"searching embeddings: {exc} (a model's vectors all have one length)") from None
