"""decide reads the channels it works from and no other: never the audit log (validating
``trace`` grew with every step), nor the ones only other nodes read. The graph hands decide its
channels as stored; ``state_of`` validates them into the ``State`` decide works from."""

from __future__ import annotations

from typing import get_type_hints

import pytest
from pydantic import ValidationError

from gated_react.nodes.decide import Channels, state_of
from gated_react.state import State

from ..test_graph import _graph


def test_decide_reads_its_channels_and_not_the_trace() -> None:
    """Nor ``structured_response`` (no node reads it), nor what decide only writes (the reply,
    the run context) or other nodes read (how a run ended, but for the stop reason: with the
    status, it tells a run that ended from an edit of ``status``). It reads where the run's
    loop keys start: a message cutting into a waiting step asks whether the gate counted its
    calls."""
    assert set(get_type_hints(Channels)) == set(State.model_fields) - {
        "trace",
        "structured_response",
        "reply",
        "run_context",
        "message",
        "answer",
    }
    builder = _graph().builder
    assert builder.nodes["decide"].input_schema is Channels
    assert "trace" not in builder.schemas[Channels]


def test_the_state_from_the_channels_is_validated_as_before() -> None:
    entry = {"step": 1, "action": {"name": "t", "args": {"a": 1}}, "observation": "x"}
    channels = {"goal": "g", "history": [entry], "usage": {"steps": 1}, "history_from": 0}
    read, validated = state_of(channels), State(**channels)  # type: ignore[arg-type]
    assert {name: getattr(validated, name) for name in get_type_hints(Channels)} == vars(read)
    assert state_of(channels).history[0].action.args == {"a": 1}
    with pytest.raises(ValidationError):
        state_of({**channels, "history": [{"step": "one"}]})
