"""LangChain's agents next to ours: ``as_tool`` and gated-react need only ``langchain-core``;
``interop.create_agent`` needs the ``langchain`` extra and says so in one line without it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from gated_react import as_tool, build_graph, interop
from gated_react.errors import GatedReactError
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

from .support.reaping import PATIENCE

REPO = Path(__file__).resolve().parents[1]


def _refund_desk() -> Any:
    inner = build_graph(ScriptedChatModel(replies=["USD 49.00, approved."]), SUPPORT_TOOLS)
    return as_tool(inner, "refund_desk", "Decides refund questions for one user.")


def test_create_agent_is_langchains_own() -> None:
    model = ScriptedChatModel(replies=[call("refund_desk", goal="User 42: refund?"), "USD 49."])
    app = interop.create_agent(model, [_refund_desk()], name="helper")
    out = app.invoke({"messages": [HumanMessage("ticket 5")]})
    assert '"answer": "USD 49.00, approved."' in out["messages"][-2].content
    assert out["messages"][-1].content == "USD 49."


def test_without_langchain_create_agent_is_one_line_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "langchain", None)  # what a failed import leaves
    monkeypatch.setitem(sys.modules, "langchain.agents", None)
    with pytest.raises(GatedReactError) as caught:
        interop.create_agent(ScriptedChatModel(replies=["hi"]), [])
    assert isinstance(caught.value, ImportError)
    message = str(caught.value)
    assert "\n" not in message
    assert "pip install 'gated-react[langchain]'" in message


NO_LANGCHAIN = textwrap.dedent(
    """
    import importlib.abc, sys

    class NoLangChain(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "langchain" or name.startswith("langchain."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NoLangChain())
    from gated_react import as_tool, build_graph, interop
    from gated_react.testing import ScriptedChatModel, call
    from gated_react.tools.support import SUPPORT_TOOLS

    inner = build_graph(ScriptedChatModel(replies=["USD 49"]), SUPPORT_TOOLS)
    desk = as_tool(inner, "desk", "Refund questions.")
    outer = build_graph(ScriptedChatModel(replies=[call("desk", goal="refund?"), "ok"]), [desk])
    print(outer.invoke({"goal": "ticket"})["stop_reason"])
    try:
        interop.create_agent(ScriptedChatModel(replies=["hi"]), [desk])
    except ImportError as exc:
        print(exc)
    """
)


def test_gated_react_and_as_tool_need_no_langchain_package() -> None:
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", NO_LANGCHAIN],
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == [
        "success",
        "create_agent needs LangChain's `langchain` package, which gated-react does not "
        "install by default: pip install 'gated-react[langchain]'",
    ]
