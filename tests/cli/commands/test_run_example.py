"""``gated-react run --example NAME``: a seed system's goal, tools and policy from the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gated_react.examples import names

from ...support.cli import invoke
from ...support.openai_server import FakeOpenAI, reply, tool_call


def test_the_support_example_runs_with_its_own_goal_and_json_protocol(server: FakeOpenAI) -> None:
    server.push(
        reply(json.dumps({"kind": "tool", "name": "get_user_billing", "args": {"user_id": 42}})),
        reply(json.dumps({"kind": "final", "answer": "Yes, USD 49."})),
    )
    out = invoke("run", "--example", "000-support", "--json")
    assert out.exit_code == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["stop_reason"] == "success"
    assert server.requests[0]["response_format"]["type"] == "json_schema"
    assert "User 42" in server.requests[0]["messages"][1]["content"]


def test_the_data_example_works_on_its_own_copy_of_the_database(
    server: FakeOpenAI, state_dir: Path
) -> None:
    server.push(
        tool_call("query_database", sql="SELECT count(*) FROM orders"),
        reply("Counted."),
    )
    out = invoke("run", "--example", "002", "--thread", "ex", "--json")
    assert out.exit_code == 0, out.stderr
    assert json.loads(out.stdout)["history"][0]["observation"]["rows"][0][0] > 0
    assert any((state_dir / "examples" / "ex").rglob("*.sqlite"))


def test_unknown_example_and_conflicting_flags_are_one_line(server: FakeOpenAI) -> None:
    bad = invoke("run", "--example", "999")
    assert bad.exit_code == 1
    for name in names():
        assert name in bad.stderr
    both = invoke("run", "--example", "000", "--toolkit", "support")
    assert both.exit_code == 1
    assert "not both" in both.stderr


@pytest.mark.parametrize("thread", ["../../../x", "OUTSIDE", "..", "a/../../../../b", "."])
def test_a_thread_id_never_becomes_a_path_outside_the_state_folder(
    server: FakeOpenAI, state_dir: Path, tmp_path: Path, thread: str
) -> None:
    thread = str(tmp_path / "abs") if thread == "OUTSIDE" else thread
    server.push(reply("Action: read_file[src/cart.py]"), reply("Action: finish[found it]"))
    args = ("--thread", thread, "--approve-tool", "read_file", "--json")
    paused = invoke("run", "--example", "001-coding", *args)
    assert paused.exit_code == 4, paused.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["xdg"]  # nothing made beside it
    copies = [p.parent for p in (state_dir / "examples").rglob("cart.py") if p.parent.name == "src"]
    assert len(copies) == 1
    assert copies[0].parents[2] == state_dir / "examples"  # examples/<one folder>/cart_project/src
    again = ("--example", "001-coding", "--approve-tool", "read_file")
    done = invoke("resume", thread, *again, "--approve", "--json")
    assert done.exit_code == 0, done.stderr
    observation = json.loads(done.stdout)["history"][0]["observation"]
    assert "def " in json.dumps(observation)  # resume found the same copy of the project
    assert sorted(p.name for p in tmp_path.iterdir()) == ["xdg"]
