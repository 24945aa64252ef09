"""Paths confined to one root folder, checked by name and then opened without following anything.

A check by name followed by an open by name races with anyone who can write in the root: a
symlink, a symlinked folder or a FIFO swapped in between would be opened instead. So a path is
resolved once to learn where it leads (symlinks that stay inside are allowed), then the resolved
path is opened one component at a time from a descriptor of the root with ``O_NOFOLLOW`` and
``O_NONBLOCK``, and what is checked (a regular file, one link, the file the check saw) and read
is the opened descriptor itself.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gated_react.errors import GatedReactError

READABLE_SUFFIXES = frozenset(
    {".py", ".md", ".txt", ".toml", ".cfg", ".ini", ".json", ".yaml", ".yml", ".csv"}
)
MAX_FILE_BYTES = 1_000_000
MAX_PATH_CHARS = 1024
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


class PathRefused(GatedReactError, ValueError):
    """A path the workspace tools will not touch; the message says why in one line."""


def is_hidden(parts: tuple[str, ...]) -> bool:
    """Whether any component is hidden (``.git``, ``.env``, ``.env.local``, ``.ssh``, ...)."""
    return any(part.startswith(".") for part in parts)


def confine(root: Path, path: str) -> Path:
    """The resolved path inside ``root``; PathRefused for anything that could lead out or that
    is hidden, as asked or where its symlinks lead."""
    shown = repr(path[:80])
    if "\x00" in path:
        raise PathRefused("path contains a NUL byte")
    if path.startswith(("/", "\\", "~")) or (len(path) > 1 and path[1] == ":"):
        raise PathRefused(f"{shown} is not a relative path inside the workspace")
    parts = Path(path).parts
    if ".." in parts:
        raise PathRefused(f"{shown} leaves the workspace ('..')")
    if any(len(part) > 255 for part in parts):
        raise PathRefused("a path component is longer than 255 characters")
    if is_hidden(parts):
        raise _hidden(shown)
    base = root.resolve()
    target = resolved(base / path)
    if target is None:
        raise PathRefused(f"{shown} cannot be resolved (a symlink loop)")
    if not target.is_relative_to(base):
        raise PathRefused(f"{shown} leads outside the workspace")
    if is_hidden(target.relative_to(base).parts):
        raise _hidden(shown)
    return target


def _hidden(shown: str) -> PathRefused:
    return PathRefused(
        f"{shown} is hidden or leads to a hidden name (starting with '.'); "
        "the agent may read no hidden file or folder"
    )


def resolved(path: Path) -> Path | None:
    """The real path, or None for a symlink loop (``resolve`` raises RuntimeError on one)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return None


def open_folder(root: Path, path: str) -> int:
    """A descriptor of the folder ``path`` inside ``root``, opened without following links."""
    base = root.resolve()
    target = confine(root, path)
    try:
        return _walk(base, target.relative_to(base).parts, path)
    except NotADirectoryError:
        raise PathRefused(f"{path[:80]!r} is not a folder in the workspace") from None


def open_readable(root: Path, path: str) -> int:
    """A descriptor of the readable file ``path`` inside ``root``; PathRefused otherwise."""
    base = root.resolve()
    target = confine(root, path)
    parts = target.relative_to(base).parts
    if not parts:
        raise PathRefused(f"{path[:80]!r} is not a regular file")
    try:
        folder = _walk(base, parts[:-1], path)
    except NotADirectoryError:
        raise PathRefused(f"{path[:80]!r} does not exist in the workspace") from None
    try:
        return _open_file(folder, parts[-1], path)
    finally:
        os.close(folder)


def _walk(base: Path, parts: tuple[str, ...], path: str) -> int:
    """A descriptor of ``base/parts...``, every component opened as a folder that is not a link.

    ``parts`` come from a resolved path, so a symlink met here was swapped in after the check:
    refused, never followed. NotADirectoryError when a component is a regular file.
    """
    try:
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        raise PathRefused(f"the workspace root {str(base)[:80]!r} cannot be opened") from None
    try:
        for part in parts:
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except NotADirectoryError:
                if _is_file(fd, part):
                    raise
                raise _changed(path) from None
            except OSError as exc:  # ELOOP: a symlink where the check saw a folder
                raise _open_error(exc, path) from None
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _is_file(folder: int, name: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _open_file(folder: int, name: str, path: str) -> int:
    """Open ``name`` in ``folder`` once, then check the descriptor: the file the check saw."""
    shown = repr(path[:80])
    try:
        seen = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        raise PathRefused(f"{shown} does not exist in the workspace") from None
    if not stat.S_ISREG(seen.st_mode):  # never opened: a device may act on open
        raise PathRefused(f"{shown} is not a regular file")
    if Path(name).suffix.lower() not in READABLE_SUFFIXES:
        raise PathRefused(
            f"{shown} is not a file this agent may read (allowed: {sorted(READABLE_SUFFIXES)})"
        )
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=folder)
    except OSError as exc:  # ELOOP: a symlink swapped in after the check
        raise _open_error(exc, path) from None
    try:
        _check_opened(fd, seen, shown)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_opened(fd: int, seen: os.stat_result, shown: str) -> None:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise PathRefused(f"{shown} is not a regular file")
    if (info.st_dev, info.st_ino) != (seen.st_dev, seen.st_ino):
        raise PathRefused(f"{shown} changed while it was being opened; refused")
    if info.st_nlink > 1:
        raise PathRefused(f"{shown} is a hard link; refused as it may point outside the workspace")
    if info.st_size > MAX_FILE_BYTES:
        raise PathRefused(f"{shown} is larger than {MAX_FILE_BYTES} bytes")


def _open_error(exc: OSError, path: str) -> PathRefused:
    if isinstance(exc, FileNotFoundError):
        return PathRefused(f"{path[:80]!r} does not exist in the workspace")
    if isinstance(exc, PermissionError):
        return PathRefused(f"{path[:80]!r} cannot be opened (permission denied)")
    return _changed(path)


def _changed(path: str) -> PathRefused:
    return PathRefused(f"{path[:80]!r} changed while it was being opened; refused")
