"""The site builds in strict mode, and strict mode catches what it promises to: a broken link
between pages or to a heading, a link to a repository file that does not exist, a missing API
reference. The graph's picture is drawn from the graph itself, offline. Every public name has
an entry in the API reference."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import gated_react
from gated_react.graph import idle_graph

from ..support.docs import DOCS, REPO

# What the build reads besides docs/: the config, the code for the API reference, the files the
# pages include or link to.
LINKED = ("src", "tests", "examples", "benchmarks", "README.md", "BENCHMARKS.md", "CONTRIBUTING.md")


def _build(root: Path) -> subprocess.CompletedProcess[str]:
    mkdocs = Path(sys.executable).parent / "mkdocs"
    return subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(root / "site")],
        cwd=root,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _copy(tmp_path: Path) -> Path:
    """A repository to build: the config and docs/ copied (to break), the rest linked."""
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copytree(DOCS, root / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    for name in LINKED:
        (root / name).symlink_to(REPO / name)
    return root


def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    done = _build(_copy(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    site = tmp_path / "repo" / "site"
    assert (site / "search" / "search_index.json").is_file()  # search works offline
    assert not (site / "studio-workspace").exists()  # the fixture workspace is no page
    home = (site / "index.html").read_text()
    assert "fonts.googleapis.com" not in home  # nothing fetched from the web
    assert "```mermaid" not in home
    assert "graph TD;" not in home
    promises = (site / "guarantees" / "index.html").read_text()
    assert "<code>tests/e2e/test_kills.py</code>" in promises  # a repository file, named
    assert "/blob/main/" not in promises  # no link to a host the project does not have
    drawing = (site / "concepts" / "graph" / "index.html").read_text()
    drawn = idle_graph().get_graph()
    for name in drawn.nodes:
        assert f'class="node">{name}</text>' in drawing
    for label in {edge.data for edge in drawn.edges if edge.data}:
        assert f'class="label">{label}</text>' in drawing


def test_broken_links_fail_the_build(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    page = root / "docs" / "guides" / "approvals.md"
    page.write_text(
        page.read_text()
        + "\n[gone](../no-such-page.md), [no heading](../concepts/graph.md#no-such-heading),"
        + " [no test](../../tests/test_no_such_file.py)\n"
    )
    done = _build(root)
    assert done.returncode != 0
    assert "no-such-page.md" in done.stderr
    assert "no-such-heading" in done.stderr
    assert "tests/test_no_such_file.py" in done.stderr


def test_a_missing_api_reference_fails_the_build(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    api = root / "docs" / "reference" / "api.md"
    api.write_text(api.read_text() + "\n::: gated_react.runs.no_such_function\n")
    done = _build(root)
    assert done.returncode != 0
    assert "no_such_function" in done.stderr


def test_every_public_name_has_an_api_reference_entry() -> None:
    api = (DOCS / "reference" / "api.md").read_text()
    documented = set(re.findall(r"^::: [\w.]+\.(\w+)$", api, flags=re.MULTILINE))
    assert sorted(set(gated_react.__all__) - documented) == []


def test_every_promise_links_the_test_that_proves_it() -> None:
    text = (DOCS / "guarantees.md").read_text()
    rows, in_table = [], False
    for line in text.splitlines():
        if line.startswith("| promise | proved by |"):
            in_table = True
        elif in_table and line.startswith("|") and not line.startswith("|---"):
            rows.append(line)
        elif not line.startswith("|"):
            in_table = False
    assert len(rows) >= 30
    assert [row[:80] for row in rows if "](../tests/" not in row.rsplit(" | ", 1)[-1]] == []


def test_the_workers_guide_shows_every_keyword_of_the_queueing_functions() -> None:
    """Before: it never showed ``enqueue_run``'s ``thread_id=``, the way to queue a run under
    an id of one's own."""
    import inspect

    from gated_react.workers import enqueue_resume, enqueue_run

    guide = (DOCS / "guides" / "workers.md").read_text()
    for function in (enqueue_run, enqueue_resume):
        keywords = [
            name
            for name, parameter in inspect.signature(function).parameters.items()
            if parameter.kind is parameter.KEYWORD_ONLY
        ]
        assert f"{function.__name__}(" in guide
        for name in keywords:
            assert f"{name}=" in guide, name


def test_with_a_repository_address_a_file_link_goes_there() -> None:
    """Once the project has a ``repo_url``, a link to a repository file or folder points at it
    (``blob`` for a file, ``tree`` for a folder); without one, it is the path in code."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("repo_links", DOCS / "_hooks" / "repo_links.py")
    assert spec is not None
    assert spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    config = {"repo_url": "https://git.example.org/gated-react/"}
    to = hook._to_repository
    assert to("kills", REPO / "tests/e2e/test_kills.py", REPO, "", config) == (
        "[kills](https://git.example.org/gated-react/blob/main/tests/e2e/test_kills.py)"
    )
    assert to("e2e", REPO / "tests/e2e", REPO, "top", config) == (
        "[e2e](https://git.example.org/gated-react/tree/main/tests/e2e#top)"
    )
    assert to("kills", REPO / "tests/e2e/test_kills.py", REPO, "", {}) == (
        "kills (`tests/e2e/test_kills.py`)"
    )
