"""Every code block of the README and of every page under docs/ runs, or says why it cannot.

The conventions (CONTRIBUTING.md, "Documentation"):

- A ```python block runs as written, top to bottom, in one namespace per page, in a fresh
  folder, offline (the scripted model stands in for a real one). A block that cannot run here is
  preceded by ``<!-- not-run: the reason -->``; a reason ``excerpt of examples/api/x.py`` says the
  block is a verbatim excerpt of that file, which must hold it (and which a test runs whole).
- A shell block (bash, sh, console) runs only when preceded by ``<!-- run -->`` (a console
  block's ``$ `` lines are its commands), from the repository's root as after ``make setup``
  (the virtualenv first on PATH), with a fresh HOME; it must exit 0. Every other shell block
  says why it does not run.

New pages are picked up by themselves: the pages are every .md under docs/ and the README.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ..support.docs import REPO, SHELLS, Block, blocks, pages, runnable_python

PAGES = pages()
EXCERPT = re.compile(r"^excerpt of (?P<path>\S+?)(?:[,;:]|\s|$)")


def _id(path: Path) -> str:
    return str(path.relative_to(REPO))


def _every_block() -> list[Block]:
    return [block for path in PAGES for block in blocks(path)]


def _stripped(code: str) -> list[str]:
    return [line.strip() for line in code.splitlines() if line.strip()]


def test_the_pages_are_found() -> None:
    names = {_id(path) for path in PAGES}
    assert {"README.md", "docs/index.md", "docs/guides/approvals.md"} <= names
    assert not any("studio-workspace" in name for name in names)


@pytest.mark.parametrize("block", _every_block(), ids=lambda block: block.where)
def test_every_block_is_marked_as_the_conventions_say(block: Block) -> None:
    assert block.lang, f"{block.where}: a code block needs a language (```python, ```bash, ...)"
    assert block.lang not in {"py", "python3", "pycon"}, f"{block.where}: write ```python"
    if block.not_run is not None:
        assert not block.run
        assert len(block.not_run.split()) >= 3, f"{block.where}: say why it cannot run"
    if block.lang in SHELLS:
        assert block.run or block.not_run, (
            f"{block.where}: a shell block needs <!-- run --> or <!-- not-run: reason -->"
        )
    if block.run:
        assert block.lang in SHELLS, f"{block.where}: <!-- run --> marks shell blocks only"


def _excerpts() -> list[Block]:
    return [b for b in _every_block() if b.not_run and EXCERPT.match(b.not_run)]


@pytest.mark.parametrize("block", _excerpts(), ids=lambda block: block.where)
def test_an_excerpt_is_verbatim_in_the_file_it_names(block: Block) -> None:
    found = EXCERPT.match(block.not_run or "")
    assert found
    source = REPO / found.group("path")
    assert source.is_file(), f"{block.where}: no file {found.group('path')}"
    wanted, lines = _stripped(block.code), _stripped(source.read_text())
    assert any(lines[i : i + len(wanted)] == wanted for i in range(len(lines) - len(wanted) + 1)), (
        f"{block.where}: not verbatim in {found.group('path')}"
    )


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh folder and home, no model configured, no tracing: what a snippet runs in."""
    monkeypatch.chdir(tmp_path)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "GATED_REACT_DB"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("LANGSMITH_TRACING", "false")
    return tmp_path


PYTHON_PAGES = [path for path in PAGES if runnable_python(path)]


@pytest.mark.parametrize("path", PYTHON_PAGES, ids=_id)
def test_the_python_of_a_page_runs_top_to_bottom(path: Path, offline: Path) -> None:
    scope: dict[str, Any] = {"__name__": "__docs__"}
    for block in runnable_python(path):
        # the page's line numbers in tracebacks: the block starts after its fence
        code = "\n" * block.line + block.code
        exec(compile(code, str(block.path), "exec"), scope)


def _shell(block: Block) -> str:
    if block.lang != "console":
        return block.code
    return "\n".join(line[2:] for line in block.code.splitlines() if line.startswith("$ "))


RUN_BLOCKS = [b for b in _every_block() if b.run]


@pytest.mark.parametrize("block", RUN_BLOCKS, ids=lambda block: block.where)
def test_a_shell_block_marked_run_exits_0(block: Block, offline: Path) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", _shell(block)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"{block.where}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
