"""Files and tests confined to one root folder.

Paths are relative to the root; ``..``, absolute paths, ``~``, NUL bytes, hidden names (any
component starting with '.', ``.env*`` and ``.git`` included), symlinks or hard links leading
out, non-regular files and files outside the allowed suffixes are refused (``confine``). Files
are opened once, without following links, and checked and read through that descriptor.
``run_tests`` runs the workspace's own code, so it runs it in a sandbox (``sandbox``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field

from gated_react.tools.confine import (
    MAX_FILE_BYTES,
    MAX_PATH_CHARS,
    READABLE_SUFFIXES,
    PathRefused,
    confine,
    is_hidden,
    open_folder,
    open_readable,
    resolved,
)
from gated_react.tools.sandbox import MAX_TEST_OUTPUT, run_pytest

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_LISTED",
    "MAX_READ_CHARS",
    "MAX_TEST_OUTPUT",
    "READABLE_SUFFIXES",
    "TEST_TIMEOUT_SECONDS",
    "ListFiles",
    "PathRefused",
    "ReadFile",
    "RunTests",
    "confine",
    "workspace_tools",
]

MAX_READ_CHARS = 20_000
MAX_LISTED = 200
TEST_TIMEOUT_SECONDS = 60.0


class PathArgs(BaseModel):
    path: str = Field(
        min_length=1,
        max_length=MAX_PATH_CHARS,
        description="A path relative to the workspace root",
    )


class DirArgs(BaseModel):
    path: str = Field(
        default=".",
        max_length=MAX_PATH_CHARS,
        description="A folder relative to the workspace root",
    )


class _WorkspaceTool(BaseTool):
    root: Path
    metadata: dict[str, Any] | None = {"idempotent": True}  # noqa: RUF012 (pydantic field)


class ReadFile(_WorkspaceTool):
    name: str = "read_file"
    description: str = f"Read a text file in the workspace (first {MAX_READ_CHARS} characters)."
    args_schema: type[BaseModel] = PathArgs

    def _run(self, path: str, **_: Any) -> str:
        with open(open_readable(self.root, path), encoding="utf-8", errors="replace") as file:
            return file.read(MAX_READ_CHARS)


class ListFiles(_WorkspaceTool):
    name: str = "list_files"
    description: str = f"List files under a folder of the workspace (at most {MAX_LISTED})."
    args_schema: type[BaseModel] = DirArgs

    def _run(self, path: str = ".", **_: Any) -> dict[str, Any]:
        base = self.root.resolve()
        folder = confine(self.root, path).relative_to(base)
        found: list[str] = []
        fd = open_folder(self.root, path)
        try:
            # Walked through descriptors without following links: a folder swapped for a
            # symlink while it is walked is not entered.
            for current, dirs, files, _fd in os.fwalk(".", dir_fd=fd, follow_symlinks=False):
                dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
                found += (
                    str(name)
                    for name in (folder / current / file for file in sorted(files))
                    if _listable(base, name)
                )
                if len(found) > MAX_LISTED:
                    break
        finally:
            os.close(fd)
        return {"files": found[:MAX_LISTED], "truncated": len(found) > MAX_LISTED}


def _listable(base: Path, name: Path) -> bool:
    """Shown unless hidden or a symlink leading out, to a hidden name, or into a loop."""
    if is_hidden(name.parts):
        return False
    real = resolved(base / name)
    return (
        real is not None
        and real.is_relative_to(base)
        and not is_hidden(real.relative_to(base).parts)
    )


class RunTests(_WorkspaceTool):
    name: str = "run_tests"
    description: str = (
        "Run pytest on one test_*.py file in the workspace and return the end of its output."
    )
    args_schema: type[BaseModel] = PathArgs
    # The workspace's own code runs with the workspace writable: not safe to run twice, so a
    # run that crashes inside it asks (or stops tool_outcome_unknown), never runs it again.
    metadata: dict[str, Any] | None = {"idempotent": False}  # noqa: RUF012 (pydantic field)
    timeout: float = TEST_TIMEOUT_SECONDS
    sandbox: bool = True
    """Run the tests under bubblewrap; False runs the workspace's code with your rights."""

    def _run(self, path: str, **_: Any) -> dict[str, Any]:
        os.close(open_readable(self.root, path))  # the same checks as read_file
        target = confine(self.root, path)
        if not (target.name.startswith("test_") and target.suffix == ".py"):
            raise PathRefused(f"{path[:80]!r} is not a test file (test_*.py)")
        return run_pytest(self.root.resolve(), target, self.timeout, sandbox=self.sandbox)


def workspace_tools(
    root: Path, *, sandbox: bool = True, test_timeout: float = TEST_TIMEOUT_SECONDS
) -> list[BaseTool]:
    """The workspace toolkit confined to ``root``.

    ``run_tests`` runs the workspace's code inside bubblewrap and refuses to run without it;
    ``sandbox=False`` is the explicit opt-out that runs that code unconfined, with your rights.
    """
    if not root.is_dir():
        raise ValueError(f"workspace root {root} is not a folder")
    return [
        ReadFile(root=root),
        ListFiles(root=root),
        RunTests(root=root, sandbox=sandbox, timeout=test_timeout),
    ]
