"""Nothing of the README before the split is lost: scripts/docs_inventory.py finds every heading
and every table row of the README at 9838988 on some page of the site."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from ..support.docs import REPO
from ..support.reaping import PATIENCE

SCRIPT = REPO / "scripts" / "docs_inventory.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        check=False,
    )


def test_every_heading_and_table_row_of_the_old_readme_is_on_the_site() -> None:
    known = ["git", "-C", str(REPO), "cat-file", "-e", "9838988:README.md"]
    if subprocess.run(known, capture_output=True, check=False).returncode != 0:
        pytest.skip("this clone has no history before the split (9838988)")
    done = _run()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert done.stdout.rstrip().endswith("nothing lost")
    assert "## Resuming runs -> docs/guides/resuming.md" in done.stdout


def test_a_section_that_is_nowhere_is_reported(tmp_path: Path) -> None:
    old = tmp_path / "OLD.md"
    old.write_text(
        "# gated-react\n\n## A section nobody moved\n\n"
        "| key | meaning |\n|---|---|\n| `zzz` | gone |\n"
    )
    done = _run(str(old))
    assert done.returncode == 1
    assert "## A section nobody moved -> MISSING" in done.stdout
    assert "row MISSING: `zzz`" in done.stdout


def test_a_moved_row_is_found_by_the_rows_that_describe_it_now(tmp_path: Path) -> None:
    """The old layout rows named modules since moved into store/ and hosting/: they count as
    found through the rows naming the folders; the old module alone does not."""
    old = tmp_path / "OLD.md"
    old.write_text(
        "# gated-react\n\n| where | what |\n|---|---|\n"
        "| `runs`, `checkpoint`, `locks` | stores |\n| `checkpoint` | stores |\n"
    )
    done = _run(str(old))
    assert done.returncode == 1
    assert "row MISSING: `checkpoint`\n" in done.stdout
    assert "row MISSING: `runs`" not in done.stdout


def test_what_the_inventory_lets_go_is_in_the_changelogs_removed() -> None:
    spec = importlib.util.spec_from_file_location("docs_inventory", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    inventory = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(inventory)
    removed = (REPO / "CHANGELOG.md").read_text().split("### Removed", 1)[1].split("\n## ", 1)[0]
    assert [row for row in inventory.REMOVED if row.strip("`") not in removed] == []
