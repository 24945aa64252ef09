"""The package is typed for its users: the README's and the docs' code passes ``mypy --strict``
in an app of one's own against the installed package, and the results of ``run``, ``resume``
and ``read`` are typed, so a misspelled key is a type error, not a ``KeyError`` in production."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .support.docs import page, python_blocks, section

TYPO = """\
from gated_react import build_graph, read, run
from gated_react.testing import ScriptedChatModel
from langgraph.checkpoint.memory import InMemorySaver

graph = build_graph(ScriptedChatModel(replies=["hi"]), [], checkpointer=InMemorySaver())
out = run(graph, "say hi")
print(out["statsu"])
print(read(graph, out["thread_id"])["usage"]["tokns"])
"""


def test_readme_code_passes_mypy_strict_and_result_keys_are_checked(tmp_path: Path) -> None:
    first_run = python_blocks(section(page("getting-started.md"), "First run in Python"))[0]
    # one story: run, resume after a crash (resuming.md), then approval (approvals.md)
    resuming = python_blocks(page("guides/resuming.md"))[:2]
    resuming.append(python_blocks(page("guides/approvals.md"))[0])
    files = {
        "readme.py": python_blocks(page("README.md"))[0],
        "first_run.py": first_run,
        "resuming.py": "\n".join(resuming),
        "typo.py": TYPO,
    }
    for name, code in files.items():
        (tmp_path / name).write_text(code)
    mypy = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", *files]
    done = subprocess.run(
        mypy, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False
    )
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert [line.split(":")[0] for line in errors] == ["typo.py", "typo.py"], done.stdout
    assert '"statsu"' in errors[0]
    assert '"tokns"' in errors[1]


def test_the_package_says_it_is_typed() -> None:
    assert (Path(__file__).resolve().parents[1] / "src" / "gated_react" / "py.typed").is_file()
