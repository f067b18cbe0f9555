"""The LangChain retriever (agefacts.langchain), driven through langchain-core's own Runnable
interface as an agent framework calls it: facts and messages as Documents, with citations."""

from __future__ import annotations

import asyncio

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from agefacts import AgefactsRetriever
from agefacts.load import load_paths
from agefacts.memory import AsyncMemory, Memory

from ..helpers import EXAMPLES, ONTO


def test_the_retriever_answers_with_facts_and_messages_that_cite_their_words(db, dsn, graph_name):
    load_paths(db, [EXAMPLES], ONTO)
    with Memory(dsn, graph_name, ontology=ONTO) as memory:
        retriever = AgefactsRetriever(memory=memory, namespace="nina", valid_at="2024-10-01")
        assert isinstance(retriever, BaseRetriever)
        docs = retriever.invoke("Where do I live?")
    assert all(isinstance(d, Document) for d in docs)
    first = docs[0]
    assert first.page_content == "user lives_in Oslo (from 2024-06 until 2025-03-01)"
    assert first.metadata["kind"] == "fact"
    assert first.metadata["quote"] == "We moved to Oslo in June" and first.metadata["conversation"] == "nina-02"
    assert first.metadata["said_at"] == "2024-07-02T09:00:00+00:00"
    # The same through AsyncMemory and ainvoke, as an async agent calls it.

    async def on_async():
        async with AsyncMemory(dsn, graph_name, ontology=ONTO) as memory:
            return await AgefactsRetriever(memory=memory, namespace="nina", valid_at="2024-10-01").ainvoke(
                "Where do I live?"
            )

    assert asyncio.run(on_async()) == docs


def test_the_retriever_puts_what_was_taken_back_first(db, dsn, graph_name):
    from agefacts.load import Loader

    from .test_corrections import PEANUTS

    loader = Loader(db, ONTO)
    for c in PEANUTS:
        loader.load(c)
    with Memory(dsn, graph_name, ontology=ONTO) as memory:
        docs = AgefactsRetriever(memory=memory, namespace="eve").invoke("Can I eat peanuts?")
    assert docs[0].metadata == {"kind": "correction"} and "allergic_to peanuts was taken back" in docs[0].page_content
    said = next(d for d in docs if d.page_content.startswith("Please remember"))
    assert said.metadata["kind"] == "message" and said.metadata["withdrawn"]
