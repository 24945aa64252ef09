"""The real local model (llama.cpp + SmolLM2-135M): structure only, never answer quality."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gated_react import build_graph
from gated_react.hosting.local import (
    THREADS,
    LocalModelUnavailable,
    LocalServer,
    default_model_file,
    local_chat_model,
    local_policy,
    local_server,
)
from gated_react.stops import StopReason, parse_stop_reason
from gated_react.tools.support import SUPPORT_TOOLS

from ..support.helpers import REFUND_GOAL
from ..support.openai_server import FakeOpenAI, reply
from ..support.reaping import PATIENCE
from ..support.results import invoked

try:
    default_model_file()
    from gated_react.hosting.local import binary_path

    binary_path()
    MISSING = ""
except LocalModelUnavailable as exc:
    MISSING = str(exc)

if MISSING and os.environ.get("GATED_REACT_REQUIRE_LOCAL_MODEL") == "1":  # CI: never skip
    raise RuntimeError(f"GATED_REACT_REQUIRE_LOCAL_MODEL=1 but {MISSING}")
needs_model = pytest.mark.skipif(bool(MISSING), reason=f"local model not installed: {MISSING}")
pytestmark = pytest.mark.local_model


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return not (status.exists() and status.read_text().split()[2] == "Z")


@needs_model
def test_three_refund_runs_end_with_documented_stops_and_the_gate_holds() -> None:
    with local_server() as server:
        pid = server.pid
        graph = build_graph(local_chat_model(server), SUPPORT_TOOLS, policy=local_policy())
        outcomes = [invoked(graph, {"goal": REFUND_GOAL}) for _ in range(3)]
    for out in outcomes:
        reason, _ = parse_stop_reason(out["stop_reason"])
        assert reason in StopReason
        assert out["status"] in ("ok", "stopped")
        ran = [h["action"]["name"] for h in out["history"]]
        assert set(ran) <= {t.name for t in SUPPORT_TOOLS}
        assert [t["tool"] for t in out["trace"]][: len(ran)] == ran
        assert len(out["trace"]) - len(ran) <= 1
        assert out["usage"]["tool_calls"] <= local_policy().budget.max_tool_calls
    deadline = time.monotonic() + PATIENCE
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), "llama-server outlived its with-block"


@needs_model
def test_a_killed_parent_leaves_no_server_behind(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import sys, time
        from gated_react.hosting.local import local_server
        with local_server() as server:
            print(server.pid, flush=True)
            time.sleep(600)
        """
    )
    with subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True
    ) as parent:
        try:
            server_pid = int(parent.stdout.readline())  # type: ignore[union-attr]
            assert _alive(server_pid)
            parent.send_signal(signal.SIGKILL)
            parent.wait(timeout=10)
            deadline = time.monotonic() + PATIENCE
            while _alive(server_pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not _alive(server_pid), "the server outlived its killed parent"
        finally:
            parent.kill()


BILLING = '{"kind": "tool", "name": "get_user_billing", "args": {"user_id": 42}}'
ANSWER = '{"kind": "final", "answer": "Yes, USD 49."}'


def _fake_local(server: FakeOpenAI) -> LocalServer:
    """The fake server addressed as the local one: ``local_chat_model`` then talks to it."""
    port = int(server.base_url.rsplit(":", 1)[1].split("/")[0])
    return LocalServer(pid=0, port=port, log=Path("unused.log"))


def test_the_local_policy_answers_a_first_repeat_with_a_reminder() -> None:
    with FakeOpenAI([reply(BILLING), reply(BILLING), reply(ANSWER)]) as server:
        model = local_chat_model(_fake_local(server))
        graph = build_graph(model, SUPPORT_TOOLS, policy=local_policy())
        out = invoked(graph, {"goal": REFUND_GOAL})
        asked = server.requests
    assert (out["status"], out["answer"]) == ("ok", "Yes, USD 49.")
    assert [(t["tool"], t.get("error")) for t in out["trace"]] == [
        ("get_user_billing", None),
        ("get_user_billing", "loop_detected"),
    ]
    assert "You already called get_user_billing" in asked[2]["messages"][-1]["content"]
    assert {request["temperature"] for request in asked} == {0}  # greedy: the demo reproduces


def test_the_local_policy_still_stops_the_second_repeat() -> None:
    with FakeOpenAI([reply(BILLING)] * 3) as server:
        model = local_chat_model(_fake_local(server))
        graph = build_graph(model, SUPPORT_TOOLS, policy=local_policy())
        out = invoked(graph, {"goal": REFUND_GOAL})
    assert out["stop_reason"] == "loop_detected"
    assert out["usage"]["steps"] == 3


def test_local_policy_changes_override_its_defaults() -> None:
    policy = local_policy(repeat_reminders=0, max_steps=3, protocol="text")
    assert (policy.repeat_reminders, policy.budget.max_steps, policy.protocol) == (0, 3, "text")
    assert (local_policy().repeat_reminders, local_policy().budget.max_tool_calls) == (1, 5)


@needs_model
def test_the_server_runs_on_the_configured_threads() -> None:
    with local_server() as server:
        command = Path(f"/proc/{server.pid}/cmdline").read_bytes().split(b"\0")
    assert command[command.index(b"-t") + 1] == str(THREADS).encode()
    assert THREADS == 1


def test_a_missing_model_file_is_one_clear_error(tmp_path: Path) -> None:
    with (
        pytest.raises(LocalModelUnavailable, match=r"does not exist|not installed"),
        local_server(tmp_path / "nope.gguf"),
    ):
        pass


@needs_model
def test_the_cli_falls_back_to_the_local_model_and_leaves_no_server(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "GATED_REACT_"))}
    env["XDG_STATE_HOME"] = str(tmp_path)
    cli = Path(sys.executable).parent / "gated-react"
    done = subprocess.run(
        [str(cli), "run", "--json", "--max-steps", "3", REFUND_GOAL],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode in (0, 2, 3), done.stderr
    assert "SmolLM2-135M" in done.stderr
    assert "poor decisions" in done.stderr
    result = json.loads(done.stdout)
    reason, _ = parse_stop_reason(result["stop_reason"])
    assert reason in StopReason
    assert result["usage"]["steps"] <= 3
    assert _servers(env["XDG_STATE_HOME"]) == set(), "a llama-server outlived the CLI"


def _servers(state_home: str) -> set[str]:
    """The llama-servers this CLI started, by the environment it handed them: another test's
    (the local model tier runs on two workers) or a benchmark's is not this CLI's."""
    found = subprocess.run(
        ["pgrep", "-f", "llama-server.*--offline"], capture_output=True, text=True, check=False
    )
    mine = f"XDG_STATE_HOME={state_home}".encode()
    return {pid for pid in found.stdout.split() if mine in _environ(pid)}


def _environ(pid: str) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:  # it ended meanwhile
        return []
