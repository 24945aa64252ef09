"""The workspace toolkit's edges beside test_workspace.py: how its tools are built, undecodable
bytes, cache folders, the exact listing cut and the run_tests refusals word for word."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gated_react.tools import workspace
from gated_react.tools.workspace import (
    MAX_LISTED,
    ListFiles,
    ReadFile,
    RunTests,
    workspace_tools,
)


def test_the_toolkit_is_read_list_and_run_with_the_callers_options(tmp_path: Path) -> None:
    read, listing, run_tests = workspace_tools(tmp_path, sandbox=False, test_timeout=7.5)
    assert [type(read), type(listing), type(run_tests)] == [ReadFile, ListFiles, RunTests]
    assert {read.root, listing.root, run_tests.root} == {tmp_path}  # type: ignore[attr-defined]
    assert (run_tests.sandbox, run_tests.timeout) == (False, 7.5)  # type: ignore[attr-defined]
    default = workspace_tools(tmp_path)[2]
    assert (default.sandbox, default.timeout) == (True, 60.0)  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ["notes.md", "missing"])
def test_a_root_that_is_not_a_folder_is_refused(tmp_path: Path, name: str) -> None:
    (tmp_path / "notes.md").write_text("x")
    root = tmp_path / name
    with pytest.raises(ValueError, match=f"^workspace root {root} is not a folder$"):
        workspace_tools(root)


def test_undecodable_bytes_are_replaced_not_refused(tmp_path: Path) -> None:
    (tmp_path / "latin.txt").write_bytes(b"caf\xe9 ok")
    read, _, _ = workspace_tools(tmp_path)
    assert read.invoke({"path": "latin.txt"}) == "caf\ufffd ok"


def test_read_file_closes_what_it_opened(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("x")
    read, _, _ = workspace_tools(tmp_path)
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        read.invoke({"path": "notes.md"})
    assert len(os.listdir("/proc/self/fd")) <= before


def test_cache_folders_are_not_listed_but_their_neighbours_are(tmp_path: Path) -> None:
    for name in ("__pycache__/a.py", "b/__pycache__/c.py", "b/d.py", "__pycache__x/e.py", "f.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    _, listing, _ = workspace_tools(tmp_path)
    assert listing.invoke({}) == {
        "files": ["f.py", "__pycache__x/e.py", "b/d.py"],
        "truncated": False,
    }


def test_listing_walks_folders_and_files_in_name_order(tmp_path: Path) -> None:
    for name in ("z/2.txt", "z/1.txt", "a/9.txt", "m.txt", "b.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    _, listing, _ = workspace_tools(tmp_path)
    assert listing.invoke({"path": "."})["files"] == [
        "b.txt",
        "m.txt",
        "a/9.txt",
        "z/1.txt",
        "z/2.txt",
    ]


def test_the_listing_of_a_full_folder_stops_at_the_cap(tmp_path: Path) -> None:
    """One folder of 201 names: the walk stops there, and says it was cut."""
    (tmp_path / "deep").mkdir()
    (tmp_path / "deep" / "z.txt").write_text("")
    for i in range(MAX_LISTED + 1):
        (tmp_path / f"f{i:03}.txt").write_text("")
    _, listing, _ = workspace_tools(tmp_path)
    out = listing.invoke({})
    assert out["files"] == [f"f{i:03}.txt" for i in range(MAX_LISTED)]
    assert out["truncated"] is True


def test_symlinks_listed_only_while_they_stay_inside_and_visible(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / ".secret.md").write_text("s")
    (tmp_path / "work" / "real.md").write_text("r")
    (tmp_path / "out.md").write_text("o")
    (tmp_path / "work" / "to_hidden.md").symlink_to(tmp_path / "work" / ".secret.md")
    (tmp_path / "work" / "to_out.md").symlink_to(tmp_path / "out.md")
    (tmp_path / "work" / "to_real.md").symlink_to(tmp_path / "work" / "real.md")
    (tmp_path / "work" / "loop.md").symlink_to(tmp_path / "work" / "loop.md")
    _, listing, _ = workspace_tools(tmp_path / "work")
    assert listing.invoke({})["files"] == ["real.md", "to_real.md"]


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("notes.md", "'notes.md' is not a test file (test_*.py)"),
        ("test_x.txt", "'test_x.txt' is not a test file (test_*.py)"),
        ("x_test.py", "'x_test.py' is not a test file (test_*.py)"),
        ("t" * 100 + ".py", f"{'t' * 80!r} is not a test file (test_*.py)"),
    ],
)
def test_run_tests_refuses_other_files_in_one_line(tmp_path: Path, path: str, message: str) -> None:
    (tmp_path / path).write_text("def test_x():\n    pass\n")
    _, _, run_tests = workspace_tools(tmp_path)
    with pytest.raises(ValueError, match="not a test file") as err:
        run_tests.invoke({"path": path})
    assert str(err.value) == message


def test_a_cap_reached_exactly_in_one_folder_walks_on(tmp_path: Path) -> None:
    """200 names at the top and one more below: the listing was cut, and says so."""
    (tmp_path / "z").mkdir()
    (tmp_path / "z" / "last.txt").write_text("")
    for i in range(MAX_LISTED):
        (tmp_path / f"f{i:03}.txt").write_text("")
    _, listing, _ = workspace_tools(tmp_path)
    out = listing.invoke({})
    assert out["files"] == [f"f{i:03}.txt" for i in range(MAX_LISTED)]
    assert out["truncated"] is True


def test_a_symlinked_folder_is_not_walked_even_when_it_stays_inside(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "x.md").write_text("")
    (tmp_path / "alias").symlink_to(tmp_path / "real", target_is_directory=True)
    _, listing, _ = workspace_tools(tmp_path)
    assert listing.invoke({})["files"] == ["real/x.md"]


def test_hidden_and_cache_folders_are_never_entered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A .git or .venv of thousands of files costs nothing to list."""
    for name in (".git/objects/a.txt", ".venv/lib/b.py", "src/__pycache__/c.py", "src/d.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    entered: list[str] = []
    walk = os.fwalk

    def recording(*args: Any, **kwargs: Any) -> Iterator[Any]:
        for step in walk(*args, **kwargs):
            entered.append(step[0])
            yield step

    monkeypatch.setattr(os, "fwalk", recording)
    _, listing, _ = workspace_tools(tmp_path)
    assert listing.invoke({})["files"] == ["src/d.py"]
    assert entered == [".", "./src"]


@pytest.mark.parametrize("sandbox", [True, False])
def test_run_tests_passes_the_sandbox_choice_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sandbox: bool
) -> None:
    (tmp_path / "test_a.py").write_text("def test_a():\n    pass\n")
    calls: list[tuple[Any, ...]] = []

    def run_pytest(*args: Any, **kwargs: Any) -> dict[str, Any]:
        calls.append((*args, kwargs))
        return {"passed": True}

    monkeypatch.setattr(workspace, "run_pytest", run_pytest)
    _, _, run_tests = workspace_tools(tmp_path, sandbox=sandbox, test_timeout=9.0)
    assert run_tests.invoke({"path": "test_a.py"}) == {"passed": True}
    root = tmp_path.resolve()
    assert calls == [(root, root / "test_a.py", 9.0, {"sandbox": sandbox})]
