"""``gated-react graph``: the graph as Mermaid, ASCII art or a PNG (drawn offline)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gated_react.cli.exits import CliError
from gated_react.errors import one_line

if TYPE_CHECKING:
    from langchain_core.runnables.graph import Graph as Drawing

_NO_DOT = (
    "PNG needs Graphviz's `dot`, which is not installed: install the system package "
    "`graphviz` (apt-get install graphviz, brew install graphviz), or use --format mermaid"
)


class Format(StrEnum):
    mermaid = "mermaid"
    ascii = "ascii"
    png = "png"


def graph_command(
    format: Annotated[Format, typer.Option("--format", "-f", help="Output format.")] = (
        Format.mermaid
    ),
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Where to write the PNG.", dir_okay=False)
    ] = Path("gated-react-graph.png"),
) -> None:
    """Print the graph (Mermaid or ASCII), or write it as a PNG without any network."""
    if format is Format.png and shutil.which("dot") is None:
        raise CliError(_NO_DOT)
    drawing = _drawing()
    if format is Format.mermaid:
        sys.stdout.write(drawing.draw_mermaid())
    elif format is Format.ascii:
        sys.stdout.write(_ascii(drawing) + "\n")
    else:
        _png(drawing, output)
        sys.stdout.write(f"wrote {output}\n")


def _drawing() -> Drawing:
    from gated_react.graph import idle_graph

    return idle_graph().get_graph()


def _ascii(drawing: Drawing) -> str:
    try:
        import grandalf  # noqa: F401
    except ImportError:
        raise CliError("--format ascii needs grandalf: pip install grandalf") from None
    return drawing.draw_ascii()


def dot_source(drawing: Drawing) -> str:
    """Graphviz DOT text: dashed edges are conditional, labels name the branch."""
    lines = [
        "digraph gated_react {",
        '  rankdir=TB; node [shape=box, style=rounded, fontname="Helvetica"];',
        '  edge [fontname="Helvetica"];',
    ]
    for node in drawing.nodes.values():
        shape = ", shape=oval" if node.id.startswith("__") else ""
        lines.append(f'  "{node.id}" [label="{node.name}"{shape}];')
    for edge in drawing.edges:
        attrs = ["style=dashed"] if edge.conditional else []
        if edge.data:
            attrs.append(f'label="{edge.data}"')
        lines.append(f'  "{edge.source}" -> "{edge.target}" [{", ".join(attrs)}];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _png(drawing: Drawing, output: Path) -> None:
    done = subprocess.run(
        ["dot", "-Tpng", "-o", str(output)],
        input=dot_source(drawing),
        text=True,
        capture_output=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise CliError(f"dot failed: {one_line(done.stderr)[:300]}")
