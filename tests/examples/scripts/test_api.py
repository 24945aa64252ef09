"""Every API example in examples/api runs (offline ones here; studio_client.py against a real dev
server in tests/hosting/test_studio_server.py). The guides quote them:
tests/docs/test_snippets.py checks that each quoted block is verbatim in its file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ...support.reaping import PATIENCE

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples" / "api"
EXPECTED = {
    "runnable.py": [
        "invoke: ok success Yes: USD 49.00, within the 14-day window.",
        "calls: ['get_user_profile', 'get_user_billing', 'search_policy'] steps: 4",
        "stream: gate []",  # the gate's decisions are records; its channel is private
        "stream: execute ['messages']",
        "stream: finish ['message', 'messages', 'status', 'stop_reason']",
        "ainvoke: success",
        "tool finished: search_policy",
    ],
    "subgraph.py": ["Yes: USD 49.00 goes back to your card. Anything else?", "See our FAQ."],
    "agent_as_tool.py": [
        "outer: success - The refund desk could not decide; a human will follow up.",
        "inner: tool_denied:get_user_billing",
    ],
    "answer_schema.py": ["success True 49.0", "steps: 3"],
    "from_create_agent.py": ["Your name is John Smith."],
    "chat_messages.py": [
        "answer: Anna is on the pro plan.",
        "follow-up: She pays USD 49 a month.",
        "turns: ['human', 'ai', 'tool', 'ai', 'human', 'ai', 'tool', 'ai']",
    ],
    "tracing.py": [
        "run: paused",
        "resume: success",
        "invoke_agent gated-react paused links=0",
        "   apply_guardrail gate refused",
        "   apply_guardrail gate asked_human",
        "invoke_agent gated-react ok links=1",
        "   execute_tool get_user_billing",
    ],
    "mcp_tools.py": [
        "paused: notes__delete_note {'title': 'draft'}",
        "success: Deleted the draft; 1 note left.",
    ],
}


def test_every_example_is_run_by_a_test() -> None:
    found = {path.name for path in EXAMPLES.glob("*.py")}
    assert found == {*EXPECTED, "studio_client.py"}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs_offline(name: str, tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "LANGSMITH_TRACING": "false", "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-W", "error", str(EXAMPLES / name)],
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr == ""  # no warning, no log line, no server's chatter (mcp_tools.py)
    lines = done.stdout.splitlines()
    for expected in EXPECTED[name]:
        assert expected in lines, f"{name}: {expected!r} not in {lines}"
