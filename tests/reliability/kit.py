"""Instrumented toolkits and the invariants every finished run must satisfy.

Every tool is wrapped in ``Counted``, which counts each real execution of the tool's body, so a
test can compare what ran with what the policy allowed, call by call.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool, tool

from gated_react import Policy
from gated_react._engine.execution.call_keys import args_hash
from gated_react.stops import StopReason, parse_stop_reason
from gated_react.tools.calculator import calculate
from gated_react.tools.search import search_tool
from gated_react.tools.sql import sql_tools
from gated_react.tools.support import SUPPORT_TOOLS
from gated_react.tools.workspace import workspace_tools

from ..support.results import answered_once

# The `<why>` codes of invalid_action and `<kind>` codes of llm_error that the docs list.
WHYS = frozenset(
    {
        "bad_json",
        "not_object",
        "bad_kind",
        "extra_keys",
        "missing_answer",
        "missing_tool_name",
        "bad_args",
        "multiple_actions",
        "no_action",
    }
)
LLM_KINDS = frozenset(
    {
        "rate_limited",
        "auth",
        "context_length",
        "connection",
        "server_error",
        "bad_request",
        "not_found",
    }
)
_NO_DETAIL = {
    StopReason.SUCCESS,
    StopReason.MAX_STEPS,
    StopReason.MAX_TOOL_CALLS,
    StopReason.MAX_SECONDS,
    StopReason.MAX_TOKENS,
    StopReason.LOOP_DETECTED,
    StopReason.LLM_TIMEOUT,
}
SECRET = "sk-workspace-secret-0123456789"
DELETED: list[Any] = []


class Executions:
    """Real executions per tool name, shared by the tools of one run."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    @property
    def total(self) -> int:
        return sum(self.counts.values())


class Counted(BaseTool):
    """A tool with a counter: the wrapped tool's body runs only through here."""

    inner: BaseTool
    executions: Executions

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        self.executions.counts[self.name] += 1
        kwargs.pop("run_manager", None)
        return self.inner.invoke(kwargs)


def counted(tools: list[BaseTool], executions: Executions) -> list[BaseTool]:
    return [
        Counted(
            name=t.name,
            description=t.description,
            args_schema=t.args_schema,
            metadata=t.metadata,
            inner=t,
            executions=executions,
        )
        for t in tools
    ]


@tool
def delete_account(user_id: int) -> str:
    """Delete a user's account for good (side effects; never on any allowlist here)."""
    DELETED.append(user_id)
    return f"deleted {user_id}"


@dataclass
class Toolkits:
    """The shipped toolkits on fresh files; ``tools`` are unwrapped, wrap them per run."""

    root: Path
    database: Path
    tools: list[BaseTool] = field(default_factory=list)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(t.name for t in self.tools)


def make_toolkits(base: Path) -> Toolkits:
    root = base / "work"
    (root / "src").mkdir(parents=True)
    (root / "notes.md").write_text("# Notes\nRefunds within 14 days.\n")
    (root / "src" / "app.py").write_text("def total(items):\n    return sum(items)\n")
    (root / "test_app.py").write_text("def test_ok():\n    assert True\n")
    (root / ".env").write_text(f"OPENAI_API_KEY={SECRET}\n")
    (base / "outside.txt").write_text(f"outside {SECRET}\n")
    (root / "link_out.txt").symlink_to(base / "outside.txt")
    database = base / "shop.sqlite"
    with sqlite3.connect(database) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER, amount REAL, status TEXT)")
        conn.executemany(
            "INSERT INTO orders VALUES (?, ?, ?)",
            [(i, i * 1.5, "completed" if i % 3 else "pending") for i in range(1, 201)],
        )
    conn.close()
    corpus = base / "corpus.json"
    docs = [
        {"id": "weather-1", "title": "Beijing weather", "text": "Sunny, 31 C today."},
        {"id": "refund-1", "title": "Refund policy", "text": "Refunds within 14 days."},
        {"id": "cal-1", "title": "Calendar", "text": "The meeting is on Monday."},
    ]
    corpus.write_text(json.dumps(docs))
    tools = [
        *SUPPORT_TOOLS,
        calculate,
        *sql_tools(database),
        *workspace_tools(root),
        search_tool(corpus),
        delete_account,
    ]
    return Toolkits(root=root, database=database, tools=tools)


# Arguments a well-behaved model would send; some of them make the tool itself fail.
VALID_ARGS: dict[str, list[dict[str, Any]]] = {
    "get_user_profile": [{"user_id": 42}, {"user_id": 7}, {"user_id": 5}],
    "get_user_billing": [{"user_id": 42}, {"user_id": 7}],
    "search_policy": [{"query": "refund pro"}, {"query": "free plan"}],
    "calculate": [
        {"expression": "49 * 0.5"},
        {"expression": "2 ** 100"},
        {"expression": "1 / 0"},
        {"expression": "x + 1"},
    ],
    "query_database": [
        {"sql": "SELECT count(*) FROM orders"},
        {"sql": "SELECT * FROM orders"},
        {"sql": "DELETE FROM orders"},
    ],
    "describe_database": [{}],
    "read_file": [{"path": "notes.md"}, {"path": ".env"}, {"path": "../outside.txt"}],
    "list_files": [{}, {"path": "src"}],
    "search": [{"query": "Beijing weather"}, {"query": "refund", "top_k": 2}],
    "run_tests": [{"path": "test_app.py"}],
    "delete_account": [{"user_id": 42}],
}
# Tools a policy in these tests may allow; run_tests (slow) and delete_account never are.
ALLOWABLE = tuple(name for name in VALID_ARGS if name not in ("run_tests", "delete_account"))
NEVER_ALLOWED = ("run_tests", "delete_account")
UNKNOWN = ("delete_account_now", "transfer_funds", "shell", "42", "GET_USER_PROFILE", "eval")


def check_stop_reason(stop_reason: str, registered: frozenset[str] = frozenset()) -> None:
    """The reason is documented: a StopReason, with a detail exactly where the docs give one."""
    reason, detail = parse_stop_reason(stop_reason)  # ValueError for anything undocumented
    if reason in _NO_DETAIL:
        assert detail is None, stop_reason
    elif reason is StopReason.INVALID_ACTION:
        assert detail in WHYS, stop_reason
    elif reason is StopReason.LLM_ERROR:
        assert detail is not None
        assert detail in LLM_KINDS or detail.isidentifier(), stop_reason
    else:
        assert detail, stop_reason
    if reason is StopReason.TOOL_MISSING:
        assert detail not in registered, stop_reason
    elif reason.value.startswith("tool_") and registered:
        assert detail in registered, stop_reason


def _executed(entry: dict[str, Any]) -> bool:
    """A trace entry of a call whose tool body ran: it returned, raised or timed out."""
    failure = entry.get("error") or entry.get("stop_reason") or ""
    return bool(entry["ok"]) or failure.startswith(("tool_error:", "tool_timeout:"))


def check_run(
    out: dict[str, Any],
    policy: Policy,
    registered: frozenset[str],
    executions: Executions,
    model_calls: int,
) -> None:
    """Every invariant a finished run promises, checked against what really ran
    (``model_calls``: the model's replies, each a decision, a step). ``out`` is
    the run's result as ``gated_react.run`` gives it (``result_of`` of what invoke returned):
    its trace read from the run's record, its history from its conversation."""
    check_stop_reason(out["stop_reason"], registered)
    success = out["stop_reason"] == "success"
    assert out["status"] == ("ok" if success else "stopped")
    assert (out["answer"] is not None) == success
    assert out["message"]
    _check_trace(out, registered)
    # budgets: not one call over, counted from what really ran
    budget = policy.budget
    usage = out["usage"]
    assert executions.total <= budget.max_tool_calls
    assert usage["tool_calls"] <= budget.max_tool_calls
    for name, cap in budget.tool_limits.items():
        assert executions.counts[name] <= cap, name
    assert model_calls == usage["steps"] <= budget.max_steps
    # nothing outside the allowlist ran, and every execution is in the trace
    allowed = policy.allowed(registered)
    assert not {name for name, n in executions.counts.items() if n and name not in allowed}
    ran = Counter(entry["tool"] for entry in out["trace"] if _executed(entry))
    assert +executions.counts == ran, (executions.counts, out["trace"])
    logs = {key: value for key, value in out.items() if key != "messages"}
    json.dumps(logs, allow_nan=False, ensure_ascii=False).encode("utf-8")  # plain, storable
    messages = out["messages"]
    assert answered_once(messages), [m.type for m in messages]  # valid input to any chat API
    assert [m.type for m in messages][-1] == "ai"  # the conversation ends with the run
    _check_steps(out["trace"], out["history"], messages)


def _check_steps(
    trace: list[dict[str, Any]], history: list[dict[str, Any]], messages: list[Any]
) -> None:
    """Each call's step the same in the trace as in the history; a call the gate stopped
    before it ran belongs to the run's last step with calls (its AI message the last)."""
    numbered = [step["step"] for step in history]
    if len(trace) > len(history):
        numbered.append(_steps_with_calls(messages))
    assert [entry["step"] for entry in trace] == numbered, (trace, history)


def _check_trace(out: dict[str, Any], registered: frozenset[str]) -> None:
    """The trace (from the record) and the history (from the conversation) agree call by
    call: the same tools, argument hashes and outcomes (the same steps: ``_check_steps``);
    the trace has at most one more entry, last, the call the gate stopped the run on before it
    ran, with the stop reason."""
    history, trace = out["history"], out["trace"]
    assert len(trace) - len(history) in (0, 1), (trace, history)
    for entry, step in zip(trace, history, strict=False):
        assert entry["tool"] == step["action"]["name"]
        assert entry["args_hash"] == args_hash(step["action"]["args"])
        assert entry["ok"] == step["ok"], (entry, step)
    for entry in trace:
        if entry.get("stop_reason") is not None:
            assert entry is trace[-1], "only the call that ended the run carries a stop reason"
            assert entry["stop_reason"] == out["stop_reason"]
            assert entry["ok"] is False
        elif not entry["ok"]:
            check_stop_reason(entry["error"], registered)
    if len(trace) > len(history):
        assert trace[-1]["stop_reason"] == out["stop_reason"]
        assert not _executed(trace[-1])  # a call that ran has its result in the history
    steps = [entry["step"] for entry in trace]
    assert steps == sorted(set(steps)), "one call per step, in order"
    ids = [step["action"]["id"] for step in history]
    assert len(ids) == len(set(ids)), "one result per call"


def _steps_with_calls(messages: list[Any]) -> int:
    """The AI messages with tool calls since the conversation's last question."""
    count = 0
    for message in reversed(messages):
        if message.type == "human":
            break
        count += bool(message.type == "ai" and message.tool_calls)
    return count


def no_secret_in(value: Any, *secrets: str) -> None:
    text = json.dumps(value, default=str, ensure_ascii=False)
    for secret in secrets:
        assert secret not in text


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")
