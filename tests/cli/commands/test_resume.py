"""``gated-react resume``: approvals answered from the command line, recorded run options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gated_react import build_graph, open_checkpointer, run
from gated_react.testing import ScriptedChatModel
from gated_react.tools.support import SUPPORT_TOOLS

from ...support.cli import invoke
from ...support.openai_server import FakeOpenAI, reply, tool_call

GOAL = "refund for user 42?"
APPROVAL = ["--approve-tool", "get_user_billing", "--thread", "t-approve"]


def _paused(server: FakeOpenAI, *script: object) -> dict[str, object]:
    server.push(tool_call("get_user_billing", user_id=42), *script)  # type: ignore[arg-type]
    out = invoke("run", GOAL, *APPROVAL)
    assert out.exit_code == 4, out.stdout
    assert "waiting for approval: get_user_billing" in out.stdout
    assert "gated-react resume t-approve --approve" in out.stdout
    assert "gated-react resume t-approve --args '{\"user_id\": 42}'" in out.stdout
    return json.loads(invoke("show", "t-approve", "--json").stdout)  # type: ignore[no-any-return]


def test_a_paused_run_waits_until_approved(server: FakeOpenAI) -> None:
    paused = _paused(server, reply("USD 49"))
    assert paused["pending"][0]["tool"] == "get_user_billing"  # type: ignore[index]
    again = invoke("resume", "t-approve", "--json")
    assert again.exit_code == 4
    assert json.loads(again.stdout)["pending"]
    assert len(server.requests) == 1  # waiting: nothing ran
    done = invoke("resume", "t-approve", "--approve", "--json")
    assert done.exit_code == 0
    result = json.loads(done.stdout)
    assert result["answer"] == "USD 49"
    assert result["history"][0]["action"]["name"] == "get_user_billing"


def test_reject_ends_the_run_as_a_policy_stop(server: FakeOpenAI) -> None:
    _paused(server)
    out = invoke("resume", "t-approve", "--reject", "not today", "--json")
    assert out.exit_code == 2
    result = json.loads(out.stdout)
    assert result["stop_reason"] == "tool_rejected:get_user_billing"
    assert "not today" in result["message"]
    assert result["history"] == []


def test_args_approve_with_edited_arguments(server: FakeOpenAI) -> None:
    _paused(server, reply("Max is on the free plan"))
    out = invoke("resume", "t-approve", "--args", '{"user_id": 7}', "--json")
    assert out.exit_code == 0
    step = json.loads(out.stdout)["history"][0]
    assert step["action"]["args"] == {"user_id": 7}
    assert step["observation"]["billing"]["plan"] == "free"


def test_respond_answers_in_place_of_the_tool(server: FakeOpenAI) -> None:
    _paused(server, reply("USD 49"))
    out = invoke("resume", "t-approve", "--respond", "billing says USD 49", "--json")
    assert out.exit_code == 0, out.stdout
    result = json.loads(out.stdout)
    assert result["history"][0]["observation"] == "billing says USD 49"
    assert result["trace"][0]["by_human"] is True
    assert len(server.requests) == 2  # the model was asked again; the tool never ran


def test_answer_takes_langchains_decisions(server: FakeOpenAI) -> None:
    _paused(server, reply("Max is on the free plan"))
    edit = {"type": "edit", "edited_action": {"name": "get_user_billing", "args": {"user_id": 7}}}
    out = invoke("resume", "t-approve", "--answer", json.dumps({"decisions": [edit]}), "--json")
    assert out.exit_code == 0, out.stdout
    assert json.loads(out.stdout)["history"][0]["action"]["args"] == {"user_id": 7}


def test_resume_rebuilds_the_recorded_policy(server: FakeOpenAI) -> None:
    server.push(
        tool_call("get_user_billing", user_id=42), tool_call("get_user_profile", user_id=42)
    )
    first = invoke("run", GOAL, *APPROVAL, "--max-tool-calls", "1")
    assert first.exit_code == 4
    out = invoke("resume", "t-approve", "--approve", "--json")
    assert out.exit_code == 2
    assert json.loads(out.stdout)["stop_reason"] == "max_tool_calls"


def test_answers_only_go_to_a_waiting_run(server: FakeOpenAI) -> None:
    server.push(reply("done"))
    assert invoke("run", GOAL, "--thread", "t-done", "--json").exit_code == 0
    out = invoke("resume", "t-done", "--approve")
    assert out.exit_code == 1
    assert "has ended (success); nothing to approve" in out.stderr
    finished = invoke("resume", "t-done", "--json")
    assert finished.exit_code == 0  # a finished run is shown, nothing runs
    assert json.loads(finished.stdout)["answer"] == "done"
    assert len(server.requests) == 1


def test_a_thread_from_the_library_is_not_resumed_blindly(state_dir: Path) -> None:
    db = state_dir / "runs.sqlite"
    with open_checkpointer(str(db)) as saver:
        graph = build_graph(ScriptedChatModel(replies=["x"]), SUPPORT_TOOLS, checkpointer=saver)
        run(graph, "hello", thread_id="from-lib")
    out = invoke("resume", "from-lib")
    assert out.exit_code == 1
    assert "not started by the gated-react CLI" in out.stderr
    assert invoke("show", "from-lib").exit_code == 0  # but it can be shown


def test_the_example_folder_follows_from_the_thread_not_from_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crafted or old store that records another folder cannot point the tools at it."""
    from types import SimpleNamespace

    from gated_react.cli.commands.resume import recorded_options
    from gated_react.cli.run_options import RunOptions

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    crafted = RunOptions(example="001-coding", example_dir="/etc")
    saver = SimpleNamespace(get_tuple=lambda _: SimpleNamespace(metadata=crafted.metadata()))
    options = recorded_options(saver, "../x")
    assert options.example_dir is not None
    folder = Path(options.example_dir)
    assert folder.parent == tmp_path / "state" / "gated-react" / "examples"
    assert "/etc" not in str(folder)


def test_a_spent_budget_asks_and_the_cli_answers_each_way(server: FakeOpenAI) -> None:
    """``--on-budget ask``: the run pauses (exit 4) on the spent budget and says how to answer;
    ``--approve`` extends it by the proposal, ``--args`` sets the limit, ``--reject`` stops."""
    budget = ["--max-steps", "1", "--on-budget", "ask"]
    for thread, answer, code in (
        ("b-approve", ["--approve"], 0),
        ("b-edit", ["--args", '{"limit": 3}'], 0),
        ("b-reject", ["--reject", "enough"], 2),
    ):
        server.push(tool_call("get_user_profile", user_id=42), reply("Anna"))
        out = invoke("run", GOAL, "--thread", thread, *budget)
        assert out.exit_code == 4, out.stdout
        assert "budget spent: max_steps (1 spent of 1)" in out.stdout
        assert f"gated-react resume {thread} --approve   (to 2)" in out.stdout
        assert f"gated-react resume {thread} --args '{{\"limit\": 2}}'" in out.stdout
        done = invoke("resume", thread, *answer, "--json")
        assert done.exit_code == code, done.stdout
        result = json.loads(done.stdout)
        extended = [e.get("extended") for e in result["trace"] if e.get("extended")]
        if code:
            assert result["stop_reason"] == "max_steps"
            assert extended == []
        else:
            limit = 3 if answer[0] == "--args" else 2
            decision = "edit" if answer[0] == "--args" else "approve"
            assert extended == [f"max_steps 1 -> {limit} ({decision})"]
            shown = invoke("show", thread).stdout  # the limits in force, not the policy's
            assert f"steps        2/{limit}" in shown
            assert f"max_steps 1 -> {limit} ({decision})" in shown  # the trace says why


def test_the_summary_of_a_later_resume_shows_the_extended_limit(server: FakeOpenAI) -> None:
    """A budget extended in one command, the run then paused on an approval and resumed in
    another: before, that summary showed the policy's limit (``steps 3/1``)."""
    server.push(
        tool_call("get_user_profile", user_id=42),
        tool_call("get_user_billing", user_id=42),
        reply("Anna"),
    )
    flags = ["--max-steps", "1", "--on-budget", "ask", "--approve-tool", "get_user_billing"]
    assert invoke("run", GOAL, "--thread", "later", *flags).exit_code == 4
    asked = invoke("resume", "later", "--args", '{"limit": 5}')
    assert asked.exit_code == 4, asked.stdout  # extended, then paused on the approval
    done = invoke("resume", "later", "--approve")
    assert done.exit_code == 0, done.stdout
    assert "steps        3/5" in done.stdout
