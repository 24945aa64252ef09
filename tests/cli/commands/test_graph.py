"""``gated-react graph``: Mermaid (the README's drawing), ASCII, and a PNG drawn offline."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gated_react.cli.commands.graph import _drawing, dot_source

from ...support.cli import invoke

SNAPSHOT = Path(__file__).parents[2] / "snapshots" / "graph.mmd"


def test_mermaid_is_the_pinned_drawing() -> None:
    out = invoke("graph")
    assert out.exit_code == 0
    assert out.stdout == SNAPSHOT.read_text()


def test_ascii_draws_every_node() -> None:
    out = invoke("graph", "--format", "ascii")
    assert out.exit_code == 0
    for name in ("decide", "validate", "gate", "execute", "observe", "finish", "stop"):
        assert f"| {name} |" in out.stdout


def test_dot_source_has_every_edge_and_marks_the_conditional_ones() -> None:
    drawing = _drawing()
    text = dot_source(drawing)
    for edge in drawing.edges:
        line = next(
            row
            for row in text.splitlines()
            if row.strip().startswith(f'"{edge.source}" -> "{edge.target}"')
        )
        assert ("style=dashed" in line) == bool(edge.conditional)
        if edge.data:
            assert f'label="{edge.data}"' in line


def test_png_without_graphviz_names_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` anywhere
    out = invoke("graph", "--format", "png", "--output", str(tmp_path / "g.png"))
    assert out.exit_code == 1
    assert out.stderr.count("\n") == 1
    assert "install the system package `graphviz`" in out.stderr
    assert not (tmp_path / "g.png").exists()


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` is not installed")
def test_png_with_graphviz(tmp_path: Path) -> None:
    target = tmp_path / "g.png"
    out = invoke("graph", "--format", "png", "--output", str(target))
    assert out.exit_code == 0
    assert target.read_bytes().startswith(b"\x89PNG")
