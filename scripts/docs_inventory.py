"""Lists the headings and tables of a README against the documentation site: where each went.

    python scripts/docs_inventory.py                 # the README before the split (9838988)
    python scripts/docs_inventory.py OLD_README.md   # any other file

A heading is found when a page (or the README) has a heading of the same title, or when RENAMED
says which page and heading hold it now. A table row is found when a table of some page has a
row whose first cell starts with the same six words (so a row whose text was edited later
still counts: its key survived), or when MOVED names the rows that describe its modules now.
Prose is reported too: how many of the old sentences appear
word for word (-v lists the others). Exits 1 when a heading or a table row is nowhere.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BEFORE_THE_SPLIT = "9838988"
# Old heading -> (page, heading there) for the sections that changed name when they moved.
RENAMED = {
    "gated-react": ("README.md", "gated-react"),
    "Use it": ("docs/getting-started.md", "First run in Python"),
    "Tools": ("docs/guides/tools.md", "Tools"),
    "Runs with no API key": ("docs/guides/local-model.md", "The local model (no API key)"),
    "Command line": ("docs/reference/cli.md", "Command line"),
    "Approvals": ("docs/guides/approvals.md", "On the command line"),
    "Resuming runs": ("docs/guides/resuming.md", "Resuming runs"),
    "Use inside your app": ("docs/guides/embedding.md", "Embedding in your app"),
    "Chat messages in and out": ("docs/guides/chat.md", "Chat apps"),
    "Performance": ("docs/benchmarks.md", "Benchmarks"),
    "Package layout": ("docs/reference/api.md", "Package layout"),
}
# Old table rows that name what the package no longer has: each is in CHANGELOG.md's "Removed".
REMOVED = frozenset({"`studio_context`"})
# Old table rows whose modules moved into folders -> the rows that describe them now (all of
# them must be on the site).
MOVED = {
    "`runs`, `checkpoint`, `locks`": ("`runs`", "`store/`"),
    "`cli/`, `studio`, `workers`, `local`": ("`cli/`, `workers/`", "`hosting/`"),
}
HEADING = re.compile(r"^(#{1,6}) (.+)$")


def _pages() -> dict[str, str]:
    found = {"README.md": (REPO / "README.md").read_text()}
    for path in sorted((REPO / "docs").rglob("*.md")):
        if "studio-workspace" not in path.parts:
            found[str(path.relative_to(REPO))] = path.read_text()
    return found


def _prose_lines(text: str) -> list[str]:
    """The text's lines outside code fences."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def headings(text: str) -> list[tuple[int, str]]:
    return [
        (len(m.group(1)), m.group(2)) for line in _prose_lines(text) if (m := HEADING.match(line))
    ]


def tables(text: str) -> list[tuple[str, list[str]]]:
    """Each table as its header row and the first cell of each row."""
    found: list[tuple[str, list[str]]] = []
    lines = [line.strip() for line in _prose_lines(text)]
    index = 0
    while index < len(lines) - 1:
        if lines[index].startswith("|") and lines[index + 1].startswith("|---"):
            end = index + 2
            while end < len(lines) and lines[end].startswith("|"):
                end += 1
            found.append((lines[index], [_first_cell(row) for row in lines[index + 2 : end]]))
            index = end
        else:
            index += 1
    return found


def _first_cell(row: str) -> str:
    """The row's key: the first six words of its first cell, links compared by their text."""
    cell = re.split(r"(?<!\\)\|", row.strip().strip("|"))[0]
    return " ".join(_normal(cell).split()[:6])


def _sentences(text: str) -> list[str]:
    """The prose's sentences, paragraph by paragraph (a list item is a paragraph)."""
    paragraphs = re.split(
        r"\n\s*\n|\n(?=- )",
        "\n".join(line for line in _prose_lines(text) if not line.startswith(("|", "#", "<!--"))),
    )
    found = []
    for paragraph in paragraphs:
        prose = _normal(paragraph).strip()
        found += [s for s in re.split(r"(?<=[.:;])\s+(?=[A-Z`(*])", prose) if len(s) > 30]
    return found


def _normal(text: str) -> str:
    """Links as their text, whitespace collapsed."""
    return re.sub(r"\s+", " ", re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text))


def main(argv: list[str]) -> int:
    if argv:
        old = Path(argv[0]).read_text()
    else:
        show = ["git", "-C", str(REPO), "show", f"{BEFORE_THE_SPLIT}:README.md"]
        old = subprocess.run(show, capture_output=True, text=True, check=True).stdout
    pages = _pages()
    titles = {page: {title for _, title in headings(text)} for page, text in pages.items()}
    keys = {page: {key for _, rows in tables(text) for key in rows} for page, text in pages.items()}
    missing = 0
    print("headings")
    for level, title in headings(old):
        page, new = RENAMED.get(title, (None, title))
        where = [page] if page and new in titles.get(page, set()) else []
        where = where or [name for name, found in titles.items() if new in found]
        missing += not where
        shown = ", ".join(where) or "MISSING"
        print(f"  {'#' * level} {title} -> {shown}{f' ({new})' if where and new != title else ''}")
    print("tables")
    for header, rows in tables(old):
        homes = sorted({name for name, found in keys.items() for row in rows if row in found})
        on_site = set().union(*keys.values())
        lost = [
            row
            for row in rows
            if row not in on_site
            and row not in REMOVED
            and not (row in MOVED and set(MOVED[row]) <= on_site)
        ]
        missing += len(lost)
        print(f"  {header[:70]} ({len(rows)} rows) -> {', '.join(homes) or 'MISSING'}")
        for row in lost:
            print(f"    row MISSING: {row}")
    site = _normal("\n".join(pages.values()))
    sentences = _sentences(old)
    kept = [s for s in sentences if s in site]
    print(f"prose: {len(kept)} of {len(sentences)} sentences word for word on the site")
    if "-v" in sys.argv:
        for sentence in sentences:
            if sentence not in kept:
                print(f"  edited or moved: {sentence[:110]}")
    print("nothing lost" if not missing else f"{missing} headings or table rows not found")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main([arg for arg in sys.argv[1:] if arg != "-v"]))
