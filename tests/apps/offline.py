"""Offline stand-ins a program imports where its tutorial reaches a hosted service."""

from __future__ import annotations

import re

from langchain_core.documents import Document


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


class TinyVectorStore:
    """The part of a vector store the RAG tutorial uses (``add_documents``,
    ``similarity_search``), scoring by shared words: no embeddings service, no numpy (which
    ``InMemoryVectorStore`` needs and this environment does not install)."""

    def __init__(self) -> None:
        self._documents: list[Document] = []

    def add_documents(self, documents: list[Document]) -> list[str]:
        self._documents.extend(documents)
        return [str(i) for i in range(len(self._documents) - len(documents), len(self._documents))]

    def similarity_search(self, query: str, k: int = 4) -> list[Document]:
        asked = _words(query)
        ranked = sorted(
            self._documents, key=lambda doc: len(asked & _words(doc.page_content)), reverse=True
        )
        return ranked[:k]
