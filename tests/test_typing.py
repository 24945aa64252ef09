"""The package is typed for its users: the README's and the docs' code passes ``mypy --strict``
in an app of one's own against the installed package, and the results of ``run``, ``resume``
and ``read`` are typed, so a misspelled key is a type error, not a ``KeyError`` in production;
what ``create_agent`` users write (a plain set of tool names, a model string) passes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .support.docs import REPO, pages, runnable_python

PAGES = pages()

TYPO = """\
from gated_react import build_graph, read, run
from gated_react.testing import ScriptedChatModel
from langgraph.checkpoint.memory import InMemorySaver

graph = build_graph(ScriptedChatModel(replies=["hi"]), [], checkpointer=InMemorySaver())
out = run(graph, "say hi")
print(out["statsu"])
print(read(graph, out["thread_id"])["usage"]["tokns"])
"""

APP = """\
from gated_react import Policy, Question, RunInputDict, build_graph, run
from gated_react.testing import ScriptedChatModel
from langgraph.checkpoint.memory import InMemorySaver

policy = Policy(require_approval={"x"}, allow={"x"})  # a plain set, as users write it
graph = build_graph(ScriptedChatModel(replies=["hi"]), [], checkpointer=InMemorySaver())
by_name = build_graph("openai:gpt-4.1-mini", [])  # create_agent's model strings
asked: RunInputDict = {"messages": [{"role": "user", "content": "hi"}]}
out = run(graph, "say hi")
question: Question = out["pending"][0]
print(question["id"], question["action_requests"][0]["name"], question["tol"])
"""

CONTEXT = """\
from dataclasses import dataclass

from gated_react import build_graph
from gated_react.testing import ScriptedChatModel


@dataclass
class Ctx:
    user_id: str


graph = build_graph(ScriptedChatModel(replies=["hi"]), [], context_schema=Ctx)
graph.invoke({"goal": "hi"}, context=Ctx("u1"))  # the run's context, typed by its schema
"""


def _page_files() -> dict[str, str]:
    """One module per page that has Python to run: its blocks, top to bottom, as the docs tests
    run them (the README's included), each at its own line, so mypy's line is the page's."""
    files = {}
    for path in PAGES:
        code = ""
        for block in runnable_python(path):
            code += "\n" * (block.line - code.count("\n")) + block.code
        if code:
            name = str(path.relative_to(REPO)).removesuffix(".md")
            files[name.replace("/", "_").replace("-", "_") + ".py"] = code
    return files


def test_the_docs_code_passes_mypy_strict_and_result_keys_are_checked(
    tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    migration = (REPO / "examples" / "api" / "from_create_agent.py").read_text()
    files = {
        **_page_files(),
        "typo.py": TYPO,
        "app.py": APP,
        "context.py": CONTEXT,
        "from_create_agent.py": migration,
    }
    assert {"README.py", "docs_getting_started.py", "docs_guides_approvals.py"} <= set(files)
    for name, code in files.items():
        (tmp_path / name).write_text(code)
    # Incremental, in pytest's cache folder: the libraries' types are checked once, not on every
    # run (a cold run is most of a minute); this test's own files are new each time.
    cached = getattr(pytestconfig, "cache", None)  # None with -p no:cacheprovider
    cache = cached.mkdir("mypy-docs-code") if cached else tmp_path
    mypy = [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(cache), *files]
    done = subprocess.run(
        mypy, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False
    )
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    # docs_guides_tools.py:78 is docs/guides/tools.md, line 78
    where = sorted(line.split(":")[0] for line in errors)
    assert where == ["app.py", "typo.py", "typo.py"], done.stdout
    typos = [line for line in errors if line.startswith("typo.py")]
    assert '"statsu"' in typos[0]
    assert '"tokns"' in typos[1]
    (pending,) = [line for line in errors if line.startswith("app.py")]
    assert '"tol"' in pending  # a question's keys are typed


def test_the_package_says_it_is_typed() -> None:
    assert (REPO / "src" / "gated_react" / "py.typed").is_file()
