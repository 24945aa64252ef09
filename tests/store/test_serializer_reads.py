"""What reading a stored value costs and what it gives back: memory and bytes unpacked linear in
the row's size however deep its values nest, state models validated (never built unchecked), and
an honest thread read in a fresh process without a single LangGraph warning."""

from __future__ import annotations

import math
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import ormsgpack
import pytest

from gated_react import UnsafeCheckpoint, build_graph, open_checkpointer
from gated_react.state import RunInput, Usage
from gated_react.store.serializer import MAX_DEPTH, serializer
from gated_react.testing import ScriptedChatModel
from gated_react.tools.support import SUPPORT_TOOLS

from ..support.reaping import PATIENCE
from ..support.tamper import poison

THREAD = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
BIG = 2_000_000


def _nested(depth: int, leaf: Any) -> Any:
    """``leaf`` inside ``depth`` interrupts, each an extension value holding the next: what
    LangGraph writes for ``Interrupt(Interrupt(...))``, built as an attacker would."""
    value = leaf
    for _ in range(depth):
        held = ["langgraph.types", "Interrupt", {"value": value, "id": "i"}]
        value = ormsgpack.Ext(2, ormsgpack.packb(held))
    return value


@pytest.fixture
def unpacked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every buffer handed to ormsgpack's unpacker while the test runs."""
    sizes: list[int] = []
    real = ormsgpack.unpackb

    def counted(data: Any, *args: Any, **kwargs: Any) -> Any:
        sizes.append(len(data))
        return real(data, *args, **kwargs)

    monkeypatch.setattr(ormsgpack, "unpackb", counted)
    return sizes


def _peak(read: Any) -> tuple[int, Any]:
    """The peak of traced memory while ``read()`` runs, and what it returned or raised."""
    tracemalloc.start()
    try:
        try:
            outcome: Any = read()
        except UnsafeCheckpoint as refused:
            outcome = refused
        return tracemalloc.get_traced_memory()[1], outcome
    finally:
        tracemalloc.stop()


def test_a_2_mb_value_nested_300_levels_deep_costs_memory_linear_in_its_size(
    store_url: str, unpacked: list[int]
) -> None:
    """Written to the store directly, it used to cost about 600 MB to read (each level's bytes
    copied and unpacked again, every copy alive at once): now it is refused at ``MAX_DEPTH``
    levels, its bytes unpacked a bounded number of times."""
    with open_checkpointer(store_url) as saver:
        graph = build_graph(ScriptedChatModel(replies=["done"]), SUPPORT_TOOLS, checkpointer=saver)
        graph.invoke({"goal": "refund?"}, THREAD)
        poison(saver, "t", {"answer": _nested(300, "x" * BIG)})
        _peak(lambda: saver.get_tuple(THREAD))  # warm: imports and connection are not measured
        unpacked.clear()
        peak, outcome = _peak(lambda: saver.get_tuple(THREAD))
    assert peak < 6 * BIG, f"{peak / 1e6:.0f} MB to read a {BIG / 1e6:.0f} MB value"
    assert sum(unpacked) < (MAX_DEPTH + 4) * BIG, f"{sum(unpacked) / 1e6:.0f} MB unpacked"
    assert isinstance(outcome, UnsafeCheckpoint), outcome
    assert f"nested deeper than {MAX_DEPTH}" in str(outcome)
    assert "\n" not in str(outcome)


def test_a_value_nested_as_deep_as_allowed_reads_whole_in_memory_linear_in_its_size(
    unpacked: list[int],
) -> None:
    serde = serializer()
    stored = ("msgpack", ormsgpack.packb({"v": _nested(MAX_DEPTH, "x" * BIG)}))
    serde.loads_typed(("msgpack", ormsgpack.packb(_nested(2, "warm"))))
    unpacked.clear()
    peak, value = _peak(lambda: serde.loads_typed(stored))
    assert not isinstance(value, UnsafeCheckpoint), value
    inner, levels = value["v"], 0
    while not isinstance(inner, str):
        inner, levels = inner.value, levels + 1
    assert (levels, len(inner)) == (MAX_DEPTH, BIG)
    assert peak < 6 * BIG, f"{peak / 1e6:.0f} MB to read a {BIG / 1e6:.0f} MB value"
    assert len(unpacked) == MAX_DEPTH + 1  # each level's bytes once, the row's once
    assert sum(unpacked) < (MAX_DEPTH + 2) * BIG


@pytest.mark.parametrize(
    "fields",
    [
        {"steps": "many", "cost": math.nan},  # the value
        {"steps": 1, "tokens": "lots"},
        {"steps": 1, "unknown": 2},  # a field the model forbids
    ],
)
def test_a_stored_state_model_is_validated_or_refused_never_built_unchecked(
    fields: dict[str, Any],
) -> None:
    """LangGraph falls back to ``model_construct`` when a model does not validate: the value
    came back as a ``Usage`` whose ``steps`` was ``"many"``."""
    forged = ormsgpack.Ext(5, ormsgpack.packb(["gated_react.state", "Usage", fields]))
    for stored in (forged, [forged], _nested(2, forged)):
        with pytest.raises(UnsafeCheckpoint, match=r"gated_react\.state\.Usage") as refused:
            serializer().loads_typed(("msgpack", ormsgpack.packb(stored)))
        assert "\n" not in str(refused.value)


def test_a_valid_stored_state_model_comes_back_validated() -> None:
    serde = serializer()
    usage = Usage(steps=3, tokens=40, cost=0.5)
    assert serde.loads_typed(serde.dumps_typed({"u": [usage]})) == {"u": [usage]}


_READER = """
import sys
from gated_react import build_graph, open_checkpointer
from gated_react.testing import ScriptedChatModel
from gated_react.tools.support import SUPPORT_TOOLS

with open_checkpointer(sys.argv[1]) as saver:
    graph = build_graph(ScriptedChatModel(replies=[]), SUPPORT_TOOLS, checkpointer=saver)
    history = list(graph.get_state_history({"configurable": {"thread_id": "u"}}))
    print(len(history))
"""


def test_an_honest_run_input_thread_reads_without_a_warning_in_a_fresh_process(
    store_url: str, tmp_path: Path
) -> None:
    """LangGraph warns once per process ("Deserializing unregistered type
    gated_react.state.RunInput ... will be blocked in a future version"): a test reading in the
    process that wrote the thread never saw it."""
    with open_checkpointer(store_url) as saver:
        graph = build_graph(ScriptedChatModel(replies=["yes"]), SUPPORT_TOOLS, checkpointer=saver)
        graph.invoke(RunInput(goal="and again?"), {"configurable": {"thread_id": "u"}})
    script = tmp_path / "reader.py"
    script.write_text(_READER)
    done = subprocess.run(
        [sys.executable, str(script), store_url],
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[0]) >= 3
    assert "Deserializing unregistered type" not in done.stderr
    assert done.stderr == ""


def test_every_type_langgraph_marks_safe_reads_back_as_langgraph_builds_it_nested_too() -> None:
    """The reader builds what LangGraph's own would: constructors, positional and keyword
    arguments, ``datetime.fromisoformat``, ``Send`` with its timeout, a DeltaChannel snapshot,
    stored types as dict keys, each inside another."""
    from collections import deque
    from datetime import UTC, date, datetime, time, timedelta, timezone
    from decimal import Decimal
    from ipaddress import ip_address, ip_network
    from uuid import UUID
    from zoneinfo import ZoneInfo

    from langchain_core.messages import AIMessage
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    from langgraph.checkpoint.serde.types import _DeltaSnapshot
    from langgraph.types import Command, Interrupt, Send

    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    values = [
        when,
        date(2026, 1, 2),
        time(3, 4, tzinfo=timezone(timedelta(hours=2))),
        timedelta(days=1, seconds=2),
        UUID(int=7),
        Decimal("1.25"),
        {1, 2},
        frozenset({"a"}),
        deque([1, 2]),
        ip_address("127.0.0.1"),
        ip_network("10.0.0.0/8"),
        Path("/tmp/x"),
        ZoneInfo("UTC"),
        {"at": [when, {"in": UUID(int=1)}]},
        Send("node", {"messages": [AIMessage("hi", id="1")], "at": when}, timeout=5.0),
        Command(resume={"approved": True}, update={"u": Usage(steps=2)}, goto=[Send("n", 1)]),
        Interrupt(value={"question": Interrupt(value=when, id="inner")}, id="outer"),
        RunInput(goal="g", messages=[AIMessage("hi", id="1")]),
    ]
    serde = serializer()
    stored = serde.dumps_typed(values)
    langgraph = JsonPlusSerializer(allowed_msgpack_modules=True).loads_typed(stored)
    assert serde.loads_typed(stored) == langgraph == values
    snapshot = ("msgpack", ormsgpack.packb(ormsgpack.Ext(7, serde.dumps_typed([when])[1])))
    read = serde.loads_typed(snapshot)
    assert isinstance(read, _DeltaSnapshot)
    assert read.value == [when]


def _keyed() -> bytes:
    """A ``Send`` whose argument is ``{Interrupt(...): 1}``: bytes LangGraph never writes (a
    stored type as a dict key), forged."""
    pack = ormsgpack.packb
    key = pack(_nested(1, "x"))
    call = b"\x93" + pack("langgraph.types") + pack("Send") + b"\x92" + pack("n")
    return pack(ormsgpack.Ext(1, call + b"\x81" + key + b"\x01"))


@pytest.mark.parametrize(
    "row",
    [
        _keyed(),
        ormsgpack.packb(ormsgpack.Ext(0, b"\xc1")),  # bytes no msgpack reader takes
        ormsgpack.packb(
            ormsgpack.Ext(2, ormsgpack.packb(["langgraph.types", "Interrupt", ["not", "kw"]]))
        ),
    ],
    ids=["stored type as a key", "malformed bytes", "wrong arguments"],
)
def test_a_malformed_stored_value_is_one_line_not_a_traceback(row: bytes) -> None:
    with pytest.raises(UnsafeCheckpoint) as refused:
        serializer().loads_typed(("msgpack", row))
    assert "\n" not in str(refused.value)
