"""A keyed store's rows edited into another shape: every read refuses them as edited
(``SignatureRefused``, ``unverified``, one line naming the thread), never with a Python error
of another kind; a record whose time is no number reads as one that does not verify."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool

from gated_react import (
    Policy,
    UnsafeCheckpoint,
    aopen_checkpointer,
    build_graph,
    open_checkpointer,
    read,
    resume,
)
from gated_react.store.serializer import SignatureRefused
from gated_react.testing import ScriptedChatModel, call

from ..support.tamper import misshape_latest, set_record_at

KEY = "k" * 32


@tool
def lookup(user_id: int) -> str:
    """Look a user up (needs a human's approval)."""
    return f"user {user_id}"


def _config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def _wait(url: str, *threads: str) -> None:
    """Each of ``threads`` waits for a human's approval."""
    policy = Policy(allow=frozenset({"lookup"}), require_approval=frozenset({"lookup"}))
    with open_checkpointer(url, key=KEY) as saver:
        for thread in threads:
            model = ScriptedChatModel(replies=[call("lookup", user_id=7), "done"])
            graph = build_graph(model, [lookup], policy=policy, checkpointer=saver)
            assert graph.invoke({"goal": "look user 7 up"}, _config(thread))["__interrupt__"]


def _refused(exc: BaseException, thread: str) -> None:
    assert isinstance(exc, SignatureRefused), repr(exc)
    assert exc.kind == "unverified"
    assert f"thread {thread!r}" in str(exc)
    assert "edited or damaged" in str(exc)
    assert "\n" not in str(exc)


def test_a_checkpoint_of_another_shape_is_refused_by_every_read(store_url: str) -> None:
    """Before: ``AttributeError`` (SQLite) or ``TypeError`` (Postgres) from every read."""
    parts = ["checkpoint", "metadata"] + (["list"] if store_url.startswith("postgres") else [])
    _wait(store_url, "fine", *parts)
    for part in parts:
        misshape_latest(store_url, part, part)
    with open_checkpointer(store_url, key=KEY) as saver:
        graph = build_graph(ScriptedChatModel(replies=[]), [lookup], checkpointer=saver)
        assert read(graph, "fine")["status"] == "paused"  # the others read as ever
        for part in parts:
            for reading in (
                lambda thread: saver.get_tuple(_config(thread)),
                lambda thread: list(saver.list(_config(thread))),
                lambda thread: read(graph, thread),
            ):
                with pytest.raises(UnsafeCheckpoint) as refused:
                    reading(part)
                _refused(refused.value, part)

    async def aread(thread: str) -> None:
        async with aopen_checkpointer(store_url, key=KEY) as saver:
            await saver.aget_tuple(_config(thread))

    with pytest.raises(UnsafeCheckpoint) as refused:
        asyncio.run(aread("checkpoint"))
    _refused(refused.value, "checkpoint")


def test_a_record_whose_time_is_no_number_does_not_verify(tmp_path: Path) -> None:
    """Before: ``ValueError: could not convert string to float`` from every read of the run
    and from ``gated-react sign``. Now the record fails its signature, and the run it opened
    is answered and goes on."""
    path = tmp_path / "runs.sqlite"
    url = f"sqlite:///{path}"
    _wait(url, "t")
    assert set_record_at(path, "t", "opened", "not a time") == 1
    with open_checkpointer(url, key=KEY) as saver:
        policy = Policy(allow=frozenset({"lookup"}), require_approval=frozenset({"lookup"}))
        graph = build_graph(ScriptedChatModel(replies=["done"]), [lookup], policy=policy,
                            checkpointer=saver)  # fmt: skip
        out = resume(graph, "t", {"approved": True})
    assert out["stop_reason"] == "success"
