"""Files swapped while the workspace tools read them: whatever an attacker with write access to
the root races in (a symlink out, a symlinked folder, a FIFO), the tool reads the file it checked
or refuses, and never blocks."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gated_react.tools import confine as confine_module
from gated_react.tools.workspace import workspace_tools

SECRET = "sk-outside-the-root"
# Swaps NAME for a symlink to OUTSIDE or a FIFO and back, as fast as it can, until killed. A
# folder cannot be renamed over a symlink, so a folder is moved away and back instead.
FLIPPER = """
import os, sys
name, kind, outside = sys.argv[1:]
swap = name + ".swap"
while True:
    if kind == "dir":
        os.rename(name, swap)
        os.symlink(outside, name)
        os.unlink(name)
        os.rename(swap, name)
        continue
    os.mkfifo(swap) if kind == "fifo" else os.symlink(outside, swap)
    os.replace(swap, name)
    with open(swap, "w") as file:
        file.write("inside\\n")
    os.replace(swap, name)
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "notes.md").write_text("inside\n")
    (work / "sub" / "notes.md").write_text("inside\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.md").write_text(SECRET)
    return work


@pytest.fixture
def flip(root: Path) -> Iterator[Callable[[str, str], None]]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str, kind: str) -> None:
        outside = root.parent / "outside" / ("" if kind == "dir" else name)
        args = [sys.executable, "-c", FLIPPER, name, kind, str(outside)]
        procs.append(subprocess.Popen(args, cwd=root))

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def hammer(root: Path, path: str, attempts: int = 3000) -> tuple[list[str], list[str]]:
    """Reads of ``path`` while it is being swapped: (what was read, why reads were refused)."""
    read, _, _ = workspace_tools(root)
    texts: list[str] = []
    refusals: list[str] = []
    deadline = time.monotonic() + 5
    for _ in range(attempts):
        try:
            texts.append(read.invoke({"path": path}))
        except ValueError as exc:
            refusals.append(str(exc))
        if time.monotonic() > deadline:
            break
    return texts, refusals


@pytest.mark.parametrize(
    ("name", "kind", "path"), [("notes.md", "link", "notes.md"), ("sub", "dir", "sub/notes.md")]
)
def test_a_symlink_swapped_in_after_the_check_is_never_followed(
    root: Path, flip: Callable[[str, str], None], name: str, kind: str, path: str
) -> None:
    flip(name, kind)
    texts, refusals = hammer(root, path)
    assert set(texts) <= {"inside\n"}
    assert texts, "no read got through: the race never let the real file be seen"
    assert all("\n" not in why and SECRET not in why for why in refusals)


def test_a_fifo_swapped_in_never_blocks_the_tool(
    root: Path, flip: Callable[[str, str], None]
) -> None:
    flip("notes.md", "fifo")
    done: list[tuple[list[str], list[str]]] = []
    reader = threading.Thread(target=lambda: done.append(hammer(root, "notes.md")), daemon=True)
    reader.start()
    reader.join(timeout=30)  # a guard, not a timing: an old reader hung here forever
    if reader.is_alive():
        with contextlib.suppress(OSError):  # let the stuck reader go
            os.close(os.open(root / "notes.md", os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("read_file blocked on a FIFO")
    texts, refusals = done[0]
    assert set(texts) <= {"inside\n"}
    assert any("not a regular file" in why for why in refusals)


def swap(victim: Path, kind: str) -> None:
    victim.rename(victim.with_name("moved"))
    if kind == "fifo":
        os.mkfifo(victim)
    elif kind == "other":  # a different regular file: not the one the check saw
        victim.write_text("inside\n")
    else:
        victim.symlink_to(victim.parent.parent / "outside" / victim.name)


@pytest.mark.parametrize(("kind", "why"), [("link", "changed"), ("other", "does not exist")])
def test_a_folder_swapped_right_after_the_check_is_refused(
    root: Path, monkeypatch: pytest.MonkeyPatch, kind: str, why: str
) -> None:
    """Deterministic: the swap (a symlink out, or a file) lands between resolving the path
    and opening it."""
    checked = confine_module.confine

    def confine_then_swap(base: Path, asked: str) -> Path:
        target = checked(base, asked)
        swap(root / "sub", kind)
        return target

    monkeypatch.setattr(confine_module, "confine", confine_then_swap)
    read, _, _ = workspace_tools(root)
    with pytest.raises(ValueError, match=why) as err:
        read.invoke({"path": "sub/notes.md"})
    assert SECRET not in str(err.value)


@pytest.mark.parametrize(
    ("kind", "why"),
    [("link", "changed"), ("fifo", "not a regular file"), ("other", "changed")],
)
def test_a_file_swapped_between_its_check_and_its_open_is_refused(
    root: Path, monkeypatch: pytest.MonkeyPatch, kind: str, why: str
) -> None:
    """Deterministic: the swap lands right after the file's lstat, before it is opened."""
    real_stat = os.stat

    def stat_then_swap(path: str, *args: object, **kwargs: object) -> os.stat_result:
        seen = real_stat(path, *args, **kwargs)  # type: ignore[arg-type]
        if path == "notes.md" and "dir_fd" in kwargs and not (root / "moved").exists():
            swap(root / "notes.md", kind)
        return seen

    monkeypatch.setattr(os, "stat", stat_then_swap)
    read, _, _ = workspace_tools(root)
    with pytest.raises(ValueError, match=why) as err:
        read.invoke({"path": "notes.md"})
    assert SECRET not in str(err.value)
