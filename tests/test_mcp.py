"""gated_react.mcp against real MCP servers (tests/support/mcp_servers.py) over stdio and
streamable HTTP: names, one session per server, invoke and ainvoke, annotations into the policy,
config errors, the server's environment, the example the MCP guide quotes."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from gated_react import Policy, build_graph, resume, run
from gated_react.mcp import MCPConfigError, MCPError, MCPTools, load_tools, mcp_policy
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools._mcp_config import tool_name

from .support import mcp_servers
from .support.mcp_servers import serve_http, stdio_config
from .support.reaping import PATIENCE
from .support.results import ainvoked, invoked

NAMES = {
    "read_note",
    "list_notes",
    "add_note",
    "delete_note",
    "shout",
    "word_count",
    "hang",
    "block",
    "crash",
    "big",
    "whoami",
    "transfer",
    "ledger",
    "spawn",
}


@pytest.fixture(scope="module")
def stdio_tools() -> Iterator[MCPTools]:
    with load_tools(stdio_config()) as tools:
        yield tools


@pytest.fixture(scope="module")
def http_tools() -> Iterator[MCPTools]:
    with serve_http() as server, load_tools(server.config()) as tools:
        yield tools


@pytest.fixture(params=["stdio", "http"])
def tools(request: pytest.FixtureRequest) -> MCPTools:
    found: MCPTools = request.getfixturevalue(f"{request.param}_tools")
    return found


def by_name(tools: list[Any]) -> dict[str, Any]:
    return {tool.name.split("__", 1)[1]: tool for tool in tools}


def test_tools_are_named_server__tool_in_letters_digits_and_underscores(
    stdio_tools: MCPTools, http_tools: MCPTools
) -> None:
    assert {tool.name for tool in stdio_tools} == {f"notes__{name}" for name in NAMES}
    assert {tool.name for tool in http_tools} == {f"web__{name}" for name in NAMES}
    word_count = by_name(stdio_tools)["word_count"]
    assert (word_count.server, word_count.remote_name) == ("notes", "word.count")
    assert tool_name("my server.v2", "get/time") == "my_server_v2__get_time"


def test_long_names_are_cut_to_64_characters_and_stay_unique() -> None:
    one, two = tool_name("s" * 40, "t" * 40 + "a"), tool_name("s" * 40, "t" * 40 + "b")
    assert len(one) == len(two) == 64
    assert one != two
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", one)


def test_one_session_per_server_keeps_its_state_between_calls(tools: MCPTools) -> None:
    named = by_name(tools)
    assert named["add_note"].invoke({"title": "kept", "text": "one session"}) == {
        "result": "saved kept"
    }
    assert "kept" in named["list_notes"].invoke({})["titles"]
    assert named["read_note"].invoke({"title": "kept"}) == {"result": "one session"}


def test_invoke_ainvoke_and_a_worker_threads_own_event_loop(tools: MCPTools) -> None:
    count = by_name(tools)["word_count"]
    assert count.invoke({"text": "a b c"}) == {"result": 3}
    assert asyncio.run(count.ainvoke({"text": "a b"})) == {"result": 2}
    seen: list[Any] = []

    def worker() -> None:  # the runner's worker threads run async tools on a loop of their own
        seen.append(asyncio.run(count.ainvoke({"text": "one"})))
        seen.append(count.invoke({"text": "x y z w"}))

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(PATIENCE)
    assert seen == [{"result": 1}, {"result": 4}]


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_graph_runs_mcp_tools(tools: MCPTools, mode: str) -> None:
    prefix = tools[0].server
    title = f"graph-{mode}"
    model = ScriptedChatModel(
        replies=[
            call(f"{prefix}__add_note", title=title, text="hi"),
            call(f"{prefix}__read_note", title=title),
            "The note says hi.",
        ]
    )
    graph = build_graph(model, tools)
    goal = {"goal": "write a note"}
    out = invoked(graph, goal) if mode == "invoke" else asyncio.run(ainvoked(graph, goal))
    assert out["stop_reason"] == "success"
    assert [h["observation"] for h in out["history"]] == [
        {"result": f"saved {title}"},
        {"result": "hi"},
    ]


def test_a_missing_tool_in_observe_mode_lists_the_mcp_tools(stdio_tools: MCPTools) -> None:
    model = ScriptedChatModel(replies=[call("notes__nope"), "No such tool."])
    graph = build_graph(model, stdio_tools, policy=Policy(on_tool_error="observe"))
    out = invoked(graph, {"goal": "use a tool that is not there"})
    assert out["stop_reason"] == "success"
    seen = out["history"][0]["observation"]
    assert seen.startswith("there is no tool named 'notes__nope'. Tools you may call: [")
    assert all(f"'notes__{name}'" in seen for name in NAMES)


def test_annotations_mark_idempotent_and_destructive_tools(stdio_tools: MCPTools) -> None:
    marks = {
        name: (tool.metadata["idempotent"], tool.metadata["destructive"])
        for name, tool in by_name(stdio_tools).items()
    }
    assert marks["read_note"] == (True, False)  # readOnlyHint
    assert marks["add_note"] == (False, False)  # destructiveHint false: additive
    assert marks["delete_note"] == (True, True)  # destructive and idempotent
    assert marks["word_count"] == (True, True)  # idempotentHint; no readOnlyHint: MCP's default
    assert marks["shout"] == (False, True)  # no annotations at all: MCP's defaults
    assert by_name(stdio_tools)["read_note"].metadata["mcp_annotations"] == {"readOnlyHint": True}


def test_mcp_policy_asks_for_destructive_tools_unless_trusted(stdio_tools: MCPTools) -> None:
    assert mcp_policy(stdio_tools).require_approval == {
        "notes__delete_note",
        "notes__shout",
        "notes__word_count",
    }
    base = Policy().replace(require_approval={"notes__read_note"}, max_steps=3)
    policy = mcp_policy(stdio_tools, base, trust={"notes__shout", "notes__word_count"})
    assert policy.require_approval == {"notes__delete_note", "notes__read_note"}
    assert policy.budget.max_steps == 3
    kept = mcp_policy(
        stdio_tools, Policy(require_approval={"notes__shout"}), trust={"notes__shout"}
    )
    assert "notes__shout" in kept.require_approval  # what the policy requires stays required
    with pytest.raises(MCPConfigError, match="trust: no tool named notes__nope; tools: notes__add"):
        mcp_policy(stdio_tools, trust={"notes__nope"})


def test_a_destructive_call_pauses_and_runs_once_approved(stdio_tools: MCPTools) -> None:
    model = ScriptedChatModel(
        replies=[call("notes__delete_note", title="gone"), "Deleted."], cycle=False
    )
    graph = build_graph(
        model, stdio_tools, policy=mcp_policy(stdio_tools), checkpointer=InMemorySaver()
    )
    paused = run(graph, "delete the note", thread_id="approve-me")
    assert paused["status"] == "paused"
    assert paused["pending"][0]["tool"] == "notes__delete_note"
    done = resume(graph, "approve-me", {"approved": True})
    assert done["stop_reason"] == "success"
    assert done["history"][0]["observation"] == {"result": "deleted gone"}


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({}, 'expected {"mcpServers": {name: server, ...}}'),
        ({"mcpServers": {}}, "names no servers"),
        ({"mcpServers": {"a": {"args": []}}}, 'server \'a\' needs "command" (stdio) or "url"'),
        ({"mcpServers": {"a": {"command": "x", "arg": []}}}, "server 'a': arg: Extra inputs"),
        ({"mcpServers": {"a": {"url": "ftp://x"}}}, "server 'a': url: String should match"),
        ({"mcpServers": {"a": {"type": "sse", "url": "http://x"}}}, "transport 'sse' is not"),
        ({"mcpServers": {"a": {"command": "x", "env": {"K": 1}}}}, "env.K: Input should be"),
        ("/no/such/mcp.json", "MCP config /no/such/mcp.json: cannot read it: [Errno 2]"),
    ],
)
def test_a_bad_config_is_one_line(config: Any, says: str) -> None:
    with pytest.raises(MCPConfigError) as caught:
        load_tools(config)
    assert says in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_config_file_that_is_not_json(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text("{not json")
    with pytest.raises(MCPConfigError, match=r"mcp.json: not valid JSON: Expecting property"):
        load_tools(path)


def test_a_server_named_in_two_configs_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text('{"mcpServers": {"notes": {"command": "x"}}}')
    with pytest.raises(MCPConfigError, match=r"server 'notes' is already defined in the MCP"):
        load_tools([stdio_config(), path])


def test_two_tools_that_would_share_a_name_are_refused() -> None:
    config = {"mcpServers": {**stdio_config(name="n.x")["mcpServers"]}}
    config["mcpServers"].update(stdio_config(name="n_x")["mcpServers"])
    with pytest.raises(MCPConfigError) as caught:
        load_tools(config)
    assert "would both be named 'n_x__read_note'; rename one of the servers" in str(caught.value)


def test_a_config_files_servers_start_in_its_folder(tmp_path: Path) -> None:
    shutil.copy(mcp_servers.SCRIPT, tmp_path / "notes_server.py")
    path = tmp_path / "mcp.json"
    server = {"command": sys.executable, "args": ["notes_server.py", "stdio"]}
    path.write_text(json.dumps({"mcpServers": {"local": server}}))
    with load_tools(str(path)) as tools:
        assert by_name(tools)["shout"].invoke({"text": "here"}) == {"result": "HERE"}


def test_a_stdio_server_gets_no_secret_from_our_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-for-servers")
    with load_tools(stdio_config(env={"NOTES_TOKEN": "given-token-42"})) as tools:
        named = by_name(tools)
        env = named["whoami"].invoke({})["env"]
        # What the config gives a server is a secret: masked in whatever comes back.
        named["add_note"].invoke({"title": "t", "text": "my given-token-42"})
        assert named["read_note"].invoke({"title": "t"}) == {"result": "my ***"}
        with pytest.raises(MCPError, match=r"no note named '\*\*\*'") as caught:
            named["read_note"].invoke({"title": "given-token-42"})
        assert "given-token-42" not in str(caught.value)
    assert "OPENAI_API_KEY" not in env
    assert "NOTES_TOKEN" in env
    assert set(env) <= {
        "HOME",
        "LOGNAME",
        "PATH",
        "SHELL",
        "TERM",
        "USER",
        "NOTES_TOKEN",
        "LC_CTYPE",
    }


def test_without_the_mcp_extra_the_error_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "langchain_mcp_adapters", None)
    with pytest.raises(MCPError, match=r"need the mcp extra: pip install 'gated-react\[mcp\]'"):
        load_tools(stdio_config())
