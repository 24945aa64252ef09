"""Deterministic keyword search over a small local corpus (a JSON file of short documents).

The same query always returns the same documents in the same order: a document's score is the
number of distinct query words it contains, title words counting double; ties go by id. No
network, no randomness, so the tool is safe to repeat (idempotent).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from gated_react.errors import validation_line

MAX_QUERY_CHARS = 200
MAX_RESULTS = 5
MAX_DOCUMENTS = 10_000
MAX_CORPUS_BYTES = 5_000_000
_WORD = re.compile(r"\w+", re.UNICODE)
# Words too common to tell documents apart.
_STOPWORDS = frozenset(
    {"a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "how", "in", "is", "it"}
    | {"of", "on", "or", "the", "to", "was", "what", "when", "which", "who"}
)


class Document(BaseModel):
    """One searchable document."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=100, pattern=r"^[\w.-]+$")
    title: str = Field(min_length=1, max_length=200)
    text: str = Field(min_length=1, max_length=2000)


class SearchArgs(BaseModel):
    # A constraint, not a validator: the schema the model sees (and the gate checks) keeps it.
    query: str = Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        pattern=r"\w",
        description="Keywords to look for (at least one word), e.g. 'Beijing weather today'",
    )
    top_k: int = Field(default=3, ge=1, le=MAX_RESULTS, description="How many results to return")


def words(text: str) -> set[str]:
    """Lower-cased word tokens (letters, digits, underscore; any script), common words left out."""
    return {word.casefold() for word in _WORD.findall(text)} - _STOPWORDS


def load_corpus(path: Path) -> tuple[Document, ...]:
    """The documents of a corpus file; ValueError with one clear line when it is not usable."""
    try:
        if path.stat().st_size > MAX_CORPUS_BYTES:
            raise ValueError(f"corpus {path} is larger than {MAX_CORPUS_BYTES} bytes")
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read corpus {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f"corpus {path} is not UTF-8 text") from None
    return parse_corpus(text, str(path))


def parse_corpus(text: str, source: str = "corpus") -> tuple[Document, ...]:
    """Documents from a JSON list of ``{"id", "title", "text"}`` objects; ValueError if not."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{source} is not valid JSON: {exc.msg} (line {exc.lineno})") from None
    try:
        docs = TypeAdapter(tuple[Document, ...]).validate_python(raw)
    except ValidationError as exc:
        raise ValueError(f"{source}: {validation_line(exc, root='top level', limit=1)}") from None
    ids = [doc.id for doc in docs]
    if len(ids) != len(set(ids)):
        raise ValueError(f"{source} has duplicate document ids")
    if not docs or len(docs) > MAX_DOCUMENTS:
        raise ValueError(f"{source} must hold 1 to {MAX_DOCUMENTS} documents")
    return docs


def rank(docs: tuple[Document, ...], query: str, top_k: int) -> list[Document]:
    """The best ``top_k`` documents for ``query``; documents without any query word are left out."""
    wanted = words(query)

    def score(doc: Document) -> int:
        return len(wanted & words(doc.text)) + 2 * len(wanted & words(doc.title))

    scored = [(score(doc), doc) for doc in docs]
    hits = sorted((item for item in scored if item[0] > 0), key=lambda item: (-item[0], item[1].id))
    return [doc for _, doc in hits[:top_k]]


class SearchCorpus(BaseTool):
    """Keyword search over the documents it was built with."""

    name: str = "search"
    description: str = (
        "Search the local reference documents by keywords; returns the best matches "
        f"(id, title, text), at most {MAX_RESULTS}."
    )
    args_schema: type[BaseModel] = SearchArgs
    metadata: dict[str, Any] | None = {"idempotent": True}  # noqa: RUF012 (pydantic field)
    documents: tuple[Document, ...]

    def _run(self, query: str, top_k: int = 3, **_: Any) -> dict[str, Any]:
        found = rank(self.documents, query, top_k)
        if not found:
            return {"query": query, "results": [], "note": "no document matches these words"}
        return {"query": query, "results": [doc.model_dump() for doc in found]}


def search_tool(corpus: Path, *, name: str = "search") -> SearchCorpus:
    """The search tool over one corpus file (read once, here)."""
    return SearchCorpus(documents=load_corpus(corpus), name=name)
