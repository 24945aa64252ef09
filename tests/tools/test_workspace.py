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
    confine,
    workspace_tools,
)

SUFFIXES = (".py", ".md", ".txt", ".toml", ".cfg", ".ini", ".json", ".yaml", ".yml", ".csv")


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


@pytest.fixture
def hidden(root: Path) -> Path:
    """Hidden names at every depth, each holding a secret in a suffix the agent may read."""
    for name in (".env.json", "src/.env.yaml", ".git/config.txt", "src/.cache/notes.md"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("sk-hidden-secret\n")
    (root / ".hidden").mkdir()
    (root / ".hidden" / "test_x.py").write_text("def test_x():\n    pass\n")
    (root / "alias.md").symlink_to(root / ".git" / "config.txt")
    return root


@pytest.mark.parametrize(
    "path",
    [".env.json", "src/.env.yaml", ".git/config.txt", "src/.cache/notes.md", "alias.md"],
)
def test_hidden_files_are_refused_at_any_depth(hidden: Path, path: str) -> None:
    read, _, _ = workspace_tools(hidden)
    with pytest.raises(ValueError, match="hidden") as err:
        read.invoke({"path": path})
    assert "sk-hidden-secret" not in str(err.value)


@pytest.mark.parametrize("path", [".git", "src/.cache", ".hidden"])
def test_hidden_folders_are_not_listed_even_when_asked_for(hidden: Path, path: str) -> None:
    _, listing, _ = workspace_tools(hidden)
    with pytest.raises(ValueError, match="hidden"):
        listing.invoke({"path": path})
    files = listing.invoke({})["files"]
    assert files == ["hard.txt", "id_rsa", "test_cart.py", "src/__init__.py", "src/cart.py"]


def test_a_hidden_test_file_is_not_run(hidden: Path) -> None:
    _, _, run_tests = workspace_tools(hidden)
    with pytest.raises(ValueError, match="hidden"):
        run_tests.invoke({"path": ".hidden/test_x.py"})


@pytest.mark.parametrize("suffix", [*SUFFIXES, ".MD", ".Json"])
def test_every_allowed_suffix_is_read(tmp_path: Path, suffix: str) -> None:
    (tmp_path / f"notes{suffix}").write_text(f"text in {suffix}\n")
    read, _, _ = workspace_tools(tmp_path)
    assert read.invoke({"path": f"notes{suffix}"}) == f"text in {suffix}\n"


@pytest.mark.parametrize("suffix", [".env", ".pem", ".key", ".sh", ".pyc", ".cfg.bak", ""])
def test_other_suffixes_are_refused(tmp_path: Path, suffix: str) -> None:
    (tmp_path / f"notes{suffix}").write_text("not for the agent\n")
    read, _, _ = workspace_tools(tmp_path)
    with pytest.raises(ValueError, match="may read"):
        read.invoke({"path": f"notes{suffix}"})


def test_read_file_returns_the_first_20000_characters(tmp_path: Path) -> None:
    (tmp_path / "long.txt").write_text("é" * 19_999 + "xy" + "z" * 5000)
    (tmp_path / "crlf.txt").write_bytes(b"a\r\nb\r\n")
    read, _, _ = workspace_tools(tmp_path)
    text = read.invoke({"path": "long.txt"})
    assert text == "é" * 19_999 + "x"
    assert read.invoke({"path": "crlf.txt"}) == "a\nb\n"


def test_files_over_one_megabyte_are_refused(tmp_path: Path) -> None:
    (tmp_path / "edge.txt").write_text("x" * 1_000_000)
    (tmp_path / "over.txt").write_text("x" * 1_000_001)
    read, _, _ = workspace_tools(tmp_path)
    assert len(read.invoke({"path": "edge.txt"})) == 20_000
    with pytest.raises(ValueError, match="larger than 1000000 bytes"):
        read.invoke({"path": "over.txt"})


def test_paths_are_at_most_1024_characters(tmp_path: Path) -> None:
    read, listing, run_tests = workspace_tools(tmp_path)
    longest = "/".join(["d" * 99] * 10) + "/x" * 11 + ".py"  # 1024 characters, 21 parts
    assert len(longest) == 1024
    with pytest.raises(ValueError, match="does not exist"):
        read.invoke({"path": longest})
    for tool in (read, listing, run_tests):
        with pytest.raises(ValueError, match="at most 1024 characters"):
            tool.invoke({"path": longest + "x"})


@pytest.mark.parametrize(("count", "truncated"), [(200, False), (201, True), (450, True)])
def test_list_files_stops_at_200_names(tmp_path: Path, count: int, truncated: bool) -> None:
    for i in range(count):
        folder = tmp_path / f"d{i % 3}"
        folder.mkdir(exist_ok=True)
        (folder / f"f{i:03}.txt").write_text("")
    _, listing, _ = workspace_tools(tmp_path)
    out = listing.invoke({})
    assert len(out["files"]) == 200
    assert len(set(out["files"])) == 200
    assert out["truncated"] is truncated
    assert all((tmp_path / name).is_file() for name in out["files"])


def test_list_files_of_a_subfolder_names_paths_from_the_root(root: Path) -> None:
    _, listing, _ = workspace_tools(root)
    assert listing.invoke({"path": "src"}) == {
        "files": ["src/__init__.py", "src/cart.py"],
        "truncated": False,
    }


@pytest.mark.parametrize(
    ("path", "why"), [("src/cart.py", "not a folder"), ("nope", "does not exist")]
)
def test_list_files_on_a_file_or_nothing_is_refused(root: Path, path: str, why: str) -> None:
    _, listing, _ = workspace_tools(root)
    with pytest.raises(ValueError, match=why):
        listing.invoke({"path": path})


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
    assert failing["exit_code"] == 1
    assert "assert 2 == 3" in failing["output"]
    assert run_tests.invoke({"path": "test_env.py"})["passed"] is True


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("src/cart.py", "not a test file"),
        ("test_cart.md", "not a test file"),
        ("test_cart.txt", "not a test file"),
        ("tests_cart.py", "not a test file"),
        ("test_gone.py", "does not exist"),
    ],
)
def test_run_tests_takes_only_test_py_files(root: Path, path: str, why: str) -> None:
    for name in ("test_cart.md", "test_cart.txt", "tests_cart.py"):
        (root / name).write_text("def test_x():\n    raise SystemExit(3)\n")
    _, _, run_tests = workspace_tools(root)
    with pytest.raises(ValueError, match=why):
        run_tests.invoke({"path": path})


def test_tests_run_in_the_workspace_root(root: Path) -> None:
    (root / "src" / "test_where.py").write_text(
        "import os\n\ndef test_where():\n"
        f"    assert os.getcwd() == {str(root.resolve())!r}\n"
        "    assert open('src/cart.py').read().startswith('def total')\n"
    )
    _, _, run_tests = workspace_tools(root)
    out = run_tests.invoke({"path": "src/test_where.py"})
    assert out["passed"] is True, out["output"]


def test_run_tests_returns_the_last_4000_characters_of_output(root: Path) -> None:
    (root / "test_loud.py").write_text(
        "def test_loud():\n    print('a' * 50_000)\n    assert False, 'the end'\n"
    )
    _, _, run_tests = workspace_tools(root)
    out = run_tests.invoke({"path": "test_loud.py"})
    assert len(out["output"]) == 4000
    assert "1 failed" in out["output"].splitlines()[-1]
    assert "AssertionError: the end" in out["output"]


# Its parts one at a time, each message word for word (what `make mutation` found untested).
# The workspace toolkit's edges, beside the tools' runs above: how its tools are built, undecodable
# bytes, cache folders, the exact listing cut and the run_tests refusals word for word.


def test_the_toolkit_is_read_list_and_run_with_the_callers_options(tmp_path: Path) -> None:
    read, listing, run_tests = workspace_tools(tmp_path, sandbox=False, test_timeout=7.5)
    assert [type(read), type(listing), type(run_tests)] == [ReadFile, ListFiles, RunTests]
    assert {read.root, listing.root, run_tests.root} == {tmp_path}  # type: ignore[attr-defined]
    assert (run_tests.sandbox, run_tests.timeout) == (False, 7.5)  # type: ignore[attr-defined]
    default = workspace_tools(tmp_path)[2]
    assert (default.sandbox, default.timeout) == (True, 60.0)  # type: ignore[attr-defined]


def test_reads_are_safe_to_repeat_and_running_tests_is_not(tmp_path: Path) -> None:
    """A test may write in the workspace (it is bound writable in the sandbox): before, a run
    killed inside ``run_tests`` ran the tests again on resume, as if they only read."""
    read, listing, run_tests = workspace_tools(tmp_path)
    assert [(t.metadata or {}).get("idempotent") for t in (read, listing, run_tests)] == [
        True, True, False,
    ]  # fmt: skip


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
