"""The tree shows the architecture: every module is on CONTRIBUTING.md's map, the package root
holds only what users are pointed at, and the engine stays private."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from .support.docs import all_text
from .support.reaping import PATIENCE

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "gated_react"
# Folders whose modules the map describes in one line (one module per node, command, ...).
DESCRIBED_AS_A_FOLDER = ("nodes", "protocols", "tools", "examples", "cli/commands", "cli/live")
ENGINE_USERS = ("graph.py", "nodes/", "protocols/", "_engine/", "runs/")
"""The engine's importers: the graph and its parts, and ``runs`` (a result's history, trace and
usage are read from the run's record, which the engine keeps)."""


def _map() -> str:
    text = (REPO / "CONTRIBUTING.md").read_text()
    section = text.split("## Layout", 1)[1].split("## House rules", 1)[0]
    return section.split("```", 2)[1]


def _modules() -> list[str]:
    return sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path.name != "__init__.py" and "files" not in path.relative_to(PACKAGE).parts
    )


def test_the_map_names_every_module_and_nothing_else() -> None:
    named = set(re.findall(r"\b([a-z_]+\.py)\b", _map()))
    listed = [
        module
        for module in _modules()
        if not module.startswith(tuple(f"{folder}/" for folder in DESCRIBED_AS_A_FOLDER))
    ]
    missing = [module for module in listed if Path(module).name not in named]
    assert missing == []
    existing = {Path(module).name for module in _modules()}
    top = {path.name for path in REPO.glob("examples/*.py")}
    assert sorted(named - existing - top - {"__init__.py", "test_layout.py"}) == []


def test_every_root_module_is_named_by_the_docs_langgraph_json_or_the_cli() -> None:
    readme = all_text()
    langgraph = json.dumps(json.loads((REPO / "langgraph.json").read_text()))
    cli = "\n".join(path.read_text() for path in (PACKAGE / "cli").rglob("*.py"))
    unnamed = [
        path.stem
        for path in PACKAGE.glob("*.py")
        if path.name != "__init__.py"
        and f"`{path.stem}`" not in readme
        and f"gated_react.{path.stem}" not in readme + langgraph + cli
    ]
    assert unnamed == []


def test_only_the_graph_its_parts_and_runs_import_the_engine() -> None:
    users = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if "gated_react._engine" in path.read_text()
    )
    strays = [user for user in users if not user.startswith(ENGINE_USERS)]
    assert strays == []
    assert "graph.py" in users


AUTHORITY = [
    "admit", "approval", "audit", "backends", "budgets", "estimate", "known", "ledger", "limits",
    "paying", "records", "run_once", "spend", "sql", "started", "statements", "tail", "waiting",
    "ways",
]  # fmt: skip
"""Whether a tool call may run, decided once and written down: the one authority (issue 43)."""
REMOVED = ["admissions", "branches", "pending", "reads", "unknown_outcomes"]
"""What the authority replaced: the in-process registry of admitted steps, the checkpoint
walk, the pending-call count, the reads cache and the unknown-outcome inference."""


def test_the_authority_is_one_package_and_what_it_replaced_is_gone() -> None:
    engine = PACKAGE / "_engine"
    found = sorted(p.stem for p in (engine / "authority").glob("*.py") if p.stem != "__init__")
    assert found == AUTHORITY
    assert [name for name in REMOVED if (engine / f"{name}.py").exists()] == []
    gone = re.compile(rf"gated_react\._engine\.({'|'.join(REMOVED)})\b")
    imports = [str(path.relative_to(REPO)) for path in (REPO / "src").rglob("*.py")
               if gone.search(path.read_text())]  # fmt: skip
    assert imports == []


LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(tmp_path: Path, inject: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` as ``make lint`` runs it, on a copy of the package with ``inject``
    (module path -> a line of code) appended: the copy is first on the path, so the contracts
    judge it, not the installed package."""
    shutil.copytree(PACKAGE, tmp_path / "src" / "gated_react")
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    for module, line in inject.items():
        with (tmp_path / "src" / "gated_react" / module).open("a") as file:
            file.write(f"\n{line}\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "src")}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        check=False,
    )


def test_make_lint_checks_the_import_contracts() -> None:
    recipe = (REPO / "Makefile").read_text().split("\nlint:", 1)[1].split("\n\n", 1)[0]
    assert "$(BIN)/lint-imports" in recipe


def test_the_import_contracts_hold_on_the_tree(tmp_path: Path) -> None:
    done = _lint_imports(tmp_path, {})
    assert done.returncode == 0, done.stdout[-3000:]
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(
    ("inject", "broken"),
    [
        pytest.param(
            {"cli/exits.py": "import gated_react.workers"},
            "gated_react.cli is not allowed to import gated_react.workers",
            id="cli-imports-workers",
        ),
        pytest.param(
            {"workers/watch.py": "from gated_react.cli.exits import CliError"},
            "gated_react.workers is not allowed to import gated_react.cli",
            id="workers-imports-cli",
        ),
        pytest.param(
            {"hosting/studio.py": "import gated_react.cli.exits"},
            "gated_react.hosting.studio is not allowed to import gated_react.cli",
            id="studio-imports-cli",
        ),
        pytest.param(
            {"store/key.py": "from gated_react.store.signed import signed"},
            "gated_react.store.key is not allowed to import gated_react.store.signed",
            id="the-key-imports-the-saver-it-signs-for",
        ),
        pytest.param(
            {"tools/calculator.py": "from gated_react import mcp"},
            "No cycles are allowed in gated_react",
            id="a-cycle-between-siblings",
        ),
        pytest.param(
            {"state/__init__.py": "from gated_react import runs"},
            "gated_react.state is not allowed to import gated_react.runs",
            id="state-imports-the-api",
        ),
    ],
)
def test_the_import_contracts_catch_a_stray_import(
    tmp_path: Path, inject: dict[str, str], broken: str
) -> None:
    done = _lint_imports(tmp_path, inject)
    assert done.returncode == 1
    assert broken in " ".join(done.stdout.split()), done.stdout[-3000:]


def test_the_package_metadata_is_what_an_index_expects() -> None:
    """A license, POSIX only (the sandbox, process groups, signals), a status; no placeholder
    address (a project URL is added when there is a real one); a changelog."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    classifiers = set(project["classifiers"])
    assert "License :: OSI Approved :: MIT License" in classifiers
    assert project["license"] == "MIT"
    assert {c for c in classifiers if c.startswith("Operating System ::")} == {
        "Operating System :: POSIX",
        "Operating System :: POSIX :: Linux",
    }
    assert any(c.startswith("Development Status ::") for c in classifiers)
    assert "invalid" not in json.dumps(project.get("urls", {}))
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert "keepachangelog.com" in changelog
    assert "## [Unreleased]" in changelog
