"""Files and tests confined to one root folder.

Paths are relative to the root; ``..``, absolute paths, ``~``, NUL bytes, symlinks or hard links
leading out, non-regular files and files outside the allowed suffixes are refused.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field

READABLE_SUFFIXES = frozenset(
    {".py", ".md", ".txt", ".toml", ".cfg", ".ini", ".json", ".yaml", ".yml", ".csv"}
)
MAX_FILE_BYTES = 1_000_000
MAX_READ_CHARS = 20_000
MAX_LISTED = 200
TEST_TIMEOUT_SECONDS = 60.0
MAX_TEST_OUTPUT = 4000
# Variables a test subprocess may see: nothing that could carry a secret.
_SAFE_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "PYTHONPATH", "SYSTEMROOT")


class PathArgs(BaseModel):
    path: str = Field(
        min_length=1, max_length=1024, description="A path relative to the workspace root"
    )


class DirArgs(BaseModel):
    path: str = Field(
        default=".", max_length=1024, description="A folder relative to the workspace root"
    )


def confine(root: Path, path: str) -> Path:
    """The resolved path inside ``root``; ValueError for anything that could lead out."""
    if "\x00" in path:
        raise ValueError("path contains a NUL byte")
    if path.startswith(("/", "\\", "~")) or (len(path) > 1 and path[1] == ":"):
        raise ValueError(f"{path[:80]!r} is not a relative path inside the workspace")
    parts = Path(path).parts
    if ".." in parts:
        raise ValueError(f"{path[:80]!r} leaves the workspace ('..')")
    if any(len(part) > 255 for part in parts):
        raise ValueError("a path component is longer than 255 characters")
    base = root.resolve()
    target = _resolved(base / path)
    if target is None:
        raise ValueError(f"{path[:80]!r} cannot be resolved (a symlink loop)")
    if not target.is_relative_to(base):
        raise ValueError(f"{path[:80]!r} leads outside the workspace")
    return target


def _resolved(path: Path) -> Path | None:
    """The real path, or None for a symlink loop (``resolve`` raises RuntimeError on one)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return None


def _readable(root: Path, path: str) -> Path:
    target = confine(root, path)
    try:
        info = target.lstat()
    except OSError:
        raise ValueError(f"{path[:80]!r} does not exist in the workspace") from None
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"{path[:80]!r} is not a regular file")
    if info.st_nlink > 1:
        raise ValueError(
            f"{path[:80]!r} is a hard link; refused as it may point outside the workspace"
        )
    if target.suffix.lower() not in READABLE_SUFFIXES:
        raise ValueError(
            f"{path[:80]!r} is not a file this agent may read "
            f"(allowed: {sorted(READABLE_SUFFIXES)})"
        )
    if info.st_size > MAX_FILE_BYTES:
        raise ValueError(f"{path[:80]!r} is larger than {MAX_FILE_BYTES} bytes")
    return target


class _WorkspaceTool(BaseTool):
    root: Path
    metadata: dict[str, Any] | None = {"idempotent": True}  # noqa: RUF012 (pydantic field)


class ReadFile(_WorkspaceTool):
    name: str = "read_file"
    description: str = f"Read a text file in the workspace (first {MAX_READ_CHARS} characters)."
    args_schema: type[BaseModel] = PathArgs

    def _run(self, path: str, **_: Any) -> str:
        text = _readable(self.root, path).read_text(encoding="utf-8", errors="replace")
        return text[:MAX_READ_CHARS]


class ListFiles(_WorkspaceTool):
    name: str = "list_files"
    description: str = f"List files under a folder of the workspace (at most {MAX_LISTED})."
    args_schema: type[BaseModel] = DirArgs

    def _run(self, path: str = ".", **_: Any) -> dict[str, Any]:
        folder = confine(self.root, path)
        if not folder.is_dir():
            raise ValueError(f"{path[:80]!r} is not a folder in the workspace")
        base = self.root.resolve()
        found: list[str] = []
        for current, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
            for name in sorted(files):
                candidate = Path(current) / name
                real = _resolved(candidate)  # a planted symlink loop must not break the listing
                if real is not None and real.is_relative_to(base) and not name.startswith("."):
                    found.append(str(candidate.relative_to(base)))
            if len(found) > MAX_LISTED:
                break
        return {"files": found[:MAX_LISTED], "truncated": len(found) > MAX_LISTED}


class RunTests(_WorkspaceTool):
    name: str = "run_tests"
    description: str = (
        "Run pytest on one test_*.py file in the workspace and return the end of its output."
    )
    args_schema: type[BaseModel] = PathArgs
    timeout: float = TEST_TIMEOUT_SECONDS

    def _run(self, path: str, **_: Any) -> dict[str, Any]:
        target = _readable(self.root, path)
        if not (target.name.startswith("test_") and target.suffix == ".py"):
            raise ValueError(f"{path[:80]!r} is not a test file (test_*.py)")
        return run_pytest(self.root.resolve(), target, self.timeout)


def run_pytest(root: Path, target: Path, timeout: float) -> dict[str, Any]:
    """pytest on one file in its own process group, killed whole on timeout, without secrets."""
    env = {key: os.environ[key] for key in _SAFE_ENV if key in os.environ}
    command = [sys.executable, "-m", "pytest", str(target), "-q", "-p", "no:cacheprovider"]
    with subprocess.Popen(
        command,
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    ) as proc:
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise TimeoutError(f"tests did not finish within {timeout:g} s") from None
    return {
        "exit_code": proc.returncode,
        "passed": proc.returncode == 0,
        "output": output[-MAX_TEST_OUTPUT:],
    }


def workspace_tools(root: Path) -> list[BaseTool]:
    """The workspace toolkit confined to ``root``."""
    if not root.is_dir():
        raise ValueError(f"workspace root {root} is not a folder")
    return [ReadFile(root=root), ListFiles(root=root), RunTests(root=root)]
