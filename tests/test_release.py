"""The package says which release it is: 0.1.0, the same in its metadata, in
``gated_react.__version__``, in ``gated-react --version`` and in what each run records."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

import gated_react
from gated_react.release import package_version

from .support.cli import CLI, invoke

RELEASE = "0.1.0"


def test_the_version_is_the_releases_wherever_it_is_read() -> None:
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    assert tomllib.loads(pyproject.read_text())["project"]["version"] == RELEASE
    assert package_version() == RELEASE
    assert gated_react.__version__ == RELEASE
    assert "__version__" not in gated_react.__all__  # a module attribute, not an API name


def test_the_cli_prints_its_version() -> None:
    shown = invoke("--version")
    assert (shown.exit_code, shown.stdout) == (0, f"gated-react {RELEASE}\n")
    installed = subprocess.run([CLI, "--version"], capture_output=True, text=True, check=True)
    assert installed.stdout == f"gated-react {RELEASE}\n"
