"""The channel of ``structured_response``: it stores the answer as plain JSON (what every
checkpointer stores and this package's serializer reads back without reviving a type of the
app's), and gives it back as the ``response_format`` schema's object."""

import json
from collections.abc import Callable
from typing import Any

from langgraph._internal._typing import MISSING
from langgraph.channels import LastValue
from pydantic import BaseModel, TypeAdapter


class Revived(LastValue[Any]):
    """``LastValue`` of plain JSON, read as ``revive(value)`` (made once per value)."""

    __slots__ = ("made", "revive")

    def __init__(self, typ: Any, key: str = "", revive: Callable[[Any], Any] | None = None) -> None:
        super().__init__(typ, key)
        self.revive = revive
        self.made: tuple[Any, Any] | None = None

    def copy(self) -> "Revived":
        made = Revived(self.typ, self.key, self.revive)
        made.value = self.value
        return made

    def from_checkpoint(self, checkpoint: Any) -> "Revived":
        made = Revived(self.typ, self.key, self.revive)
        if checkpoint is not MISSING:
            made.value = checkpoint
        return made

    def get(self) -> Any:
        value = super().get()
        if value is None or self.revive is None:
            return value
        if self.made is None or self.made[0] is not value:
            self.made = (value, self.revive(value))
        return self.made[1]


def reviver(schema: Any) -> Callable[[Any], Any]:
    """What turns stored JSON back into ``schema``'s object (a JSON schema's answer is its data)."""
    if isinstance(schema, dict):
        return lambda data: data
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_validate
    adapter: TypeAdapter[Any] = TypeAdapter(schema)
    return adapter.validate_python


def data_of(answer: Any) -> Any:
    """An answer as the state stores it: plain JSON."""
    if isinstance(answer, BaseModel):
        return answer.model_dump(mode="json")
    try:
        return json.loads(TypeAdapter(type(answer)).dump_json(answer))
    except Exception:  # a dict from a JSON schema: already JSON
        return answer
