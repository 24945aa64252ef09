"""The package is typed for its users: the README's code passes ``mypy --strict`` in an app of
one's own against the installed package, and the results of ``run``/``resume``/``read`` are
typed, so a misspelled key is a type error, not a ``KeyError`` in production."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _blocks(section: str) -> list[str]:
    text = (REPO / "README.md").read_text()
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", body, flags=re.DOTALL)


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
    resuming = _blocks("Resuming runs")[:3]  # one story: run, resume after a crash, approval
    files = {"use_it.py": _blocks("Use it")[0], "resuming.py": "\n".join(resuming), "typo.py": TYPO}
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
    assert (REPO / "src" / "gated_react" / "py.typed").is_file()
