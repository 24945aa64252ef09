"""The tree shows the architecture: every module is on CONTRIBUTING.md's map, the package root
holds only what users are pointed at, and the engine stays private."""

from __future__ import annotations

import json
import re
from pathlib import Path

from .support.docs import all_text

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "gated_react"
# Folders whose modules the map describes in one line (one module per node, command, ...).
DESCRIBED_AS_A_FOLDER = ("nodes", "protocols", "tools", "examples", "cli/commands", "cli/live")
ENGINE_USERS = ("graph.py", "nodes/", "protocols/", "_engine/")


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


def test_only_the_graph_nodes_and_protocols_import_the_engine() -> None:
    users = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if "gated_react._engine" in path.read_text()
    )
    strays = [user for user in users if not user.startswith(ENGINE_USERS)]
    assert strays == []
    assert "graph.py" in users
