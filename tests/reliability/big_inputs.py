"""Parse adversarial 1 MB replies with every protocol; one JSON line per case on stdout.

Run as ``python -m tests.reliability.big_inputs`` (the test does, in a child process with a
ceiling): each line has the case, the protocol, the input size, the result (``action`` or the
``invalid_action`` why) and the seconds it took.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from langchain_core.messages import AIMessage

from gated_react._engine.model.contract import ActionError, check_contract
from gated_react.nodes.decide import reply_of
from gated_react.protocols import PROTOCOLS
from gated_react.state import Reply
from gated_react.tools.calculator import calculate
from gated_react.tools.support import SUPPORT_TOOLS

MB = 1_000_000
TOOLS = {tool.name: tool for tool in [*SUPPORT_TOOLS, calculate]}


def _fill(unit: str, size: int = MB) -> str:
    return unit * (size // len(unit) + 1)


def _many_keys(duplicate: bool) -> str:
    members = [f'"k{i}": {i}' for i in range(MB // 10)]
    if duplicate:
        members.append('"k0": 0')
    return '{"kind": "tool", "name": "calculate", "args": {' + ", ".join(members) + "}}"


def json_cases() -> Iterator[tuple[str, str]]:
    yield "long string arg", json.dumps({"kind": "tool", "name": "t", "args": {"q": "x" * MB}})
    yield "100k keys", _many_keys(duplicate=False)
    yield "100k keys, one duplicate", _many_keys(duplicate=True)
    yield "1 MB of '['", _fill("[")
    yield "nested 500k deep", "[" * (MB // 2) + "]" * (MB // 2)
    yield "fenced garbage", "```json\n" + _fill("{]") + "\n```"
    yield "fences only", _fill("```")
    yield "long final answer", json.dumps({"kind": "final", "answer": "y" * MB})
    yield "escapes", '{"kind": "final", "answer": "' + _fill("\\ud800\\n") + '"}'


def text_cases() -> Iterator[tuple[str, str]]:
    yield "label prefix run", _fill(" -*#>_\t")
    yield "prefix run, no colon", _fill(("-" * 999) + "Action   \n")
    yield "1 MB of Thought lines", _fill("Thought: x\n")
    yield "1 MB of Observation lines", _fill("Observation: x\n")
    yield "long tool name", "Action: " + _fill("a")
    yield "open bracket", "Action: calculate[" + _fill("1")
    yield "bracket of brackets", "Action: calculate[" + _fill("[") + "]"
    yield "1 MB digits as int arg", "Action: get_user_profile[" + _fill("9") + "]"
    yield "long input", 'Action: calculate\nAction Input: {"expression": "' + _fill("1+") + '"}'
    yield "long finish", "Thought: done\nFinish: " + _fill("z")
    yield "newlines", _fill("\n")
    yield "labels without bodies", _fill("Action Input:")


def native_cases() -> Iterator[tuple[str, AIMessage]]:
    yield "1 MB args", AIMessage("", tool_calls=[{"name": "t", "args": {"q": "x" * MB}, "id": "1"}])
    calls = [{"name": f"t{i}", "args": {}, "id": str(i)} for i in range(MB // 60)]
    yield "16k tool calls", AIMessage("", tool_calls=calls)
    yield "1 MB text", AIMessage(_fill("w"))
    broken = {"name": "t", "args": _fill("{"), "id": "1", "error": "bad"}
    yield "1 MB broken call", AIMessage("", invalid_tool_calls=[broken])


def _result(parse: Callable[[], Any]) -> str:
    try:
        check_contract(parse())
    except ActionError as err:
        return err.why
    return "action"


def main() -> None:
    rows: list[tuple[str, str, int, Callable[[], Any]]] = []
    for name, text in json_cases():
        reply = Reply(text=text)
        rows.append((name, "json", len(text), lambda r=reply: PROTOCOLS["json"].candidate(r, {})))
    for name, text in text_cases():
        reply = Reply(text=text)
        rows.append(
            (name, "text", len(text), lambda r=reply: PROTOCOLS["text"].candidate(r, TOOLS))
        )
    for name, message in native_cases():
        size = len(json.dumps([message.content, message.tool_calls, message.invalid_tool_calls]))
        rows.append(
            (name, "tools", size, lambda m=message: PROTOCOLS["tools"].candidate(reply_of(m), {}))
        )
    for name, protocol, size, parse in rows:
        started = time.perf_counter()
        result = _result(parse)
        seconds = time.perf_counter() - started
        row = {"case": name, "protocol": protocol, "bytes": size, "result": result}
        print(json.dumps({**row, "seconds": round(seconds, 4)}), flush=True)


if __name__ == "__main__":
    main()
