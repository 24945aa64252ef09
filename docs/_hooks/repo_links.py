"""MkDocs hooks: the site is built from docs/ but quotes and links the rest of the repository.

- ``<!-- include: ../README.md -->`` (or ``../README.md#install`` for one section) inlines a
  file of the repository, so the README, the home page and the getting-started page share one
  text instead of two copies. A whole-file include drops the file's own title when the page
  already has text before the directive (BENCHMARKS.md under the page's title).
- A relative link that leaves docs/ (``../tests/e2e/test_kills.py``) must name a file or folder
  that exists in the repository; it is rewritten to the repository's address (``repo_url``),
  or, while the project has no public address (no ``repo_url``: never a placeholder host), to
  the link's text and the file's path in the repository, in code.
  A link to a missing file is a warning, so ``mkdocs build --strict`` fails on it, as it does on
  a broken link between pages. Links in included text are first rebased onto the including page.
"""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path
from typing import Any

log = logging.getLogger("mkdocs.plugins.repo_links")

INCLUDE = re.compile(r"^<!-- include: (?P<path>[^#\s]+)(?:#(?P<section>[\w-]+))? -->$", re.M)
LINK = re.compile(r"(?<!\\)\[(?P<text>[^\[\]]*)\]\((?P<target>[^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")
HEADING = re.compile(r"^(#{1,6}) (.+)$")
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


def slug(title: str) -> str:
    """The anchor Python-Markdown's toc gives a heading (its default slugify)."""
    text = re.sub(r"[^\w\s-]", "", title.replace("`", "")).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _outside_fences(text: str) -> list[tuple[bool, str]]:
    """The text's lines, each with whether it is prose (outside a code fence)."""
    lines, fenced = [], False
    for line in text.splitlines(keepends=True):
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            lines.append((False, line))
        else:
            lines.append((not fenced, line))
    return lines


def _section(text: str, section: str, source: Path) -> str:
    """The body of the heading whose anchor is ``section``, up to the next heading as high."""
    lines = text.splitlines(keepends=True)
    prose = _outside_fences(text)
    for index, (is_prose, line) in enumerate(prose):
        found = HEADING.match(line.rstrip("\n")) if is_prose else None
        if found and slug(found.group(2)) == section:
            level = len(found.group(1))
            end = next(
                (
                    later
                    for later in range(index + 1, len(lines))
                    if prose[later][0]
                    and (deeper := HEADING.match(lines[later].rstrip("\n")))
                    and len(deeper.group(1)) <= level
                ),
                len(lines),
            )
            return "".join(lines[index + 1 : end]).strip("\n") + "\n"
    log.warning("%s has no section '#%s' to include", source, section)
    return ""


def _rewrite_links(text: str, base: Path, page_dir: Path, config: Any) -> str:
    """Links relative to ``base`` made relative to the page, or to the repository's address."""
    docs = Path(config["docs_dir"]).resolve()
    repo = docs.parent

    def one(found: re.Match[str]) -> str:
        target = found.group("target")
        if SCHEME.match(target) or target.startswith(("#", "/")):
            return found.group(0)
        path, _, anchor = target.partition("#")
        resolved = Path(posixpath.normpath((base / path).as_posix()))
        if resolved.is_relative_to(docs) and not resolved.is_relative_to(docs / "studio-workspace"):
            new = posixpath.relpath(resolved.as_posix(), page_dir.as_posix())
            return f"[{found.group('text')}]({new}{'#' + anchor if anchor else ''})"
        if not resolved.is_relative_to(repo) or not resolved.exists():
            log.warning("link to '%s' from %s: no such file in the repository", target, base)
            return found.group(0)
        return _to_repository(found.group("text"), resolved, repo, anchor, config)

    return "".join(
        LINK.sub(one, line) if is_prose else line for is_prose, line in _outside_fences(text)
    )


def _to_repository(text: str, resolved: Path, repo: Path, anchor: str, config: Any) -> str:
    """A link to a file of the repository: to it at the repository's address, or (with none)
    its text followed by its path, in code, when the text does not already say it."""
    path = resolved.relative_to(repo)
    if config.get("repo_url"):
        kind = "tree" if resolved.is_dir() else "blob"
        address = f"{config['repo_url'].rstrip('/')}/{kind}/main/{path}"
        return f"[{text}]({address}{'#' + anchor if anchor else ''})"
    named = f"`{path.as_posix()}`"
    if text.strip("`") == path.as_posix():
        return named
    return text if path.as_posix() in text else f"{text} ({named})"


def _included(found: re.Match[str], page_dir: Path, has_text_before: bool, config: Any) -> str:
    source = Path(posixpath.normpath((page_dir / found.group("path")).as_posix()))
    if not source.is_file():
        log.warning("include of '%s': no such file", found.group("path"))
        return ""
    text = source.read_text()
    if found.group("section"):
        text = _section(text, found.group("section"), source)
    elif has_text_before and text.startswith("# "):
        text = text.split("\n", 1)[1].lstrip("\n")
    return _rewrite_links(text, source.parent, page_dir, config)


def on_page_markdown(markdown: str, page: Any, config: Any, **_: Any) -> str:
    page_dir = Path(page.file.abs_src_path).resolve().parent

    own = _rewrite_links(markdown, page_dir, page_dir, config)

    def expand(found: re.Match[str]) -> str:
        return _included(found, page_dir, bool(own[: found.start()].strip()), config)

    return INCLUDE.sub(expand, own)
