"""``gated-react run --mcp CONFIG.json``: MCP tools next to or instead of toolkits, under
--allow / --approve-tool / --trust-tool; resume finds the same servers; a server that fails is
one line or a stop reason; no server process outlives the command."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ..support.cli import cli, invoke, spawn
from ..support.mcp_servers import alive, serve_http, stdio_config
from ..support.openai_server import FakeOpenAI, reply, tool_call
from ..support.reaping import PATIENCE, reap, wait_for

GOAL = "Keep a note."


def config_file(tmp_path: Path, *flags: str, config: dict[str, Any] | None = None) -> Path:
    """An MCP config file whose stdio server writes its process id to ``tmp_path/pids``."""
    path = tmp_path / "mcp.json"
    pids = str(tmp_path / "pids")
    path.write_text(json.dumps(config or stdio_config("--pid-file", pids, *flags)))
    return path


def pids(tmp_path: Path) -> list[int]:
    return [int(line) for line in (tmp_path / "pids").read_text().split()]


def test_a_run_uses_mcp_tools_and_leaves_no_server_running(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    server.push(
        tool_call("notes__add_note", title="milk", text="buy milk"),
        tool_call("notes__list_notes"),
        reply("Noted."),
    )
    done = cli("run", GOAL, "--mcp", str(config_file(tmp_path)), "--json")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # the server's own stderr never reaches the terminal
    result = json.loads(done.stdout)
    assert [h["observation"] for h in result["history"]] == [
        {"result": "saved milk"},
        {"titles": ["milk"]},
    ]
    tools = server.requests[0]["tools"]
    assert "notes__word_count" in {tool["function"]["name"] for tool in tools}
    assert "get_user_profile" not in json.dumps(tools)  # --mcp alone: no default toolkit
    assert [alive(pid) for pid in pids(tmp_path)] == [False]


def test_mcp_tools_join_the_toolkits_and_a_missing_tool_stops(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    server.push(tool_call("calculate", expression="2 * 21"), tool_call("notes__nope"))
    out = invoke("run", GOAL, "-t", "calculator", "--mcp", str(config_file(tmp_path)), "--json")
    assert out.exit_code == 2, out.stderr
    result = json.loads(out.stdout)
    assert result["history"][0]["observation"]["result"] == 42
    assert result["stop_reason"] == "tool_missing:notes__nope"
    assert not alive(pids(tmp_path)[0])


def test_a_destructive_tool_pauses_and_resume_finds_the_same_servers(
    server: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config_file(tmp_path)
    server.push(tool_call("notes__delete_note", title="old"))
    paused = invoke("run", GOAL, "--mcp", "mcp.json", "--thread", "mcp-1", "--json")
    assert paused.exit_code == 4, paused.stderr
    assert json.loads(paused.stdout)["pending"][0]["tool"] == "notes__delete_note"
    monkeypatch.chdir(tmp_path.parent)  # the recorded config path is absolute
    server.push(reply("Deleted."))
    again = ("--mcp", str(tmp_path / "mcp.json"))  # given again, from anywhere
    done = invoke("resume", "mcp-1", *again, "--approve", "--json")
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["history"][0]["observation"] == {"result": "deleted old"}
    assert [alive(pid) for pid in pids(tmp_path)] == [False, False]  # run's, then resume's
    (tmp_path / "mcp.json").unlink()  # reading an ended run starts no server
    assert invoke("show", "mcp-1").exit_code == 0
    assert invoke("resume", "mcp-1").exit_code == 0
    assert len(pids(tmp_path)) == 2


@pytest.mark.parametrize(
    ("flags", "call", "code", "says"),
    [
        (["--trust-tool", "notes__delete_note"], ("notes__delete_note", {"title": "x"}), 0, ""),
        (["--approve-tool", "notes__list_notes"], ("notes__list_notes", {}), 4, ""),
        (["--allow", "notes__list_notes"], ("notes__shout", {"text": "x"}), 2, ""),
        (
            ["--trust-tool", "notes__nope"],
            ("notes__list_notes", {}),
            1,
            "gated-react: error: --trust-tool: no MCP tool named notes__nope; MCP tools: notes__",
        ),
    ],
)
def test_policy_flags_apply_to_mcp_tools(
    server: FakeOpenAI,
    tmp_path: Path,
    flags: list[str],
    call: tuple[str, dict[str, Any]],
    *,
    code: int,
    says: str,
) -> None:
    server.push(tool_call(call[0], **call[1]), reply("done"))
    out = invoke("run", GOAL, "--mcp", str(config_file(tmp_path)), *flags, "--json")
    assert out.exit_code == code, out.stderr
    assert out.stderr.startswith(says)
    assert not alive(pids(tmp_path)[0])


def test_a_run_over_streamable_http(server: FakeOpenAI, tmp_path: Path) -> None:
    with serve_http() as web:
        path = config_file(tmp_path, config=web.config())
        server.push(tool_call("web__shout", text="hi"), reply("HI"))
        out = invoke("run", GOAL, "--mcp", str(path), "--trust-tool", "web__shout", "--json")
    assert out.exit_code == 0, out.stderr
    assert json.loads(out.stdout)["history"][0]["observation"] == {"result": "HI"}


@pytest.mark.parametrize(
    ("config", "says"),
    [
        (stdio_config("--broken"), "failed to start: it closed the connection (stderr: Runtime"),
        ({"mcpServers": {"x": {"url": "ftp://x"}}}, "server 'x': url: String should match"),
        (None, "cannot read it: [Errno 2] No such file or directory"),
    ],
)
def test_a_server_that_cannot_start_is_one_line_and_exit_1(
    state_dir: Path, tmp_path: Path, config: dict[str, Any] | None, says: str
) -> None:
    path = tmp_path / "mcp.json"
    if config is not None:
        path.write_text(json.dumps(config))
    done = cli("run", GOAL, "--mcp", str(path), "--base-url", "http://127.0.0.1:9/v1")
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith("gated-react: error: ")
    assert says in done.stderr
    assert done.stderr.count("\n") == 1


def test_a_crash_mid_run_exits_3_with_one_line(server: FakeOpenAI, tmp_path: Path) -> None:
    server.push(tool_call("notes__crash"))
    done = cli("run", GOAL, "--mcp", str(config_file(tmp_path)), "--json")
    assert done.returncode == 3
    assert done.stderr == ""
    result = json.loads(done.stdout)
    assert result["stop_reason"] == "tool_error:notes__crash"
    assert result["message"].startswith("notes__crash failed: MCPError: mcp server 'notes' (")
    assert result["message"].endswith(") stopped: it closed the connection")


def test_ctrl_c_during_a_hanging_mcp_tool_stops_its_server(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    marker = tmp_path / "hanging"
    server.push(tool_call("notes__block", marker=str(marker)))
    proc = spawn("run", GOAL, "--mcp", str(config_file(tmp_path)), "--thread", "held")
    wait_for(marker.exists, proc, "the call")  # the server is inside it and reads nothing more
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=PATIENCE)
    finally:
        reap(proc)
    assert proc.returncode == 130
    assert "Traceback" not in err
    assert not alive(pids(tmp_path)[0])


def test_flags_that_do_not_fit_mcp_are_refused(state_dir: Path, tmp_path: Path) -> None:
    out = invoke("run", "--example", "000-support", "--mcp", str(config_file(tmp_path)))
    assert out.exit_code == 1
    assert "use --example or --mcp, not both" in out.stderr
    out = invoke("run", GOAL, "-t", "calculator", "--trust-tool", "calculate")
    assert out.exit_code == 1
    assert out.stderr == (
        "gated-react: error: --trust-tool: no MCP tool named calculate; "
        "MCP tools: none (no --mcp)\n"
    )


def test_commands_without_mcp_import_no_mcp_library(state_dir: Path) -> None:
    code = (
        "import sys\n"
        "from gated_react.cli.run_options import RunOptions\n"
        "options = RunOptions(toolkits=['calculator'])\n"
        "options.tools(), options.policy(), options.budget()\n"
        "print(sorted(m for m in sys.modules if m.startswith(('mcp', 'langchain_mcp', "
        "'gated_react.mcp', 'gated_react.tools._mcp'))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=PATIENCE
    )
    assert done.stdout.strip() == "[]"


def test_an_mcp_config_named_in_the_stored_options_starts_nothing(
    server: FakeOpenAI, state_dir: Path, tmp_path: Path
) -> None:
    """Before, resume started the MCP servers its checkpoints named: whoever could write the
    store could name a config file whose command then ran."""
    from gated_react.records.run_listing import METADATA_KEY

    from ..support.tamper import forge_metadata

    planted = tmp_path / "planted"
    planted.mkdir()
    named = config_file(planted)  # its server writes planted/pids when it starts
    server.push(tool_call("get_user_billing", user_id=42), reply("USD 49"))
    again = ["--approve-tool", "get_user_billing"]
    assert invoke("run", GOAL, "--thread", "m", *again).exit_code == 4
    edited = json.dumps({"approve": again[1:], "mcp": [str(named)]})
    forge_metadata(str(state_dir / "runs.sqlite"), "m", METADATA_KEY, edited)
    refused = invoke("resume", "m", "--approve")  # no options given: said, not started
    assert refused.exit_code == 1
    assert f"--mcp {named}" in refused.stderr
    done = invoke("resume", "m", *again, "--approve", "--json")
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["answer"] == "USD 49"
    assert not (planted / "pids").exists()
