"""A chat page on ``useStream`` (``@langchain/langgraph-sdk/react``, the hook Agent Chat UI is
built on) in headless Chromium, against ``langgraph dev`` serving the refund graph and a scripted
chat-completions server. The page (tests/browser/page) draws what Agent Chat UI draws: a card per
tool call of an AIMessage, a card per ToolMessage, the answer, and the approval panel under the
last message when that is an AI or tool message. puppeteer-core types, clicks and reloads as a
person would (tests/browser/drive.mjs); a MutationObserver records every state of the message
list, so an answer that vanishes for a moment when streaming ends is seen.

One thread, four turns: two tool calls and their results, then three questions that wait for
approval (approve, edit, reject), each in a later turn; a reload while one waits and one at the
end. The same scenario runs on LangChain's ``create_agent`` with the same tools and model
(tests/browser/create_agent_graph.py): the page must show the same cards and panels for both.
Screenshots go to test-artifacts/browser/<graph>/. Skipped, with the reason, without chromium,
node or npm; ``GATED_REACT_REQUIRE_BROWSER=1`` (CI) fails instead."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, convert_to_messages

from ..support import browser
from ..support.openai_server import FakeOpenAI, Reply, reply, tool_call
from ..support.studio_server import CONFIG, REPO, serving

pytestmark = [pytest.mark.studio, pytest.mark.browser]

SHOTS = REPO / "test-artifacts" / "browser"
REFERENCE = browser.BROWSER_JS / "create_agent_graph.py"
CONTEXT = {"require_approval": ["get_user_billing"], "max_steps": 6}
GRAPHS: dict[str, tuple[str, dict[str, Any]]] = {
    "gated-react": ("refund", CONTEXT),
    "create_agent": ("create_agent", {}),  # the reference: approvals by its own middleware
}
PROFILE = ("get_user_profile", {"user_id": 42})
POLICY = ("search_policy", {"query": "refund pro"})
BILLING = ("get_user_billing", {"user_id": 42})
FIRST = "Can user 42 get a refund? Check the profile and the refund policy."
QUESTIONS: list[dict[str, Any]] = [
    {"text": FIRST, "plan": [PROFILE, POLICY]},
    {"text": "What does user 42 pay?", "plan": [BILLING], "decision": "approve"},
    {"text": "Tell me again: the price for 42?", "plan": [BILLING], "decision": "edit"},
    {"text": "Once more, 42's billing please.", "plan": [BILLING], "decision": "reject"},
]
DETAILS = {"edit": {"user_id": 7}, "reject": "not today"}
SAID = "Here is what the tools said: "
REJECTED = "I didn't use get_user_billing: a reviewer turned it down."
BUTTONS = ["approve", "edit", "reject"]


def _asked(messages: list[BaseMessage]) -> tuple[int, dict[str, Any]]:
    """The question the request is about: the last one written in a human message (earlier
    turns may be quoted in the same message), and that message's index."""
    found: tuple[int, int, dict[str, Any]] | None = None
    for index, message in enumerate(messages):
        text = str(message.content) if message.type == "human" else ""
        for question in QUESTIONS:
            at = text.rfind(question["text"])
            if at >= 0 and (found is None or (index, at) > found[:2]):
                found = (index, at, question)
    assert found is not None, f"no known question in {messages}"
    return found[0], found[2]


def _model(request: dict[str, Any]) -> Reply:
    """Stateless: follows the asked question's plan of calls, one per tool result already
    shown after it, then answers with those results, word by word."""
    messages = convert_to_messages(request["messages"])
    index, question = _asked(messages)
    results = [str(m.content) for m in messages[index + 1 :] if m.type == "tool"]
    if len(results) < len(question["plan"]):
        name, args = question["plan"][len(results)]
        return tool_call(name, **args)
    return reply(SAID + " | ".join(results))


@dataclass(frozen=True)
class Stack:
    """One model server, dev server and browser for both graphs."""

    node: str
    endpoint: str
    api_url: str
    page_url: str


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    found = browser.tools()
    browser.install(found.npm)
    page = browser.build(found.node, tmp_path_factory.mktemp("browser-page"))
    work = tmp_path_factory.mktemp("browser-server")
    with (
        FakeOpenAI(default=_model) as model,
        serving(work, model, _config(work)) as server,
        browser.serving_pages(page) as page_url,
        browser.chromium(found.chromium, tmp_path_factory.mktemp("chromium")) as endpoint,
    ):
        yield Stack(found.node, endpoint, server.url, page_url)


def _config(folder: Path) -> Path:
    """The repository's langgraph.json plus the create_agent graph."""
    config = json.loads(CONFIG.read_text())
    config["dependencies"] = [str(REPO)]
    config["graphs"]["create_agent"] = f"{REFERENCE}:graph"
    path = folder / "langgraph.json"
    path.write_text(json.dumps(config))
    return path


@pytest.fixture(scope="module", params=list(GRAPHS))
def seen(stack: Stack, request: pytest.FixtureRequest) -> dict[str, Any]:
    """What the page showed at each step of the scenario (tests/browser/drive.mjs) on one
    graph; screenshots and this JSON in test-artifacts/browser/<graph>/."""
    graph, context = GRAPHS[request.param]
    shots = SHOTS / request.param
    shutil.rmtree(shots, ignore_errors=True)
    questions = [{**q, "detail": DETAILS.get(q.get("decision", ""))} for q in QUESTIONS]
    out: dict[str, Any] = browser.drive(
        stack.node,
        stack.endpoint,
        stack.api_url,
        stack.page_url,
        shots,
        graph=graph,
        questions=questions,
        context=context,
    )
    (shots / "seen.json").write_text(json.dumps(out, indent=1))
    return {**out, "graph": request.param}


def _step(seen: dict[str, Any], key: str) -> dict[str, Any]:
    """One step's view; a step the driver never reached fails with the driver's error."""
    if key not in seen:
        log = "\n".join(seen["console"][-20:])
        pytest.fail(f"the driver stopped before {key!r}: {seen.get('error')}\n{log}")
    step: dict[str, Any] = seen[key]
    assert step["error"] is None, step["error"]
    return step


def _turn(step: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages of the step's last turn: from its human message on."""
    shown: list[dict[str, Any]] = step["messages"]
    humans = [i for i, m in enumerate(shown) if m["type"] == "human"]
    return shown[humans[-1] :] if humans else shown


def _calls(shown: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(c["name"], c["args"]) for m in shown for c in m["calls"]]


def _results(shown: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m["result"] for m in shown if m["result"]]


def test_tool_calls_and_their_results_are_drawn_as_cards(seen: dict[str, Any]) -> None:
    shown = _step(seen, "turn1")["messages"]
    assert [m["type"] for m in shown] == ["human", "ai", "tool", "ai", "tool", "ai"]
    assert _calls(shown) == [PROFILE, POLICY]
    results = _results(shown)
    ids = [c["call_id"] for m in shown for c in m["calls"]]
    assert all(ids)
    assert [r["call_id"] for r in results] == ids  # each call answered, in order
    assert [(r["name"], r["status"]) for r in results] == [
        ("get_user_profile", "success"),
        ("search_policy", "success"),
    ]
    assert '"name": "Anna"' in results[0]["content"]
    assert "refund-v3" in results[1]["content"]
    assert shown[-1]["text"] == SAID + " | ".join(r["content"] for r in results)


def test_a_question_in_a_second_turn_gets_the_approval_panel(seen: dict[str, Any]) -> None:
    step = _step(seen, "approve_asked")
    assert step["interrupted"]
    *before, asked, call = step["messages"]
    assert [m["type"] for m in before] == ["human", "ai", "tool", "ai", "tool", "ai"]
    assert (asked["type"], asked["text"]) == ("human", QUESTIONS[1]["text"])
    assert (call["type"], _calls([call])) == ("ai", [BILLING])
    assert call["panel"] == {"name": BILLING[0], "args": BILLING[1], "buttons": BUTTONS}
    assert [m for m in step["messages"] if m["panel"]] == [call]


def test_a_reload_while_the_question_waits_keeps_cards_and_panel(seen: dict[str, Any]) -> None:
    asked, reloaded = _step(seen, "approve_asked"), _step(seen, "reload_waiting")
    assert reloaded["interrupted"]
    assert reloaded["messages"][-1]["panel"] is not None
    assert reloaded["messages"] == asked["messages"]


@pytest.mark.parametrize("decision", ["approve", "edit", "reject"])
def test_each_decision_clicked_in_the_panel_ends_the_turn(
    seen: dict[str, Any], decision: str
) -> None:
    asked, after = _step(seen, f"{decision}_asked"), _step(seen, decision)
    assert _turn(asked)[-1]["panel"] is not None
    assert "fallback" not in after  # the page's own button answered
    assert not after["interrupted"]
    assert [m for m in after["messages"] if m["panel"]] == []
    human, call, result, answer = _turn(after)
    assert (human["type"], call["type"], answer["type"]) == ("human", "ai", "ai")
    assert [name for name, _ in _calls([call])] == ["get_user_billing"]
    assert result["result"]["call_id"] == call["calls"][0]["call_id"]
    content, status = result["result"]["content"], result["result"]["status"]
    if decision == "approve":
        assert (status, '"plan": "pro_monthly"' in content) == ("success", True)
        assert answer["text"] == SAID + content
    elif decision == "edit":  # user 7's billing, the edited call's
        assert (status, '"plan": "free"' in content) == ("success", True)
        assert answer["text"] == SAID + content
    else:
        assert status == "error"
        assert "not today" in content
        if seen["graph"] == "gated-react":  # stops; create_agent asks its model again
            assert answer["text"].startswith(REJECTED)
        else:
            assert answer["text"] == SAID + content


def test_a_reload_keeps_every_card(seen: dict[str, Any]) -> None:
    before, after = _step(seen, "before_reload"), _step(seen, "reload")
    assert after["messages"] == before["messages"]
    assert len(_calls(after["messages"])) == len(_results(after["messages"])) == 5
    stored = [(m["type"], m["id"]) for m in seen["stored"]]
    assert [(m["type"], m["id"]) for m in after["messages"]] == stored


def _drawn(sample: dict[str, Any], answer: str) -> int:
    """How much of the answer one recorded state of the page showed (0: none of it)."""
    texts = [m["text"] for m in sample["shown"] if m["type"] == "ai" and m["text"]]
    return max((len(text) for text in texts if answer.startswith(text)), default=0)


@pytest.mark.parametrize("key", ["turn1", "approve", "edit"])
def test_the_answer_never_disappears_once_drawn(seen: dict[str, Any], key: str) -> None:
    step = _step(seen, key)
    assert "fallback" not in step  # streamed into the page, not read back after a reload
    answer = _turn(step)[-1]["text"]
    assert answer.startswith(SAID)
    samples = step["samples"]
    drawn = [_drawn(sample, answer) for sample in samples]
    first = next((i for i, n in enumerate(drawn) if n), None)
    assert first is not None, "the answer was never drawn"
    assert len(set(drawn[first:])) > 2  # drawn word by word: each state was recorded
    shrank = [
        f"{now} of {before} characters, {samples[i]['t'] - samples[first]['t']:.0f} ms in"
        for i, (before, now) in enumerate(pairwise(drawn[first:]), first + 1)
        if now < before
    ]
    assert shrank == []


STEPS = ["turn1", *(f"{d}{s}" for d in ("approve", "edit", "reject") for s in ("_asked", ""))]


@pytest.mark.parametrize("key", STEPS)
def test_no_message_or_card_drawn_disappears_while_a_run_streams(
    seen: dict[str, Any], key: str
) -> None:
    samples = _step(seen, key)["samples"]
    drawn = [(len(s["shown"]), sum(m["cards"] for m in s["shown"])) for s in samples]
    fewer = [
        f"{now} (messages, cards) after {before}, {samples[i]['t'] - samples[0]['t']:.0f} ms in"
        for i, (before, now) in enumerate(pairwise(drawn), 1)
        if now[0] < before[0] or now[1] < before[1]
    ]
    assert fewer == []


def test_screenshots_are_saved(seen: dict[str, Any]) -> None:
    _step(seen, "reload")
    for name in ("turn1", "approve-panel", "edit-panel", "reject-panel", "final"):
        shot = SHOTS / seen["graph"] / f"{name}.png"
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
