"""001 coding agent as shipped: bracket actions, and workspace tools on a copy they never leave."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gated_react import examples
from gated_react.examples import coding
from gated_react.protocols.text import parse_text

EXAMPLE = examples.get("001-coding")
NEIGHBOUR = "private-notes.txt"


def test_bracket_actions_map_onto_the_workspace_tools(tmp_path: Path) -> None:
    tools = {t.name: t for t in EXAMPLE.tools(tmp_path)}
    assert parse_text("Action: run_tests[tests/test_cart.py]", tools) == {
        "kind": "tool",
        "name": "run_tests",
        "args": {"path": "tests/test_cart.py"},
    }
    assert parse_text("Thought: x\nAction: finish[the cause]", tools) == {
        "kind": "final",
        "answer": "the cause",
    }
    assert EXAMPLE.policy().protocol == "text"


def test_every_run_gets_its_own_copy_and_a_second_call_reuses_it(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    EXAMPLE.tools(first)
    marker = first / coding.PROJECT / "notes.md"
    marker.write_text("kept")
    EXAMPLE.tools(first)  # a resumed run: same folder, same files
    EXAMPLE.tools(second)
    assert marker.read_text() == "kept"
    assert not (second / coding.PROJECT / "notes.md").exists()


@pytest.mark.parametrize(
    ("tool", "path", "why"),
    [
        ("read_file", "../private-notes.txt", "leaves the workspace"),
        ("read_file", "src/../../private-notes.txt", "leaves the workspace"),
        ("read_file", "/etc/passwd", "not a relative path"),
        ("read_file", "~/.ssh/id_rsa", "not a relative path"),
        ("read_file", "link-out.txt", "outside the workspace"),
        ("run_tests", "src/cart.py", "not a test file"),
        ("run_tests", "../private-notes.txt", "leaves the workspace"),
    ],
)
def test_the_workspace_tools_refuse_anything_outside_the_copy(
    tmp_path: Path, tool: str, path: str, why: str
) -> None:
    (tmp_path / NEIGHBOUR).write_text("Private: the agent must never read this line.\n")
    tools = {t.name: t for t in EXAMPLE.tools(tmp_path)}
    os.symlink(tmp_path / NEIGHBOUR, tmp_path / coding.PROJECT / "link-out.txt")
    with pytest.raises(ValueError, match=why):
        tools[tool].invoke({"path": path})
