"""How the model states its action. Each protocol binds the model and turns a reply into a
candidate object for the action contract; everything after ``validate`` is shared. What a
protocol must provide is the engine's ``ActionProtocol``; ``build_graph`` picks one here by
``Policy.protocol``."""

from __future__ import annotations

from gated_react._engine.model.protocol import ActionProtocol, BoundModel
from gated_react.protocols.jsonmode import JsonProtocol
from gated_react.protocols.native import ToolsProtocol
from gated_react.protocols.text import TextProtocol

PROTOCOLS: dict[str, ActionProtocol] = {
    "json": JsonProtocol(),
    "text": TextProtocol(),
    "tools": ToolsProtocol(),
}

__all__ = ["PROTOCOLS", "ActionProtocol", "BoundModel"]
