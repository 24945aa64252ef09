"""Every refusal of confine.py word for word (long paths are shown cut at 80 characters), the
exact limits, and the swaps that only a check of the entry itself, not of what it points to,
refuses."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gated_react.tools import confine as confine_module
from gated_react.tools.confine import PathRefused, confine, open_folder, open_readable
from gated_react.tools.workspace import ReadFile

LONG = "d" * 95  # a name longer than the 80 characters a message shows


@pytest.fixture
def root(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "notes.md").write_text("inside\n")
    (work / "sub" / "notes.md").write_text("inside\n")
    (work / f"{LONG}.md").write_text("inside\n")
    (work / LONG).mkdir()
    (tmp_path / "outside.md").write_text("secret\n")
    return work


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
