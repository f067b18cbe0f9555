"""A LangChain retriever over a memory: ``AgefactsRetriever(memory=Memory(...), namespace="ann")``
answers a question with LangChain ``Document`` s, each citing the words it came from.

Optional: it needs ``langchain-core`` (``pip install 'agefacts[langchain]'``), imported only here.
The documents come in the order the memory ranks them: first what the question asks about that
was taken back since (``kind: correction``), then the facts valid at the time asked (``kind:
fact``: "user lives_in Oslo (from 2024-06 until 2025-03-01)"), then the messages that say what
the question asks (``kind: message``, what of them was taken back in ``withdrawn``). Each
document's ``metadata`` says where its words are: conversation, message, quote and times.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from .errors import UsageError

try:
    from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError:  # pragma: no cover - the optional extra is not installed
    raise UsageError(
        "agefacts.langchain needs langchain-core: pip install 'agefacts[langchain]' (or pip install langchain-core)"
    ) from None

from .memory import AsyncMemory, Memory
from .results import MemoryFact, Recall, TopicMessage
from .retrieve import valid_words

__all__ = ["AgefactsRetriever", "documents"]


class AgefactsRetriever(BaseRetriever):
    """Facts and messages of one namespace's memory for a question, as ``Document`` s.
    ``memory`` is a :class:`~agefacts.Memory` (``invoke``) or an :class:`~agefacts.AsyncMemory`
    (``ainvoke``); ``valid_at`` and ``known_at`` read the memory at other times (default now,
    or the time the question names)."""

    memory: Any
    namespace: str
    k: int = 10
    valid_at: Any = None
    known_at: Any = None

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        if not isinstance(self.memory, Memory):
            raise UsageError("AgefactsRetriever.invoke needs a Memory; with an AsyncMemory, use ainvoke")
        recall = self.memory.ask(
            query, namespace=self.namespace, k=self.k, valid_at=self.valid_at, known_at=self.known_at
        )
        return documents(recall)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        if isinstance(self.memory, AsyncMemory):
            recall = await self.memory.ask(
                query, namespace=self.namespace, k=self.k, valid_at=self.valid_at, known_at=self.known_at
            )
            return documents(recall)
        return await super()._aget_relevant_documents(query, run_manager=run_manager)


def documents(recall: Recall) -> list[Document]:
    """A recall as documents: corrections, facts, then messages (see the module)."""
    out = [Document(page_content=c, metadata={"kind": "correction"}) for c in recall.corrections]
    out += [_fact(f) for f in recall.facts]
    cited = {(f.namespace, f.citation.conversation, f.citation.message) for f in recall.facts}
    out += [_message(m) for m in recall.messages if (m.namespace, m.conversation, m.message) not in cited]
    return out


def _text(value: Any) -> Any:
    return value.isoformat() if isinstance(value, dt.date) else value


def _fact(f: MemoryFact) -> Document:
    what = f.object if f.object is not None else f.value
    since, until = f.valid_from_text, f.valid_until_text
    metadata = {
        "kind": "fact",
        "namespace": f.namespace,
        "subject": f.subject,
        "predicate": f.predicate,
        "object": f.object,
        "value": f.value,
        "valid_from": since,
        "valid_until": until,
        "recorded_at": _text(f.recorded_at),
        "quote": f.citation.quote,
        "conversation": f.citation.conversation,
        "message": f.citation.message,
        "said_at": _text(f.citation.at),
        "statement": f.statement,
    }
    return Document(page_content=f"{f.subject} {f.predicate} {what} ({valid_words(since, until)})", metadata=metadata)


def _message(m: TopicMessage) -> Document:
    metadata = {
        "kind": "message",
        "namespace": m.namespace,
        "conversation": m.conversation,
        "message": m.message,
        "who": m.name or m.speaker,
        "at": _text(m.at),
        "withdrawn": list(m.withdrawn),
    }
    return Document(page_content=m.text, metadata=metadata)
