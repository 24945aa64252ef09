"""What each node's update shows in an event (``records.described``)."""

from __future__ import annotations

from gated_react.records.described import clip, describe, execute_word


def test_a_finish_without_an_answer_in_the_step_shows_the_last_ai_message() -> None:
    update = {"messages": [{"type": "ai", "text": "first"}, {"type": "ai", "text": "last"}]}
    assert describe("finish", {}, update, None) == ({"final": "last"}, None)


def test_a_gate_shows_the_refusal_it_tells_the_model() -> None:
    step = {"calls": [{"tool": "pay", "args": {"to": "x"}, "shown": {"error": "not allowed"}}]}
    assert describe("gate", step, {}, "allowed") == ({"tool": "pay", "args": {"to": "x"}},
                                                     "not allowed")  # fmt: skip


def test_a_node_it_does_not_know_shows_nothing() -> None:
    assert describe("a_hook", {"calls": [{"tool": "pay"}]}, {}, None) == (None, None)


def test_execute_is_ok_only_when_every_call_returned_and_nothing_ended_the_step() -> None:
    ran = {"outcome": {"ok": True}}
    assert execute_word({"calls": [ran, ran]}) == "ok"
    assert execute_word({"calls": [ran, {"outcome": {"ok": False}}]}) == "error"
    assert execute_word({"calls": [ran], "ending": {"reason": "max_seconds"}}) == "error"


def test_a_long_value_is_clipped_to_one_line() -> None:
    assert clip("a\nb") == "a b"
    assert clip("x" * 200, 10) == "x" * 9 + "…"
