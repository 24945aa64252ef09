"""001 coding agent: bracket actions on a throwaway copy that the tools never leave."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from gated_react import examples
from gated_react.examples import coding
from gated_react.examples.runner import run_scenario
from gated_react.examples.spec import package_files
from gated_react.protocols.text import parse_text
from gated_react.testing import ScriptedChatModel

EXAMPLE = examples.get("001-coding")
ORIGINAL = Path(str(package_files() / coding.PROJECT))


def fingerprint(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def run(name: str, workdir: Path) -> dict[str, Any]:
    scenario = EXAMPLE.scenario(name)
    out = run_scenario(EXAMPLE, scenario, ScriptedChatModel(replies=list(scenario.script)), workdir)
    assert scenario.expect.problems(out, EXAMPLE.goal) == []
    return out


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


def test_the_agent_finds_the_cause_on_a_copy_and_the_original_is_untouched(
    tmp_path: Path,
) -> None:
    before = fingerprint(ORIGINAL)
    out = run("find-the-cause", tmp_path)
    tests_run = out["history"][0]["observation"]
    assert tests_run["passed"] is False
    assert "2 failed, 1 passed" in tests_run["output"]
    assert "assert 3249 == 4499" in tests_run["output"]
    assert "sum(item.unit_cents for item in self.items)" in out["history"][1]["observation"]
    assert (tmp_path / coding.PROJECT / "src" / "cart.py").is_file()
    assert fingerprint(ORIGINAL) == before
    assert not (ORIGINAL / "tests" / "__pycache__").exists()


def test_the_diagnosis_is_right_fixing_that_line_makes_the_tests_pass(tmp_path: Path) -> None:
    run("find-the-cause", tmp_path)
    cart = tmp_path / coding.PROJECT / "src" / "cart.py"
    source = cart.read_text()
    cart.write_text(
        source.replace("item.unit_cents for item", "item.unit_cents * item.quantity for item")
    )
    run_tests = {t.name: t for t in EXAMPLE.tools(tmp_path)}["run_tests"]
    assert run_tests.invoke({"path": "tests/test_cart.py"})["passed"] is True


def test_every_run_gets_its_own_copy_and_a_second_call_reuses_it(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    EXAMPLE.tools(first)
    marker = first / coding.PROJECT / "notes.md"
    marker.write_text("kept")
    EXAMPLE.tools(first)  # a resumed run: same folder, same files
    EXAMPLE.tools(second)
    assert marker.read_text() == "kept"
    assert not (second / coding.PROJECT / "notes.md").exists()


def test_paths_out_of_the_copy_are_refused_and_the_model_reads_why(tmp_path: Path) -> None:
    out = run("stay-inside", tmp_path)
    shown = [str(h["observation"]) for h in out["history"]]
    assert "leaves the workspace" in shown[0]
    assert "not a relative path inside the workspace" in shown[1]
    assert (tmp_path / coding.NEIGHBOUR).is_file()  # it was there to be read, and was not
    assert not any("must never read" in text for text in shown)


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
    tools = {t.name: t for t in coding.tools_with_a_neighbour(tmp_path)}
    os.symlink(tmp_path / coding.NEIGHBOUR, tmp_path / coding.PROJECT / "link-out.txt")
    with pytest.raises(ValueError, match=why):
        tools[tool].invoke({"path": path})
