"""A program as docs/guides/chat.md tells its reader to change it for ``build_graph``, and its
output read back in ``create_agent``'s node names, so the guide's changes are run, not only
written down.

The guide gives two changes to a loop over ``stream_mode="updates"`` written for
``create_agent`` ("Streaming loops written for create_agent"): skip an update that holds no
messages (validate, gate and observe write none; decide none when the model answers), and
where the loop names ``create_agent``'s nodes, name ours.
"""

from __future__ import annotations

import re
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "chat.md"

SKIP = 'if not data or "messages" not in data:\n    continue'
"""The guide's line, for a loop whose update is called ``data``."""

NODES = {'("model", "tools")': '("decide", "execute", "finish")'}
"""A loop's choice of create_agent's nodes, and the guide's choice of ours."""

AS_CREATE_AGENTS = {"decide": "model", "finish": "model", "execute": "tools"}
"""Our nodes that write what ``create_agent``'s ``model`` and ``tools`` write."""

_UPDATES_LOOP = re.compile(r"^( *)for \w+, (\w+) in \w+\.items\(\):\n", re.MULTILINE)


def guided(source: str) -> tuple[str, int]:
    """``source`` with the guide's changes, and how many loops over updates it changed."""
    changed, loops = _UPDATES_LOOP.subn(_skipping, source)
    for theirs, ours in NODES.items():
        changed = changed.replace(theirs, ours)
    return changed, loops


def _skipping(loop: re.Match[str]) -> str:
    indent, update = loop.group(1) + "    ", loop.group(2)
    skip = SKIP.replace("data", update).replace("\n", "\n" + indent)
    return f"{loop.group(0)}{indent}{skip}\n"


def in_create_agents_names(stdout: str) -> str:
    """What a program printed, each ``step:`` / ``node:`` line naming ``create_agent``'s node
    that writes what ours wrote."""
    names = "|".join(AS_CREATE_AGENTS)
    return re.sub(
        rf"^(step|node): ({names})$",
        lambda line: f"{line.group(1)}: {AS_CREATE_AGENTS[line.group(2)]}",
        stdout,
        flags=re.MULTILINE,
    )


def from_updates(stdout: str) -> list[str]:
    """What ``stream_modes``' loops printed of each update: a step's name and its last
    message's content, and the completed messages its mixed loop renders."""
    return re.findall(
        r"^step: .*\n.*$|(?:Tool calls|Tool response|Model response): .*$", stdout, re.MULTILINE
    )
