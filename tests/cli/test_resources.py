"""What every command works with: a ``--db`` that is not an SQLite file is refused before SQLite
opens it (SQLite would create ``<path>-journal`` next to a device, e.g. ``/dev/null-journal``)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gated_react.cli import resources
from gated_react.cli.exits import CliError

from ..support.cli import invoke
from ..support.openai_server import FakeOpenAI, reply

COMMANDS = (["run", "hello"], ["runs"], ["show", "t"], ["resume", "t"])


def _refused(args: list[str], target: Path, what: str) -> None:
    out = invoke(*args, "--db", str(target))
    assert out.exit_code == 1, (out.stdout, out.stderr)
    assert out.stdout == ""
    assert out.stderr.count("\n") == 1
    assert out.stderr.startswith("gated-react: error: ")
    assert f"{target} is {what}" in out.stderr


def _siblings(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("args", COMMANDS)
def test_a_fifo_is_refused_and_nothing_is_made_beside_it(
    server: FakeOpenAI, tmp_path: Path, args: list[str]
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    _refused(args, fifo, "not a regular file")
    assert set(_siblings(tmp_path)) - {"xdg"} == {"pipe"}
    assert server.requests == []


@pytest.mark.parametrize("args", COMMANDS)
def test_a_directory_is_refused(server: FakeOpenAI, tmp_path: Path, args: list[str]) -> None:
    folder = tmp_path / "store"
    folder.mkdir()
    _refused(args, folder, "a directory")
    assert list(folder.iterdir()) == []
    assert server.requests == []


def test_a_character_device_is_refused_without_a_journal(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    device = tmp_path / "null"
    try:  # a /dev/null of our own: what SQLite leaves beside it stays in tmp_path
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("creating a device node needs root")
    for args in COMMANDS:
        _refused(args, device, "not a regular file")
    assert _siblings(tmp_path) == ["null"]


@pytest.mark.parametrize("device", ["/dev/null", "/dev/zero"])
def test_dev_null_is_refused_before_anything_opens_it(server: FakeOpenAI, device: str) -> None:
    with pytest.raises(CliError, match="not a regular file"):  # checked first: a failure
        resources.store_url(resources.settings(), device)  # here never reaches SQLite
    for args in COMMANDS:
        _refused(args, Path(device), "not a regular file")
    assert not Path(f"{device}-journal").exists()


def test_a_symlink_to_a_device_is_refused_and_files_still_work(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    link = tmp_path / "link.sqlite"
    link.symlink_to("/dev/null")
    with pytest.raises(CliError, match="not a regular file"):
        resources.store_url(resources.settings(), f"sqlite:///{link}")
    server.push(reply("done"))
    real = tmp_path / "new" / "runs.sqlite"  # a file that does not exist yet is created
    assert invoke("run", "hello", "--db", f"sqlite:///{real}", "--json").exit_code == 0
    assert real.is_file()
    assert invoke("runs", "--db", str(real)).exit_code == 0
