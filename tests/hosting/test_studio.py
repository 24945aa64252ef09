"""The Studio factories and context schema, without a server (tests/hosting/test_studio_server.py
runs them under ``langgraph dev``)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk.runtime import _ExecutionRuntime, _ReadRuntime

from gated_react import Budget, Policy, build_graph
from gated_react.hosting.studio import (
    ContextError,
    RefundContext,
    StudioContext,
    WorkbenchContext,
    checkpointer,
    read_context,
    refund_agent,
    refund_graph,
    workbench_agent,
    workbench_graph,
)
from gated_react.testing import ScriptedChatModel
from gated_react.tools.support import SUPPORT_TOOLS
from gated_react.tools.workspace import TEST_TIMEOUT_SECONDS

from ..support.openai_server import FakeOpenAI, reply, tool_call
from ..support.reaping import PATIENCE
from ..support.results import invoked

REPO = Path(__file__).resolve().parents[2]
STUDIO_ENV = json.loads((REPO / "langgraph.json").read_text())["env"]
SAMPLE = REPO / STUDIO_ENV["GATED_REACT_STUDIO_WORKSPACE"]
"""The sample project the repository's langgraph.json confines the workbench to."""
LIBRARY_FIELDS = (set(Policy.model_fields) - {"budget", "answer_schema"}) | set(Budget.model_fields)


def _running(context: Any) -> Any:
    return _ExecutionRuntime(access_context="threads.create_run", store=None, context=context)


def _reading() -> Any:
    return _ReadRuntime(access_context="assistants.read", store=None)


def _agent(graph: Any) -> Any:
    """The NodeDeps the graph's nodes were built with."""
    return graph.nodes["decide"].bound.kwargs["deps"]


def test_an_empty_context_is_the_library_default_policy() -> None:
    assert StudioContext().policy() == Policy()
    assert WorkbenchContext().policy() == Policy()


def test_every_policy_and_budget_field_is_offered_with_the_library_schema() -> None:
    assert set(StudioContext.model_fields) == LIBRARY_FIELDS | {"model", "base_url"}
    ours = StudioContext.model_json_schema()["properties"]
    theirs = {
        **Policy.model_json_schema()["properties"],
        **Budget.model_json_schema()["properties"],
    }
    for name in LIBRARY_FIELDS:
        strip = {"title", "description"}
        mine = {k: v for k, v in ours[name].items() if k not in strip}
        library = {k: v for k, v in theirs[name].items() if k not in strip}
        assert mine == library, name


def test_every_field_has_a_description() -> None:
    for schema in (RefundContext, WorkbenchContext):
        for name, field in schema.model_fields.items():
            assert field.description, f"{schema.__name__}.{name}"


def test_the_context_becomes_the_policy() -> None:
    context = RefundContext(
        require_approval=frozenset({"get_user_billing"}),
        max_steps=3,
        tool_limits={"search_policy": 1},
        protocol="json",
    )
    policy = context.policy()
    assert policy.require_approval == {"get_user_billing"}
    assert policy.budget == Budget(max_steps=3, tool_limits={"search_policy": 1})
    assert policy.protocol == "json"


def test_read_contexts_get_the_defaults_free_shape() -> None:
    assert read_context(_reading(), RefundContext) is None
    graph = asyncio.run(refund_agent(_reading()))
    plain = build_graph(ScriptedChatModel(replies=[]), SUPPORT_TOOLS)
    assert graph.get_graph().draw_mermaid() == plain.get_graph().draw_mermaid()
    assert graph.get_context_jsonschema() == RefundContext.model_json_schema()
    shape = asyncio.run(workbench_agent(_reading()))
    assert shape.get_context_jsonschema() == WorkbenchContext.model_json_schema()


def test_a_run_context_is_validated_and_server_keys_are_ignored() -> None:
    raw = {"max_steps": 4, "thread_id": "t", "langgraph_request_id": "r", "__after_seconds__": 0}
    context = read_context(_running(raw), RefundContext)
    assert context == RefundContext(max_steps=4)
    assert read_context(_running(None), RefundContext) == RefundContext()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"max_steps": 0},
            "invalid context: max_steps: Input should be greater than or equal to 1 (got 0)",
        ),
        (
            {"require_aproval": ["x"]},
            "invalid context: require_aproval: Extra inputs are not permitted (got ['x'])",
        ),
        (
            {"protocol": "xml"},
            "invalid context: protocol: Input should be 'tools', 'json' or 'text' (got 'xml')",
        ),
        (["max_steps"], "context must be an object, got list"),
    ],
)
def test_bad_contexts_are_one_line(raw: Any, message: str) -> None:
    with pytest.raises(ContextError) as caught:
        read_context(_running(raw), RefundContext)
    assert str(caught.value) == message


def test_a_run_builds_the_model_and_policy_from_the_context(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("GATED_REACT_STUDIO_BASE_URLS", "http://127.0.0.1:9/v1")
    context = {"model": "m-1", "base_url": "http://127.0.0.1:9/v1", "max_steps": 2}
    graph = asyncio.run(refund_agent(_running(context)))
    assert graph.config["recursion_limit"] == 5 * 2 + 5  # type: ignore[index]
    agent = _agent(graph)
    assert agent.policy == Policy(budget=Budget(max_steps=2))
    assert (agent.model.model_name, str(agent.model.openai_api_base)) == (
        "m-1",
        "http://127.0.0.1:9/v1",
    )


KEY_REFUSED = (
    "invalid context: base_url: not a server this one sends its API key to (OPENAI_BASE_URL, "
    "or one in GATED_REACT_STUDIO_BASE_URLS)"
)


@pytest.mark.parametrize(
    ("allowed", "url", "ok"),
    [
        ("", "http://attacker.example/v1", False),
        ("", "http://127.0.0.1:8080/v1/", True),  # the server's own, a slash apart
        ("http://other:1/v1, http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1", True),
        ("http://other:1/v1", "http://127.0.0.1:9/v1", False),
        ("*", "http://anywhere.example/v1", True),
    ],
)
def test_a_context_sends_the_key_only_where_the_operator_says(
    monkeypatch: pytest.MonkeyPatch, allowed: str, url: str, ok: bool
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")
    monkeypatch.setenv("GATED_REACT_STUDIO_BASE_URLS", allowed)
    if ok:
        assert read_context(_running({"base_url": url}), RefundContext) is not None
        return
    with pytest.raises(ContextError) as caught:
        read_context(_running({"base_url": url, "max_steps": 3}), RefundContext)
    assert str(caught.value) == KEY_REFUSED


def _workbench_in(folder: str) -> Any:
    return asyncio.run(workbench_agent(_running({"workspace_root": folder})))


def test_a_context_names_only_the_operators_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "served" / "sub").mkdir(parents=True)
    (tmp_path / "named").mkdir()
    (tmp_path / "served" / "link").symlink_to(tmp_path / "named")
    monkeypatch.chdir(tmp_path / "served")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.delenv("GATED_REACT_STUDIO_WORKSPACE", raising=False)
    monkeypatch.delenv("GATED_REACT_STUDIO_WORKSPACES", raising=False)
    for inside in ("sub", str(tmp_path / "served"), "."):
        assert _agent(_workbench_in(inside)).tools["read_file"].root.is_relative_to(Path.cwd())
    for outside in (str(tmp_path / "named"), "..", "sub/../../named", "link", "/"):
        with pytest.raises(ContextError, match=r"^invalid context: workspace_root: outside"):
            _workbench_in(outside)
    monkeypatch.setenv("GATED_REACT_STUDIO_WORKSPACES", f"/nowhere{os.pathsep}{tmp_path}/named")
    assert _agent(_workbench_in("../named")).tools["read_file"].root == tmp_path / "named"


def test_a_context_cannot_make_a_hidden_folder_of_the_workspace_its_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: ``workspace_root=".streamlit"`` lay in the operator's folder, and the tools,
    which refuse hidden names below their root, read ``secrets.toml`` in it (found by an
    outside tester)."""
    (tmp_path / ".streamlit").mkdir()
    (tmp_path / ".streamlit" / "secrets.toml").write_text('api_key = "sk-operator"\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.delenv("GATED_REACT_STUDIO_WORKSPACE", raising=False)
    monkeypatch.delenv("GATED_REACT_STUDIO_WORKSPACES", raising=False)
    for hidden in (".streamlit", "./.streamlit/", str(tmp_path / ".streamlit")):
        with pytest.raises(ContextError, match=r"workspace_root: a hidden folder"):
            _workbench_in(hidden)
    monkeypatch.setenv("GATED_REACT_STUDIO_WORKSPACES", str(tmp_path / ".streamlit"))
    assert _agent(_workbench_in(".streamlit")).tools["read_file"].root.name == ".streamlit"


def test_no_model_configured_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(Exception, match="no model configured: set OPENAI_API_KEY"):
        refund_graph(RefundContext())


def test_the_workbench_is_confined_to_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.chdir(tmp_path)
    assert WorkbenchContext().workspace_path() == tmp_path.resolve()  # no variable: the server's
    graph = workbench_graph(WorkbenchContext(workspace_root=str(tmp_path)))
    agent = _agent(graph)
    assert set(agent.tools) == {"calculate", "read_file", "list_files", "run_tests"}
    assert agent.tools["read_file"].root == tmp_path.resolve()
    assert agent.policy.timeout_for("run_tests") > TEST_TIMEOUT_SECONDS  # past its own limit
    chosen = WorkbenchContext(workspace_root=str(tmp_path), tool_timeouts={"run_tests": 5.0})
    assert _agent(workbench_graph(chosen)).policy.timeout_for("run_tests") == 5.0
    with pytest.raises(ContextError, match=r"workspace_root: workspace root .* is not a folder"):
        workbench_graph(WorkbenchContext(workspace_root=str(tmp_path / "missing")))


def test_the_shipped_workspace_has_a_failing_test_to_debug(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script = [tool_call("run_tests", path="test_cart.py"), reply("The discount starts one late.")]
    with FakeOpenAI(script) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        context = WorkbenchContext(workspace_root=str(SAMPLE))
        out = invoked(workbench_graph(context), {"goal": "Why does test_cart fail?"})
    result = out["history"][0]["observation"]
    assert result["passed"] is False
    assert "assert 30.0 == 27.0" in result["output"]


def test_the_checkpointer_opens_the_configured_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATED_REACT_DB", str(tmp_path / "studio.sqlite"))

    async def open_it() -> str:
        async with checkpointer() as saver:
            return type(saver).__name__

    assert asyncio.run(open_it()) == "SqliteStore"  # AsyncSqliteSaver, with adelete_for_runs
    assert (tmp_path / "studio.sqlite").is_file()


def test_the_studio_checkpointer_revives_no_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gated_react import UnsafeCheckpoint, open_checkpointer

    from ..support.tamper import poison, touch

    db = tmp_path / "studio.sqlite"
    monkeypatch.setenv("GATED_REACT_DB", str(db))
    with open_checkpointer(str(db)) as saver:
        graph = build_graph(ScriptedChatModel(replies=["ok"]), SUPPORT_TOOLS, checkpointer=saver)
        graph.invoke({"goal": "refund?"}, {"configurable": {"thread_id": "t"}})
        poison(saver, "t", {"answer": touch(tmp_path / "x")})

    async def read_it() -> None:
        async with checkpointer() as saver:
            await saver.aget_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})

    with pytest.raises(UnsafeCheckpoint, match=r"os\.system"):
        asyncio.run(read_it())
    assert not (tmp_path / "x").exists()


def test_the_studio_checkpointer_signs_with_the_store_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``GATED_REACT_STORE_KEY`` reaches the langgraph.json checkpointer: a thread's rows copied
    under another thread id are refused, the thread itself reads."""
    from gated_react import UnsafeCheckpoint, open_checkpointer

    from ..support.tamper import copy_rows

    db, key = tmp_path / "studio.sqlite", "studio-key-" + "s" * 24
    monkeypatch.setenv("GATED_REACT_DB", str(db))
    monkeypatch.setenv("GATED_REACT_STORE_KEY", key)
    with open_checkpointer(str(db), key=key) as saver:
        graph = build_graph(ScriptedChatModel(replies=["ok"]), SUPPORT_TOOLS, checkpointer=saver)
        graph.invoke({"goal": "refund?"}, {"configurable": {"thread_id": "t"}})
    copy_rows(str(db), "t", "t2", upto="z", writes_before=False)

    async def read_it(thread: str) -> Any:
        async with checkpointer() as saver:
            config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
            return await saver.aget_tuple(config)  # type: ignore[arg-type]

    assert asyncio.run(read_it("t")) is not None
    with pytest.raises(UnsafeCheckpoint, match="'t2' does not match its signature"):
        asyncio.run(read_it("t2"))


def test_langgraph_json_exports_both_graphs_and_the_durable_store() -> None:
    config = json.loads((REPO / "langgraph.json").read_text())
    assert {name: spec["path"] for name, spec in config["graphs"].items()} == {
        "refund": "gated_react.hosting.studio:refund_agent",
        "workbench": "gated_react.hosting.studio:workbench_agent",
    }
    # langgraph-api 0.16.7 loads a module-style checkpointer path as "module.attribute".
    assert config["checkpointer"] == {
        "backend": "custom",
        "path": "gated_react.hosting.studio.checkpointer",
    }


def test_the_sample_workspace_is_named_by_langgraph_json_not_by_the_package() -> None:
    """The wheel holds no repository path: the repository's langgraph.json names its sample
    project, and a server started with it confines the workbench there."""
    assert (
        "studio-workspace"
        not in (REPO / "src" / "gated_react" / "hosting" / "studio.py").read_text()
    )
    assert (SAMPLE / "test_cart.py").is_file()
    code = (
        "from gated_react.hosting.studio import WorkbenchContext as W\nprint(W().workspace_path())"
    )
    shown = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**os.environ, **STUDIO_ENV},
        capture_output=True,
        text=True,
        check=True,
        timeout=PATIENCE,
    ).stdout.strip()
    assert shown == str(SAMPLE)
