"""A store edited by someone else: checkpoints written through a saver's own code, holding what
an attacker with write access to the store would put there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ormsgpack
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.base.id import uuid6


def touch(path: Path, code: int = 0) -> ormsgpack.Ext:
    """An extension value that LangGraph's default serializer revives as
    ``os.system("touch <path>")``: the file exists afterwards if anything ran it."""
    return ormsgpack.Ext(code, ormsgpack.packb(["os", "system", f"touch {path}"]))


def poison(saver: BaseCheckpointSaver[Any], thread: str, values: dict[str, Any]) -> None:
    """A newer checkpoint of ``thread`` whose channels hold ``values`` (raw msgpack values,
    extension values included), as if its latest row had been edited in the store."""
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    found = saver.get_tuple(config)  # type: ignore[arg-type]
    assert found is not None, f"thread {thread!r} has no checkpoint to edit"
    checkpoint = dict(found.checkpoint)
    versions = dict(checkpoint["channel_versions"])
    for channel in values:
        versions[channel] = saver.get_next_version(versions.get(channel), None)
    checkpoint.update(
        id=str(uuid6()),
        channel_versions=versions,
        channel_values={**checkpoint["channel_values"], **values},
    )
    new = {channel: versions[channel] for channel in values}
    saver.put(found.config, checkpoint, found.metadata, new)  # type: ignore[arg-type]
