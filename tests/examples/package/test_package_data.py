"""The examples' data files ship in the wheel, its test machinery does not, and the examples run
from an installed wheel (their scripted scenarios come from the repository's examples/ folder)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parents[3]
DATA = (
    "gated_react/examples/files/orders.sqlite",
    "gated_react/examples/files/search_corpus.json",
    "gated_react/examples/files/cart_project/pyproject.toml",
    "gated_react/examples/files/cart_project/src/cart.py",
    "gated_react/examples/files/cart_project/tests/test_cart.py",
)
# What the CLI needs from each example, and nothing that only demos and tests use.
MODULES = {"__init__", "spec", "support", "coding", "data_agent", "search_calculate", "orders_db"}
CHECK = """
import sys, tempfile
from pathlib import Path
import gated_react
from gated_react import examples
assert gated_react.__file__.startswith(sys.argv[1]), gated_react.__file__
with tempfile.TemporaryDirectory() as scratch:
    for name in examples.names():
        example = examples.get(name)
        assert example.goal and example.policy() and example.tools(Path(scratch) / name)
assert "gated_react.testing" not in sys.modules, "the examples package imports test machinery"
import scenarios
from scenarios.runner import run_scripted
assert scenarios.__file__.startswith(sys.argv[2]), scenarios.__file__
for seed in scenarios.SEEDS:
    result, problems = run_scripted(seed.example, seed.scenario())
    assert problems == [], (seed.example.name, problems)
    print(seed.example.name, result["stop_reason"])
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("gated_react-*.whl")
    return built


def test_the_wheel_holds_the_data_files(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [name for name in DATA if name not in names]
    assert missing == []
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]


def test_the_wheel_ships_no_test_machinery(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        sources = {
            PurePosixPath(name).stem: archive.read(name).decode()
            for name in archive.namelist()
            if PurePosixPath(name).parent == PurePosixPath("gated_react/examples")
            and name.endswith(".py")
        }
    assert set(sources) == MODULES
    for name, source in sources.items():
        for machinery in ("gated_react.testing", "Scenario", "Expect", "ScriptedChatModel"):
            assert machinery not in source, f"{name}.py mentions {machinery}"


def test_the_examples_run_from_the_installed_wheel(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "-t", str(target), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    examples_dir = ROOT / "examples"
    done = subprocess.run(
        [sys.executable, "-c", CHECK, str(target), str(examples_dir)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(target), str(examples_dir)])},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "000-support", "success", "001-coding", "success",
        "002-data", "success", "003-search", "success",
    ]  # fmt: skip
