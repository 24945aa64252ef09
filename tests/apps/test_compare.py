"""The comparison finds each kind of difference issue 44 lists, named, on hand-made runs
(test_programs.py runs the programs themselves)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from .compare import differences, unanswered
from .harness import Run


def _message(kind: str, content: str, **more: Any) -> dict[str, Any]:
    return {"type": kind, "content": content, **more}


CALL = {"name": "lookup", "args": {"q": "x"}, "id": "call#1"}
MESSAGES = [
    _message("human", "My email is [REDACTED_EMAIL]"),
    _message("ai", "", tool_calls=[CALL], refusal=None),
    _message(
        "tool",
        "found",
        name="lookup",
        tool_call_id="call#1",
        status="success",
        artifact=[{"__type__": "Document", "metadata": {}, "page_content": "p"}],
    ),
    _message("ai", "Done.", tool_calls=[], refusal=None),
]
REQUEST = {
    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "q"}]
}


def _reference() -> Run:
    result = {"messages": MESSAGES, "structured_response": {"__type__": "Answer", "text": "Done."}}
    return Run(
        constructor="create_agent",
        code=0,
        stdout="================ Ai Message ================\n\nDone.\n",
        stderr="",
        records=[{"call": "invoke", "result": result, "stored": {"messages": MESSAGES}}],
        requests=[REQUEST, REQUEST],
    )


def _messages(run: Run) -> list[dict[str, Any]]:
    return run.records[0]["stored"]["messages"]


CHANGES: dict[str, tuple[Callable[[Run], None], str]] = {
    "a constructor refuses the program": (
        lambda r: (
            setattr(r, "code", 1),
            setattr(r, "stderr", "MiddlewareRefused: no"),
            setattr(r, "records", []),
        ),
        "exit: 0 vs 1; gated_react ended with: MiddlewareRefused: no",
    ),
    "a stream loop prints a message twice": (
        lambda r: setattr(r, "stdout", r.stdout * 2),
        "stdout: 3 lines vs 6",
    ),
    "the result shows more keys": (
        lambda r: r.records[0]["result"].update(status="ok", trace=[]),
        "call 1 (invoke) result keys: gated_react adds ['trace'], lacks []",  # status: the stop's
    ),
    "structured_response is a dict, not the schema's object": (
        lambda r: r.records[0]["result"].update(structured_response={"text": "Done."}),
        "call 1 (invoke) result structured_response: ",
    ),
    "the store keeps the PII the model never saw": (
        lambda r: _messages(r)[0].update(content="My email is ann@example.com"),
        "call 1 (invoke) messages[0] content: My email is [REDACTED_EMAIL] vs My email is ann@",
    ),
    "a Document artifact comes back a dict": (
        lambda r: [
            m.update(artifact=[{"metadata": {}, "page_content": "p", "type": "Document"}])
            if m["type"] == "tool"
            else None
            for m in _messages(r)
        ],
        'call 1 (invoke) messages[2] artifact: [{"__type__": "Document"',
    ),
    "refusal is dropped": (
        lambda r: _messages(r)[1].pop("refusal"),
        "call 1 (invoke) messages[1] refusal: null vs <absent>",
    ),
    "a call is answered twice": (
        lambda r: _messages(r).insert(3, dict(_messages(r)[2], content="Successfully handled")),
        "gated_react's tool call call#1 answered 2 times",
    ),
    "the run stops where the app handled the error": (
        lambda r: r.records[0]["stored"].update(
            messages=[
                *MESSAGES[:2],
                _message("ai", "I stopped before finishing (tool_error:lookup)"),
            ]
        ),
        "call 1 (invoke) messages: message types",
    ),
    "the model is sent the gate's rules": (
        lambda r: setattr(
            r,
            "requests",
            [
                {
                    "messages": [
                        {"role": "system", "content": "Rules. Be brief."},
                        REQUEST["messages"][1],
                    ]
                }
            ]
            * 2,
        ),
        "system prompt: gated_react adds up to 7 characters",
    ),
    "the model gets a different conversation": (
        lambda r: setattr(
            r,
            "requests",
            [REQUEST, {"messages": [*REQUEST["messages"], {"role": "user", "content": "again"}]}],
        ),
        "model request 2: message types",
    ),
}


def test_a_run_compared_with_itself_shows_no_difference() -> None:
    assert differences(_reference(), _reference()) == []


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_each_difference_is_found_and_named(change: str) -> None:
    alter, expected = CHANGES[change]
    ours = copy.deepcopy(_reference())
    ours.constructor = "gated_react"
    alter(ours)
    found = differences(_reference(), ours)
    assert any(expected in line for line in found), found


def test_a_call_still_waiting_for_review_is_not_unanswered() -> None:
    waiting = [*MESSAGES[:1], MESSAGES[1]]
    assert unanswered(waiting) == []
    assert unanswered([*MESSAGES[:2], MESSAGES[3]]) == ["call#1 not answered"]
