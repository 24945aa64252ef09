"""MCP servers that fail, over stdio and streamable HTTP: one that cannot start, crashes mid-run,
hangs, returns an error or an oversized result gives a stop reason (an observation in observe
mode) and one line; no server process outlives its tools, closed or not."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from gated_react import Policy, build_graph
from gated_react.mcp import MCPError, MCPTools, load_tools
from gated_react.testing import ScriptedChatModel, call

from .support.mcp_servers import alive, ends, serve_http, stdio_config
from .support.reaping import PATIENCE
from .support.results import ainvoked, invoked


def run_graph(tools: MCPTools, replies: list[Any], mode: str = "invoke", **policy: Any) -> Any:
    graph = build_graph(ScriptedChatModel(replies=replies), tools, policy=Policy(**policy))
    goal = {"goal": "use the notes"}
    if mode == "invoke":
        return invoked(graph, goal)
    return asyncio.run(ainvoked(graph, goal))


def test_an_error_result_stops_the_run_or_is_observed(shared_mcp: tuple[MCPTools, str]) -> None:
    tools, prefix = shared_mcp
    wrong = call(f"{prefix}__read_note", title="missing")
    out = run_graph(tools, [wrong])
    assert out["stop_reason"] == f"tool_error:{prefix}__read_note"
    assert out["message"] == (
        f"{prefix}__read_note failed: MCPToolError: Error executing tool read_note: "
        "no note named 'missing'"
    )
    out = run_graph(tools, [wrong, "There is no such note."], on_tool_error="observe")
    assert out["stop_reason"] == "success"
    assert "no note named 'missing'" in out["history"][0]["observation"]


def test_an_oversized_result_is_refused(shared_mcp: tuple[MCPTools, str]) -> None:
    tools, prefix = shared_mcp
    out = run_graph(tools, [call(f"{prefix}__big", size=1_500_000)])
    assert out["stop_reason"] == f"tool_error:{prefix}__big"
    assert "characters, more than max_result_chars 1,000,000" in out["message"]
    small = run_graph(tools, [call(f"{prefix}__big", size=10), "ten"])
    assert small["history"][0]["observation"] == {"result": "x" * 10}


def test_a_result_is_counted_once_against_max_result_chars(
    shared_mcp: tuple[MCPTools, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tools, prefix = shared_mcp  # the server sends it twice: as text and as structured content
    big = next(tool for tool in tools if tool.name == f"{prefix}__big")
    assert big.invoke({"size": 600_000}) == {"result": "x" * 600_000}
    monkeypatch.setattr(big, "max_result_chars", 600_013)  # the module's tool, put back after
    with pytest.raises(MCPError, match=r"replied with 600,014 characters, more than max_res"):
        big.invoke({"size": 600_000})


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_hang_times_out_and_the_server_still_answers(
    own_mcp: tuple[MCPTools, str], mode: str
) -> None:
    tools, prefix = own_mcp
    hang, listing = call(f"{prefix}__hang"), call(f"{prefix}__list_notes")
    out = run_graph(tools, [hang], mode, tool_timeout_seconds=1)
    assert out["stop_reason"] == f"tool_timeout:{prefix}__hang"
    said = f"{prefix}__hang did not return within 1 s"
    assert out["message"].startswith(said)
    assert ("may still finish" in out["message"]) == (mode == "invoke")  # left on its thread
    out = run_graph(
        tools, [hang, listing, "none"], mode, tool_timeout_seconds=1, on_tool_error="observe"
    )
    assert out["stop_reason"] == "success"
    assert out["history"][1]["observation"] == {"titles": []}


def test_a_crash_mid_run_stops_the_run_and_later_calls_fail_at_once(
    own_mcp: tuple[MCPTools, str],
) -> None:
    tools, prefix = own_mcp
    out = run_graph(tools, [call(f"{prefix}__list_notes"), call(f"{prefix}__crash")])
    assert out["stop_reason"] == f"tool_error:{prefix}__crash"
    assert f"MCPError: mcp server '{prefix}' (" in out["message"]
    assert ") stopped: " in out["message"]
    assert "\n" not in out["message"]
    later = run_graph(tools, [call(f"{prefix}__list_notes")], on_tool_error="stop")
    assert later["message"].endswith(out["message"].split(": ", 1)[1])


def test_a_server_that_fails_to_start_is_one_line_with_its_last_words() -> None:
    config = stdio_config("--broken", env={"NOTES_TOKEN": "sekrit-token-1234"})
    with pytest.raises(MCPError) as caught:
        load_tools(config)
    line = str(caught.value)
    assert line.startswith("mcp server 'notes' (")
    assert line.endswith(
        "failed to start: it closed the connection (stderr: RuntimeError: the notes database "
        "is locked (token ***))"
    )


@pytest.mark.parametrize(
    ("config", "says"),
    [
        (
            {"mcpServers": {"gone": {"command": "/no/such/server"}}},
            "mcp server 'gone' ('/no/such/server') failed to start: cannot run "
            "'/no/such/server': No such file or directory",
        ),
        (
            {"mcpServers": {"down": {"url": "http://127.0.0.1:9/mcp"}}},
            "mcp server 'down' (http://127.0.0.1:9/mcp) failed to start: ConnectError: All "
            "connection attempts failed",
        ),
    ],
)
def test_a_server_that_cannot_be_reached_is_one_line(config: dict[str, Any], says: str) -> None:
    with pytest.raises(MCPError) as caught:
        load_tools(config)
    assert str(caught.value) == says


def test_a_server_on_a_wrong_path_is_one_line() -> None:
    with serve_http() as server, pytest.raises(MCPError) as caught:
        load_tools({"mcpServers": {"web": {"url": server.url + "/wrong"}}})
    assert "mcp server 'web' (http://127.0.0.1:" in str(caught.value)
    assert "failed to start: " in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_server_that_never_answers_times_out_and_is_stopped(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    with pytest.raises(MCPError) as caught:
        load_tools(stdio_config("--mute", "--pid-file", str(pids)), startup_timeout=1)
    assert str(caught.value).endswith("did not answer within 1 s of starting")
    assert not alive(int(pids.read_text()))


def test_an_http_server_that_never_answers_times_out() -> None:
    with socket.socket() as listener:  # takes connections (the backlog) and never replies
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
        with pytest.raises(MCPError) as caught:
            load_tools({"mcpServers": {"mute": {"url": url}}}, startup_timeout=1)
    assert str(caught.value) == f"mcp server 'mute' ({url}) did not answer within 1 s of starting"


def test_no_stdio_server_outlives_closing_even_mid_call(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    tools = load_tools(stdio_config("--pid-file", str(pids)))
    out = run_graph(tools, [call("notes__block")], tool_timeout_seconds=0.5)
    assert out["stop_reason"] == "tool_timeout:notes__block"  # still running on the server
    pid = int(pids.read_text())
    assert alive(pid)
    tools.close()
    assert not alive(pid)
    with pytest.raises(MCPError, match="mcp server 'notes' was closed; load the tools again"):
        tools[0].invoke({})


def test_a_child_of_a_server_that_failed_to_start_is_stopped(tmp_path: Path) -> None:
    child = tmp_path / "child"
    with pytest.raises(MCPError, match="failed to start"):
        load_tools(stdio_config("--child", str(child), "--broken"))
    assert ends(int(child.read_text()))


def test_a_child_of_a_server_that_never_answered_is_stopped(tmp_path: Path) -> None:
    child = tmp_path / "child"
    with pytest.raises(MCPError, match="did not answer within 1 s"):
        load_tools(stdio_config("--child", str(child), "--mute"), startup_timeout=1)
    assert ends(int(child.read_text()))


def test_a_tools_child_process_ends_with_its_server_on_close() -> None:
    tools = load_tools(stdio_config())
    try:
        spawn = next(tool for tool in tools if tool.name == "notes__spawn")
        pid = spawn.invoke({})["result"]
        assert alive(pid)
    finally:
        tools.close()  # the server exits at the end of its input; the child is in its group
    assert ends(pid)


def test_a_tools_child_process_ends_when_its_server_crashes() -> None:
    with load_tools(stdio_config()) as tools:
        named = {tool.name: tool for tool in tools}
        pid = named["notes__spawn"].invoke({})["result"]
        with pytest.raises(MCPError, match="stopped"):
            named["notes__crash"].invoke({})
        assert ends(pid)


def test_servers_nobody_closed_stop_when_the_program_exits(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = textwrap.dedent(
        f"""
        import os, sys, threading, time
        sys.path.insert(0, {str(Path(__file__).parent / "support")!r})
        from mcp_servers import stdio_config
        from gated_react.mcp import load_tools
        tools = load_tools(stdio_config("--pid-file", {str(pids)!r}))
        block = next(tool for tool in tools if tool.name == "notes__block")
        marker = {str(tmp_path / "hanging")!r}
        def wait():
            try:
                block.invoke({{"marker": marker}})
            except Exception as exc:
                print(exc, file=sys.stderr)
        threading.Thread(target=wait, daemon=True).start()
        while not os.path.exists(marker):  # the call is under way on the server
            time.sleep(0.01)
        print("loaded")
        """
    )
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", script],
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "loaded\n"
    assert done.stderr in ("", "mcp server 'notes' was closed during the call\n")
    assert not alive(int(pids.read_text()))  # stopped before the program ended
