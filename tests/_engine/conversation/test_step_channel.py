"""The step in hand as its channel holds it: the dict a node wrote is read back once as the
model it was dumped from; anything else is validated; nothing is kept past ``KEPT``."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gated_react._engine.conversation import step_channel
from gated_react._engine.conversation.step_channel import read, stored
from gated_react.state import Call, Step


def _step(run: str = "q1") -> Step:
    return Step(run=run, calls=[Call(id="c1", tool="pay", args={"to": "ann"})])


def test_the_dict_written_is_read_once_as_its_model_then_validated() -> None:
    step = _step()
    written = stored(step)
    assert written == step.model_dump(mode="json", exclude_none=True)
    assert read(written) is step
    again = read(written)  # the next node has it: a second read validates
    assert again is not step
    assert again == step


def test_a_dict_this_process_did_not_write_is_validated() -> None:
    step = _step()
    written = stored(step)
    copy = dict(written)  # a checkpoint loaded, a state edit: another object
    assert read(copy) == step
    assert read(copy) is not step
    with pytest.raises(ValidationError):
        read({**written, "calls": "not a list"})


def test_steps_never_read_are_dropped_past_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(step_channel, "KEPT", 3)
    monkeypatch.setattr(step_channel, "_WRITTEN", {})
    steps = [_step(f"q{i}") for i in range(5)]
    written = [stored(step) for step in steps]
    assert len(step_channel._WRITTEN) == 3
    oldest = read(written[0])  # dropped: validated
    assert oldest is not steps[0]
    assert oldest == steps[0]
    assert read(written[-1]) is steps[-1]
    assert len(step_channel._WRITTEN) == 2
