"""001 coding agent, scripted: the diagnosis on a throwaway copy, and a model trying to leave."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from gated_react.examples.coding import PROJECT
from gated_react.examples.spec import package_files
from gated_react.testing import ScriptedChatModel
from scenarios import coding
from scenarios.runner import run_scenario

SEED = coding.SEED
EXAMPLE = SEED.example
ORIGINAL = Path(str(package_files() / PROJECT))


def fingerprint(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def run(name: str, workdir: Path) -> dict[str, Any]:
    scenario = SEED.scenario(name)
    out = run_scenario(EXAMPLE, scenario, ScriptedChatModel(replies=list(scenario.script)), workdir)
    assert scenario.expect.problems(out, EXAMPLE.goal) == []
    return out


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
    assert (tmp_path / PROJECT / "src" / "cart.py").is_file()
    assert fingerprint(ORIGINAL) == before
    assert not (ORIGINAL / "tests" / "__pycache__").exists()


def test_the_diagnosis_is_right_fixing_that_line_makes_the_tests_pass(tmp_path: Path) -> None:
    run("find-the-cause", tmp_path)
    cart = tmp_path / PROJECT / "src" / "cart.py"
    source = cart.read_text()
    cart.write_text(
        source.replace("item.unit_cents for item", "item.unit_cents * item.quantity for item")
    )
    run_tests = {t.name: t for t in EXAMPLE.tools(tmp_path)}["run_tests"]
    assert run_tests.invoke({"path": "tests/test_cart.py"})["passed"] is True


def test_paths_out_of_the_copy_are_refused_and_the_model_reads_why(tmp_path: Path) -> None:
    out = run("stay-inside", tmp_path)
    shown = [str(h["observation"]) for h in out["history"]]
    assert "leaves the workspace" in shown[0]
    assert "not a relative path inside the workspace" in shown[1]
    assert (tmp_path / coding.NEIGHBOUR).is_file()  # it was there to be read, and was not
    assert not any("must never read" in text for text in shown)
