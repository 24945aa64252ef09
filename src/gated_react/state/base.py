"""The base of every stored model: closed, its field docstrings its descriptions.

No ``from __future__ import annotations`` in the modules of ``gated_react.state`` that define
models: each model's ``__module__`` is the package (``__init__`` says why), and ``typing``
evaluates a string annotation in the namespace ``__module__`` names, which LangGraph does to
find the channels. Evaluated when the class is made, annotations need no namespace later.
"""

from typing import Any

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """A model that refuses unknown fields and documents each field by its docstring."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


def dump(model: BaseModel | None) -> dict[str, Any] | None:
    """A model as a channel stores it: plain JSON, unset optional fields left out."""
    if model is None:
        return None
    return model.model_dump(mode="json", exclude_none=True)
