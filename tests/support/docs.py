"""The documentation as tests read it: the pages of docs/, the README, sections, code blocks."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
README = REPO / "README.md"
PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", flags=re.DOTALL)


def page(name: str) -> str:
    """The text of ``docs/<name>`` (``guides/resuming.md``), or of the README for "README.md"."""
    return (REPO / name if name == "README.md" else DOCS / name).read_text()


def pages() -> list[Path]:
    """Every page of the site (docs/**/*.md but the studio fixture workspace), and the README."""
    found = [
        path
        for path in sorted(DOCS.rglob("*.md"))
        if not path.relative_to(DOCS).parts[0].startswith(("studio-workspace", "_"))
    ]
    return [README, *found]


def all_text() -> str:
    """The README and every page, joined: for checks that a name is documented somewhere."""
    return "\n".join(path.read_text() for path in pages())


def section(text: str, title: str) -> str:
    """The body under the heading ``title`` (any level), up to the next heading as high."""
    found = re.search(rf"^(#+) {re.escape(title)}\n", text, flags=re.MULTILINE)
    assert found, f"no heading {title!r}"
    level = len(found.group(1))
    rest = text[found.end() :]
    end = re.search(rf"^#{{1,{level}}} ", _without_code(rest), flags=re.MULTILINE)
    return rest[: end.start()] if end else rest


def _without_code(text: str) -> str:
    """The text with fenced blocks blanked out (same length), so a `# comment` is no heading."""
    return re.sub(r"```.*?```", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.DOTALL)


def python_blocks(text: str) -> list[str]:
    return PYTHON_BLOCK.findall(text)


SHELLS = frozenset({"bash", "sh", "shell", "console", "zsh"})
MARKER = re.compile(r"^<!-- (?:(?P<run>run)|not-run: (?P<reason>.*?)) -->$")
FENCE = re.compile(r"^```(?P<lang>[\w+-]*)\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page: its language, code, the line it starts on and its mark."""

    path: Path
    line: int
    lang: str
    code: str
    run: bool
    """Preceded by ``<!-- run -->``."""
    not_run: str | None
    """The reason given by ``<!-- not-run: reason -->``, if any."""

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """Every top-level fenced block of a page, in order, with the marker line just before it."""
    found: list[Block] = []
    lines = path.read_text().splitlines()
    index, previous = 0, ""
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            if lines[index].strip():
                previous = lines[index].strip()
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        mark = MARKER.match(previous)
        found.append(
            Block(
                path=path,
                line=index + 1,
                lang=opening.group("lang"),
                code="\n".join(lines[index + 1 : end]) + "\n",
                run=bool(mark and mark.group("run")),
                not_run=mark.group("reason") if mark else None,
            )
        )
        index, previous = end + 1, ""
    return found


def runnable_python(path: Path) -> list[Block]:
    """The page's Python blocks that run: every ```python block not marked not-run."""
    return [b for b in blocks(path) if b.lang == "python" and b.not_run is None]
