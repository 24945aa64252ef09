from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gated_react import Policy, build_graph
from gated_react._engine.execution.tool_args import check_args
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.search import Document, SearchCorpus, load_corpus, rank, search_tool

DOCS = (
    Document(id="b", title="Beijing weather", text="Sunny, high 31 °C."),
    Document(id="a", title="Shanghai weather", text="Cloudy, high 29 °C."),
    Document(id="c", title="K2", text="K2 is 8,611 metres high; Beijing is far away."),
)


def write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "corpus.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_ranking_counts_query_words_titles_double_and_ties_go_by_id() -> None:
    assert [d.id for d in rank(DOCS, "Beijing weather", 3)] == ["b", "a", "c"]
    assert [d.id for d in rank(DOCS, "weather", 3)] == ["a", "b"]  # tie: by id
    assert [d.id for d in rank(DOCS, "BEIJING", 1)] == ["b"]
    assert rank(DOCS, "Tokyo", 3) == []
    assert rank(DOCS, "what is the", 3) == []  # common words match nothing


def test_the_same_query_gives_the_same_answer() -> None:
    tool = SearchCorpus(documents=DOCS)
    first = tool.invoke({"query": "high weather", "top_k": 2})
    assert first == tool.invoke({"query": "high weather", "top_k": 2})
    assert [r["id"] for r in first["results"]] == ["a", "b"]
    assert tool.metadata == {"idempotent": True}


def test_no_match_says_so() -> None:
    out = SearchCorpus(documents=DOCS).invoke({"query": "Tokyo"})
    assert out == {"query": "Tokyo", "results": [], "note": "no document matches these words"}


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({"query": ""}, "query"),
        ({"query": "?!"}, "should match pattern"),
        ({"query": "x" * 201}, "query"),
        ({"query": "k2", "top_k": 0}, "top_k"),
        ({"query": "k2", "top_k": 6}, "top_k"),
        ({"query": "k2", "limit": 2}, "unknown arguments"),
        ({}, "query"),
    ],
)
def test_arguments_are_checked_before_the_tool_runs(args: dict[str, Any], problem: str) -> None:
    tool = SearchCorpus(documents=DOCS)
    found = check_args(tool, args)
    assert found is not None
    assert problem in found
    out = build_graph(
        ScriptedChatModel(replies=[call("search", **args)]), [tool], policy=Policy()
    ).invoke({"goal": "find it"})
    assert out["stop_reason"] == "tool_bad_args:search"


def test_a_corpus_file_loads(tmp_path: Path) -> None:
    path = write(tmp_path, [d.model_dump() for d in DOCS])
    tool = search_tool(path)
    assert tool.name == "search"
    assert tool.documents == DOCS
    assert load_corpus(path) == DOCS


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ("{not json", "not valid JSON"),
        ({"id": "a"}, "top level"),
        ([], "1 to"),
        ([{"id": "a", "title": "t"}], "0.text: Field required"),
        ([{"id": "a", "title": "t", "text": "x", "extra": 1}], "0.extra"),
        ([{"id": "a b", "title": "t", "text": "x"}], "0.id"),
        ([{"id": "a", "title": "t", "text": "x"}, {"id": "a", "title": "u", "text": "y"}], "dup"),
    ],
)
def test_a_bad_corpus_is_one_clear_line(tmp_path: Path, data: Any, problem: str) -> None:
    with pytest.raises(ValueError, match=problem) as caught:
        load_corpus(write(tmp_path, data))
    assert "\n" not in str(caught.value)


def test_a_missing_or_binary_corpus_is_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot read corpus"):
        load_corpus(tmp_path / "absent.json")
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ValueError, match="not UTF-8"):
        load_corpus(binary)
