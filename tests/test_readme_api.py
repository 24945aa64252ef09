"""The tools guide and the result table (getting started) say what the code does: every import
the toolkit table shows works and gives the tools it names, the guide's code runs as written,
and every key a trace entry can carry is documented."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import BaseTool, tool

from gated_react import Policy, build_graph
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools import TOOLKITS

from .support.docs import REPO, all_text, page, python_blocks, section
from .support.results import invoked

FILES = REPO / "src" / "gated_react" / "examples" / "files"
SPAN = re.compile(r"`([^`]+)`")
NAME = re.compile(r"[a-z_][a-z0-9_]*")
CALL = re.compile(r"(\w+)\((.*)\)")


def _table(section: str, header: str) -> list[list[str]]:
    """The rows of the Markdown table whose header row starts with ``header``, as cells."""
    lines = section.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def _toolkit_rows() -> list[list[str]]:
    rows = _table(page("guides/tools.md"), "| toolkit | import |")
    assert rows, "the tools guide has no toolkit table"
    return rows


def _imported(cell: str) -> Any:
    (statement,) = SPAN.findall(cell)
    assert statement.startswith("from gated_react"), statement
    scope: dict[str, Any] = {}
    exec(statement, scope)
    return scope[statement.rsplit(" import ", 1)[1]]


def _fresh_tool() -> BaseTool:
    @tool
    def ping() -> str:
        """Answers pong."""
        return "pong"

    return ping


def _as_tools(value: Any) -> list[BaseTool]:
    tools = [value] if isinstance(value, BaseTool) else list(value)
    assert all(isinstance(item, BaseTool) for item in tools), tools
    return tools


def test_every_import_in_the_toolkit_table_gives_what_it_says(tmp_path: Path) -> None:
    for kind, where, gives in _toolkit_rows():
        spans = SPAN.findall(gives)
        names = [span for span in spans if NAME.fullmatch(span)]
        assert _gives(kind, _imported(where), spans, tmp_path) == names, kind


def _gives(kind: str, obj: Any, spans: list[str], root: Path) -> list[str]:
    """What the row's import gives, named as the table names it."""
    if kind == "marker":
        assert obj(_fresh_tool()).metadata == {"idempotent": True}
        return []
    database = FILES / "orders.sqlite"
    if kind == "by name":
        assert all(obj(name, root=root, database=database) for name in TOOLKITS)
        return list(TOOLKITS)
    calls = [span for span in spans if CALL.fullmatch(span)]
    arguments = {"database": database, "corpus": FILES / "search_corpus.json", "root": root}
    made = eval(calls[0], {obj.__name__: obj, **arguments}) if calls else obj
    return [t.name for t in _as_tools(made)]


def test_the_table_covers_every_toolkit() -> None:
    kinds = {row[0] for row in _toolkit_rows()}
    assert {*TOOLKITS, "search", "by name", "marker"} <= kinds


def test_the_docs_import_nothing_private_from_the_tools() -> None:
    assert re.findall(r"gated_react\.tools\._\w+", all_text()) == []


def test_the_tools_guide_code_runs_as_written() -> None:
    blocks = python_blocks(page("guides/tools.md"))
    assert blocks, "no Python in the tools guide"
    for block in blocks:
        scope: dict[str, Any] = {}
        exec(block, scope)
        assert scope["out"]["stop_reason"] == "success"
        assert scope["out"]["history"][0]["observation"]


def _documented_trace_keys() -> set[str]:
    result = section(page("getting-started.md"), "The result")
    (row,) = [cells for cells in _table(result, "| key | meaning |") if cells[0] == "`trace`"]
    return {name for span in SPAN.findall(row[1]) for name in re.findall(r"\w+", span)}


@tool
def flaky(n: int) -> int:
    """Fails every time."""
    raise RuntimeError("backend down")


@pytest.mark.parametrize("on_tool_error", ["stop", "observe"])
def test_every_key_a_trace_entry_carries_is_documented(on_tool_error: Any) -> None:
    replies = [call("flaky", n=1), call("flaky", n=2), call("nope", n=3), "done"]
    policy = Policy(on_tool_error=on_tool_error)
    graph = build_graph(ScriptedChatModel(replies=replies), [flaky], policy=policy)
    out = invoked(graph, {"goal": "try"})
    keys = {key for entry in out["trace"] for key in entry}
    assert keys - _documented_trace_keys() == set()
    assert ("error" in keys) == (on_tool_error == "observe")


def test_the_allowlist_the_readme_claims_is_the_default() -> None:
    """The README said "allowlist (deny by default)" while ``Policy(allow=None)`` allows every
    tool given: the claim now says what the default is, and the default holds it. The default
    stays (the tools given are an explicit list already; naming them twice adds no safety)."""
    readme = (REPO / "README.md").read_text()
    assert "deny by default" not in readme
    assert "allowlist (only the tools you gave it, or those `Policy.allow` names" in readme

    @tool
    def given(x: int) -> int:
        """A tool given to the graph."""
        return x

    def stop_of(policy: Policy, name: str) -> str:
        model = ScriptedChatModel(replies=[call(name, x=1), "done"])
        return str(build_graph(model, [given], policy=policy).invoke({"goal": "go"})["stop_reason"])

    assert stop_of(Policy(), "given") == "success"  # allow=None: the tools given
    assert stop_of(Policy(), "other") == "tool_missing:other"  # anything else: refused
    assert stop_of(Policy(allow=[]), "given") == "tool_denied:given"
