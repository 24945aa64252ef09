"""MkDocs hook: the graph's picture on the site, drawn offline from the graph itself.

The README shows the graph as a Mermaid block, which GitHub draws; the site is read offline, and
Mermaid's script would come from the web. So on the site, a ```mermaid block that starts with
``graph TD`` becomes an SVG: the nodes and labelled edges of ``idle_graph()`` (the real graph,
not the README's text), laid out by grandalf (a dependency already, for the ASCII drawing).
"""

from __future__ import annotations

import html
import re
from typing import Any

from grandalf.graphs import Edge, Graph, Vertex
from grandalf.layouts import SugiyamaLayout

MERMAID = re.compile(r"^```mermaid\n(graph TD;.*?)^```\n", re.MULTILINE | re.DOTALL)
WIDTH, HEIGHT, MARGIN = 96, 34, 40
FILL = {"__start__": "#ffffff", "__end__": "#bfb6fc"}


class _Box:
    def __init__(self) -> None:
        self.w, self.h, self.xy = WIDTH, HEIGHT, (0.0, 0.0)


class _Path:
    def __init__(self) -> None:
        self.points: list[tuple[float, float]] = []
        self.conditional = False

    def setpath(self, points: list[tuple[float, float]]) -> None:
        self.points = points


def _layout() -> tuple[dict[str, Vertex], list[Edge]]:
    from gated_react.graph import idle_graph

    drawable = idle_graph().get_graph()
    vertices = {name: Vertex(name) for name in drawable.nodes}
    for vertex in vertices.values():
        vertex.view = _Box()
    edges = []
    for edge in drawable.edges:
        made = Edge(vertices[edge.source], vertices[edge.target], data=edge.data)
        made.view = _Path()
        made.view.conditional = edge.conditional
        edges.append(made)
    layout = SugiyamaLayout(Graph(list(vertices.values()), edges).C[0])
    layout.init_all(roots=[vertices["__start__"]])
    layout.draw(3)
    return vertices, edges


def _clip(inside: tuple[float, float], outside: tuple[float, float]) -> tuple[float, float]:
    """Where the segment from a box's centre towards ``outside`` leaves the box."""
    (x0, y0), (x1, y1) = inside, outside
    dx, dy = x1 - x0, y1 - y0
    scale = min(
        (WIDTH / 2 + 3) / abs(dx) if dx else float("inf"),
        (HEIGHT / 2 + 3) / abs(dy) if dy else float("inf"),
    )
    return (x0 + dx * scale, y0 + dy * scale)


def _route(edge: Edge, twin: bool) -> list[tuple[float, float]]:
    """The edge's points (through grandalf's dummy nodes), clipped to the boxes; an edge with a
    twin in the other direction is moved aside so both stay visible."""
    points = list(edge.view.points)
    if twin:
        (x0, y0), (x1, y1) = points[0], points[-1]
        length = max(((x1 - x0) ** 2 + (y1 - y0) ** 2) ** 0.5, 1.0)
        side = 7 if edge.v[0].data < edge.v[1].data else -7
        nx, ny = -(y1 - y0) / length * side, (x1 - x0) / length * side
        points = [(x + nx, y + ny) for x, y in points]
    points[0] = _clip(points[0], points[1])
    points[-1] = _clip(points[-1], points[-2])
    return points


def _label_at(points: list[tuple[float, float]], twin: bool) -> tuple[float, float]:
    """The middle of the edge; a third of the way from its source when a twin shares the line."""
    if len(points) > 2:
        return points[len(points) // 2]
    (x0, y0), (x1, y1) = points
    part = 0.3 if twin else 0.5
    return (x0 + (x1 - x0) * part, y0 + (y1 - y0) * part)


def graph_svg() -> str:
    vertices, edges = _layout()
    pairs = {(e.v[0].data, e.v[1].data) for e in edges}
    twins = [(e.v[1].data, e.v[0].data) in pairs for e in edges]
    routes = [_route(e, twin) for e, twin in zip(edges, twins, strict=True)]
    xs = [
        x for v in vertices.values() for x in (v.view.xy[0] - WIDTH / 2, v.view.xy[0] + WIDTH / 2)
    ]
    ys = [
        y for v in vertices.values() for y in (v.view.xy[1] - HEIGHT / 2, v.view.xy[1] + HEIGHT / 2)
    ]
    xs += [x for route in routes for x, _ in route]
    ys += [y for route in routes for _, y in route]
    dx, dy = MARGIN - min(xs), MARGIN - min(ys)
    width, height = max(xs) - min(xs) + 2 * MARGIN, max(ys) - min(ys) + 2 * MARGIN
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="{width:.0f}" height="{height:.0f}" '
        f'role="img" aria-label="the graph: nodes and labelled edges" class="gated-graph">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        'fill="#555"/></marker></defs>',
        f'<g transform="translate({dx:.0f},{dy:.0f})">',
    ]
    for edge, route, twin in zip(edges, routes, twins, strict=True):
        dash = ' stroke-dasharray="5 4"' if edge.view.conditional else ""
        line = " ".join(f"{x:.0f},{y:.0f}" for x, y in route)
        parts.append(
            f'<polyline points="{line}" fill="none" stroke="#555"{dash} marker-end="url(#arrow)"/>'
        )
        if edge.data:
            x, y = _label_at(route, twin)
            parts.append(
                f'<text x="{x:.0f}" y="{y + 4:.0f}" class="label">{html.escape(edge.data)}</text>'
            )
    for name, vertex in vertices.items():
        x, y = vertex.view.xy
        radius = HEIGHT / 2 if name.startswith("__") else 6
        parts.append(
            f'<rect x="{x - WIDTH / 2:.0f}" y="{y - HEIGHT / 2:.0f}" width="{WIDTH}" '
            f'height="{HEIGHT}" rx="{radius:.0f}" fill="{FILL.get(name, "#f2f0ff")}" '
            'stroke="#7e6fd6"/>'
            f'<text x="{x:.0f}" y="{y + 5:.0f}" class="node">{html.escape(name)}</text>'
        )
    parts.append("</g></svg>")
    return "".join(parts)


def on_page_markdown(markdown: str, **_: Any) -> str:
    if "```mermaid" not in markdown:
        return markdown
    return MERMAID.sub(lambda _: f'<figure class="gated-graph">{graph_svg()}</figure>\n', markdown)
