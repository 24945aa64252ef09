"""The base of every stored model: closed, its field docstrings its descriptions.

No ``from __future__ import annotations`` in the modules of ``gated_react.state`` that define
models: each model's ``__module__`` is the package (``__init__`` says why), and ``typing``
evaluates a string annotation in the namespace ``__module__`` names, which LangGraph does to
find the channels. Evaluated when the class is made, annotations need no namespace later.
"""

from collections.abc import Mapping
from typing import Any, Self

from pydantic import BaseModel, ConfigDict

_SLOTS = BaseModel.__dict__
_set_dict = _SLOTS["__dict__"].__set__
_set_fields = _SLOTS["__pydantic_fields_set__"].__set__
_set_extra = _SLOTS["__pydantic_extra__"].__set__
_set_private = _SLOTS["__pydantic_private__"].__set__


class StrictModel(BaseModel):
    """A model that refuses unknown fields and documents each field by its docstring."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """Pydantic's copy, unvalidated as its is: a shallow one made in one step (a ReAct step
        copies a dozen models, and pydantic's copies its fields, extras and set fields each
        through ``copy.copy``), its slots set through their descriptors (``object.__setattr__``
        looks each one up by name). A model with extra fields or private attributes, or a deep
        copy, is made by pydantic."""
        if deep or self.__pydantic_private__ is not None or self.__pydantic_extra__ is not None:
            return super().model_copy(update=update, deep=deep)
        cls = type(self)
        copied = cls.__new__(cls)
        if update:
            _set_dict(copied, {**self.__dict__, **update})
            _set_fields(copied, self.__pydantic_fields_set__ | update.keys())
        else:
            _set_dict(copied, self.__dict__.copy())
            _set_fields(copied, set(self.__pydantic_fields_set__))
        _set_extra(copied, None)
        _set_private(copied, None)
        return copied

    @classmethod
    def trusted(cls, **values: Any) -> Self:
        """A model of ``values`` (every field) made without validation, for the few a step
        makes from figures its maker has already checked (``Tally.usage``): validating them
        again, through a Python validator, was the bulk of their cost."""
        made = cls.__new__(cls)
        _set_dict(made, values)
        _set_fields(made, set(values))
        _set_extra(made, None)
        _set_private(made, None)
        return made


def dump(model: BaseModel | None) -> dict[str, Any] | None:
    """A model as a channel stores it: plain JSON, unset optional fields left out."""
    if model is None:
        return None
    return model.model_dump(mode="json", exclude_none=True)
