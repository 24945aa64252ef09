"""Which LangChain middleware ``build_graph`` takes: every class the installed ``langchain``
ships has a verdict, the docs' table says the same, and a refusal is one line naming the
equivalent."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import middleware as shipped
from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ContextEditingMiddleware,
    FilesystemFileSearchMiddleware,
    HumanInTheLoopMiddleware,
    ModelCallLimitMiddleware,
    ModelFallbackMiddleware,
    ModelRefusalMiddleware,
    ModelRetryMiddleware,
    PIIMiddleware,
    SummarizationMiddleware,
    ToolCallLimitMiddleware,
    ToolErrorMiddleware,
    ToolRetryMiddleware,
    before_agent,
    hook_config,
)
from langchain_core.tools import tool

from gated_react import MiddlewareRefused, build_graph
from gated_react._engine.compat.middleware_admission import REFUSED, SAME, admitted, shipped_classes

from ...support.middleware_fakes import FakeToolModel, replies

TABLE = Path(__file__).resolve().parents[3] / "docs" / "guides" / "chat.md"


@tool
def send_email(to: str) -> str:
    """Send an email."""
    return "sent"


def test_every_shipped_class_has_a_verdict() -> None:
    classes = shipped_classes()
    assert len(classes) >= 19
    assert set(classes) == set(REFUSED) | SAME
    assert not set(REFUSED) & SAME


def test_the_docs_table_has_a_row_per_class_with_the_same_verdict() -> None:
    section = TABLE.read_text().split("### Middleware under the gate", 1)[1]
    rows = re.findall(r"^\| `(\w+)` \| (same|refused) \|", section, re.MULTILINE)
    assert {name for name, _ in rows} == set(shipped_classes())
    assert {name for name, verdict in rows if verdict == "refused"} == set(REFUSED)


def _model() -> FakeToolModel:
    return FakeToolModel(messages=replies("hi"))


def taken(tmp_path: Path) -> list[AgentMiddleware]:
    return [
        HumanInTheLoopMiddleware(interrupt_on={"send_email": True}),
        ModelCallLimitMiddleware(run_limit=5),
        ToolCallLimitMiddleware(run_limit=3),
        SummarizationMiddleware(_model()),
        PIIMiddleware("email"),
        ModelFallbackMiddleware(_model()),
        ModelRetryMiddleware(),
        ModelRefusalMiddleware(),
        ContextEditingMiddleware(),
        ToolRetryMiddleware(),
        ToolErrorMiddleware(on_error=lambda exc: "failed"),
        FilesystemFileSearchMiddleware(root_path=str(tmp_path)),
    ]


def test_the_same_ones_build(tmp_path: Path) -> None:
    stack = taken(tmp_path)
    assert {type(m).__name__ for m in stack} == SAME
    graph = build_graph(_model(), [send_email], middleware=stack)
    assert graph is not None


def test_a_middlewares_tools_join_the_gated_tools(tmp_path: Path) -> None:
    from gated_react.policy import Policy

    from ...support.helpers import node_deps

    search = FilesystemFileSearchMiddleware(root_path=str(tmp_path))
    deps = node_deps(_model(), [send_email], Policy(allow={"glob_search"}), [search])
    assert set(deps.tools) == {"send_email", "glob_search", "grep_search"}
    assert deps.allowed == {"glob_search"}


def test_human_in_the_loop_is_taken_as_the_gates_policy() -> None:
    """Its hooks never run: the tools it names go under approval, with its decisions, and a
    rejection is shown to the model as create_agent shows it."""
    from gated_react.policy import Policy

    from ...support.helpers import node_deps

    hitl = HumanInTheLoopMiddleware(
        interrupt_on={
            "send_email": {"allowed_decisions": ["approve", "reject"], "description": "x"}
        }
    )
    deps = node_deps(_model(), [send_email], Policy(), [hitl])
    assert deps.policy.require_approval == {"send_email"}
    assert deps.policy.decisions_for("send_email") == ("approve", "reject")
    assert deps.policy.on_reject == "observe"
    no_reject = HumanInTheLoopMiddleware(
        interrupt_on={"send_email": {"allowed_decisions": ["approve"]}}
    )
    with pytest.raises(MiddlewareRefused, match=r"^HumanInTheLoopMiddleware is not taken: "):
        build_graph(_model(), [send_email], middleware=[no_reject])


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_each_refused_class_is_one_line(name: str) -> None:
    cls = getattr(shipped, name)
    m = cls.__new__(cls)  # the verdict is the class's; its settings only fill the line in
    with pytest.raises(MiddlewareRefused, match=f"^{name} is not taken: [^\n]+$"):
        admitted([m])


class Counter(AgentState):
    count: int


class OwnState(AgentMiddleware):
    state_schema = Counter

    def before_model(self, state: Any, runtime: Any) -> None:
        return None


class JumpsToTools(AgentMiddleware):
    @hook_config(can_jump_to=["tools"])
    def after_model(self, state: Any, runtime: Any) -> None:
        return None


@before_agent
def at_start(state: Any, runtime: Any) -> None:
    return None


@pytest.mark.parametrize(
    ("middleware", "why"),
    [
        (at_start, "before_agent/after_agent hooks have no place here"),
        (OwnState(), "state channels of its own (count)"),
        (JumpsToTools(), "may jump to ['tools'], past the gate"),
    ],
)
def test_your_own_middleware_is_refused_where_it_would_get_past_the_gate(
    middleware: AgentMiddleware, why: str
) -> None:
    with pytest.raises(MiddlewareRefused, match=re.escape(why)):
        admitted([middleware])


def test_what_is_not_middleware_is_one_line() -> None:
    with pytest.raises(TypeError, match="got function"):
        admitted([lambda request, handler: handler(request)])
    with pytest.raises(TypeError, match="expected a list of middleware, got PIIMiddleware"):
        admitted(PIIMiddleware("email"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="two middleware are named 'PIIMiddleware\\[email\\]'"):
        admitted([PIIMiddleware("email"), PIIMiddleware("email")])
