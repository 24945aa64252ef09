"""The examples' data files ship in the wheel, and the examples run from an installed wheel."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = (
    "gated_react/examples/files/orders.sqlite",
    "gated_react/examples/files/search_corpus.json",
    "gated_react/examples/files/cart_project/pyproject.toml",
    "gated_react/examples/files/cart_project/src/cart.py",
    "gated_react/examples/files/cart_project/tests/test_cart.py",
)
CHECK = """
import sys
import gated_react
from gated_react import examples
from gated_react.examples.runner import run_scripted
assert gated_react.__file__.startswith(sys.argv[1]), gated_react.__file__
for name in examples.names():
    example = examples.get(name)
    result, problems = run_scripted(example, example.scenario())
    assert problems == [], (name, problems)
    print(name, result["stop_reason"])
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


def test_the_examples_run_from_the_installed_wheel(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "-t", str(target), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    done = subprocess.run(
        [sys.executable, "-c", CHECK, str(target)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(target)},
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
