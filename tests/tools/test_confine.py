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
from typing import Any

import pytest

from gated_react.tools import confine as confine_module
from gated_react.tools.confine import PathRefused, confine, open_folder, open_readable
from gated_react.tools.workspace import ReadFile, workspace_tools

SECRET = "sk-outside-the-root"
LONG = "d" * 95  # a name longer than the 80 characters a message shows
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
    (work / f"{LONG}.md").write_text("inside\n")  # longer than a message shows
    (work / LONG).mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.md").write_text(SECRET)
    (tmp_path / "outside.md").write_text("secret\n")
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


# Its parts one at a time, each message word for word (what `make mutation` found untested).
# Every refusal of confine.py word for word (long paths are shown cut at 80 characters), the
# exact limits, and the swaps that only a check of the entry itself, not of what it points to,
# refuses.


def refusal(call: Callable[[], Any]) -> str:
    with pytest.raises(PathRefused) as err:
        call()
    return str(err.value)


def cut(path: str) -> str:
    return repr(path[:80])


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (f"{LONG}\x00", "path contains a NUL byte"),
        ("C:", "'C:' is not a relative path inside the workspace"),
        (f"/{LONG}", f"{cut('/' + LONG)} is not a relative path inside the workspace"),
        ("a" * 256, "a path component is longer than 255 characters"),
        (f"{LONG}/../x", f"{cut(LONG + '/../x')} leaves the workspace ('..')"),
        (
            f"{LONG}/.env",
            f"{cut(LONG + '/.env')} is hidden or leads to a hidden name (starting with '.'); "
            "the agent may read no hidden file or folder",
        ),
    ],
)
def test_what_confine_refuses_by_name(root: Path, path: str, message: str) -> None:
    assert refusal(lambda: confine(root, path)) == message


def test_a_name_of_255_characters_is_allowed(root: Path) -> None:
    assert confine(root, "a" * 255) == root.resolve() / ("a" * 255)
    assert confine(root, "ab:c") == root.resolve() / "ab:c"  # a colon further on is a name


def test_a_link_to_a_hidden_name_is_refused_with_the_name_asked(root: Path) -> None:
    (root / ".git").mkdir()
    (root / ".git" / "config.md").write_text("secret\n")
    (root / f"{LONG}.link").symlink_to(root / ".git" / "config.md")
    assert refusal(lambda: confine(root, f"{LONG}.link")) == (
        f"{cut(LONG + '.link')} is hidden or leads to a hidden name (starting with '.'); "
        "the agent may read no hidden file or folder"
    )


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("./" * 45, f"{cut('./' * 45)} is not a regular file"),
        (f"{LONG}.md/x.md", f"{cut(LONG + '.md/x.md')} does not exist in the workspace"),
        (f"{LONG}/x.md", f"{cut(LONG + '/x.md')} does not exist in the workspace"),
        (LONG, f"{cut(LONG)} is not a regular file"),
        (f"{LONG}.sh", f"{cut(LONG + '.sh')} does not exist in the workspace"),
    ],
)
def test_what_open_readable_refuses(root: Path, path: str, message: str) -> None:
    assert refusal(lambda: open_readable(root, path)) == message


def test_open_folder_refuses_a_file(root: Path) -> None:
    path = f"{LONG}.md"
    assert refusal(lambda: open_folder(root, path)) == (
        f"{cut(path)} is not a folder in the workspace"
    )


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda p: os.link(p.parent / "notes.md", p), "is a hard link; refused as it may point"),
        (lambda p: p.write_text("x" * 1_000_001), "is larger than 1000000 bytes"),
    ],
)
def test_what_the_opened_file_is_checked_for(
    root: Path, setup: Callable[[Path], None], message: str
) -> None:
    path = f"{LONG}x.md"
    setup(root / path)
    assert refusal(lambda: open_readable(root, path)).startswith(f"{cut(path)} {message}")


@pytest.mark.parametrize("kind", ["missing", "a file"])
def test_a_root_that_cannot_be_opened_is_named(tmp_path: Path, kind: str) -> None:
    base = tmp_path / ("r" * 90)
    if kind == "a file":
        base.write_text("")
    read = ReadFile(root=base)
    with pytest.raises(PathRefused) as err:
        read.invoke({"path": "x.md"})
    assert str(err.value) == f"the workspace root {str(base.resolve())[:80]!r} cannot be opened"


def _after_the_check(monkeypatch: pytest.MonkeyPatch, then: Callable[[], None]) -> None:
    checked = confine_module.confine

    def confine_then(base: Path, asked: str) -> Path:
        target = checked(base, asked)
        then()
        return target

    monkeypatch.setattr(confine_module, "confine", confine_then)


def test_a_folder_swapped_for_a_link_to_a_file_is_refused(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def swap() -> None:
        (root / "sub").rename(root / "moved")
        (root / "sub").symlink_to(root / "notes.md")

    _after_the_check(monkeypatch, swap)
    assert refusal(lambda: open_readable(root, "sub/notes.md")) == (
        "'sub/notes.md' changed while it was being opened; refused"
    )


def test_a_file_swapped_for_a_link_before_its_stat_is_refused(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def swap() -> None:
        (root / "notes.md").unlink()
        (root / "notes.md").symlink_to(root.parent / "outside.md")

    _after_the_check(monkeypatch, swap)
    assert refusal(lambda: open_readable(root, "notes.md")) == "'notes.md' is not a regular file"


def _failing(monkeypatch: pytest.MonkeyPatch, function: str, name: str, error: OSError) -> None:
    """``os.<function>`` raises ``error`` for ``name`` opened in a folder, as if the entry went
    away or was locked right then."""
    real = getattr(os, function)

    def fail(path: Any, *args: Any, **kwargs: Any) -> Any:
        if path == name and kwargs.get("dir_fd") is not None:
            raise error
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, function, fail)


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (FileNotFoundError(2, "gone"), "does not exist in the workspace"),
        (PermissionError(13, "denied"), "cannot be opened (permission denied)"),
        (OSError(40, "loop"), "changed while it was being opened; refused"),
    ],
)
def test_a_file_that_cannot_be_opened_says_why(
    root: Path, monkeypatch: pytest.MonkeyPatch, error: OSError, message: str
) -> None:
    path = f"{LONG}.md"
    _failing(monkeypatch, "open", path, error)
    assert refusal(lambda: open_readable(root, path)) == f"{cut(path)} {message}"


def test_a_folder_that_vanishes_while_it_is_checked_has_changed(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _failing(monkeypatch, "open", "sub", NotADirectoryError(20, "not a folder"))
    _failing(monkeypatch, "stat", "sub", FileNotFoundError(2, "gone"))
    assert refusal(lambda: open_readable(root, "sub/notes.md")) == (
        "'sub/notes.md' changed while it was being opened; refused"
    )
