from __future__ import annotations

import os
from pathlib import Path

import pytest

from gated_react.tools.workspace import confine, workspace_tools


@pytest.fixture
def root(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "cart.py").write_text("def total(items):\n    return sum(items) - 1\n")
    (work / "test_cart.py").write_text(
        "from src.cart import total\n\ndef test_total():\n    assert total([1, 2]) == 3\n"
    )
    (work / "src" / "__init__.py").write_text("")
    (work / ".env").write_text("OPENAI_API_KEY=sk-secret\n")
    (work / "id_rsa").write_text("PRIVATE KEY\n")
    (tmp_path / "outside.txt").write_text("secret outside\n")
    (work / "link_out.txt").symlink_to(tmp_path / "outside.txt")
    os.link(tmp_path / "outside.txt", work / "hard.txt")
    return work


def test_reads_and_lists_inside(root: Path) -> None:
    read, listing, _ = workspace_tools(root)
    assert "sum(items)" in read.invoke({"path": "src/cart.py"})
    files = listing.invoke({})["files"]
    assert "src/cart.py" in files
    assert ".env" not in files


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("../outside.txt", "leaves the workspace"),
        ("src/../../outside.txt", "leaves the workspace"),
        ("/etc/passwd", "not a relative path"),
        ("~/.ssh/id_rsa", "not a relative path"),
        ("src/cart.py\x00.txt", "NUL"),
        ("a" * 300 + ".py", "longer than 255"),
        ("link_out.txt", "outside the workspace"),
        ("hard.txt", "hard link"),
        (".env", "may read"),
        ("id_rsa", "may read"),
        ("src", "not a regular file"),
        ("missing.py", "does not exist"),
    ],
)
def test_refuses_everything_that_could_lead_out(root: Path, path: str, why: str) -> None:
    read, _, _ = workspace_tools(root)
    with pytest.raises(ValueError, match=why):
        read.invoke({"path": path})


def test_device_files_are_refused(tmp_path: Path) -> None:
    (tmp_path / "dev.txt").symlink_to("/dev/zero")
    read, _, _ = workspace_tools(tmp_path)
    with pytest.raises(ValueError, match="outside"):
        read.invoke({"path": "dev.txt"})
    assert confine(tmp_path, "a/b.py") == tmp_path.resolve() / "a" / "b.py"


def test_run_tests_runs_one_test_file_without_secrets(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    (root / "test_env.py").write_text(
        "import os\n\ndef test_no_secret():\n    assert 'OPENAI_API_KEY' not in os.environ\n"
    )
    _, _, run_tests = workspace_tools(root)
    failing = run_tests.invoke({"path": "test_cart.py"})
    assert failing["passed"] is False
    assert "assert 2 == 3" in failing["output"]
    assert run_tests.invoke({"path": "test_env.py"})["passed"] is True
    with pytest.raises(ValueError, match="not a test file"):
        run_tests.invoke({"path": "src/cart.py"})
