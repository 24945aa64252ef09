"""003 search and calculate: ReAct text with a format retry, per-tool timeouts, a slow tool.

A reply without an ``Action:`` or ``Finish:`` line gets a format reminder and another try (each
try is a step). The timeouts follow the tool's kind: local arithmetic 5 s, a local index 10 s,
an external service 15 s. ``live_weather`` stands for an external service that hangs: when it
times out, the policy decides whether the model sees the timeout and carries on (``observe``)
or the run stops (``stop``, the library default); calling it again is a loop.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field

from gated_react.examples.spec import Example, package_files
from gated_react.policy import Budget, Policy
from gated_react.tools.calculator import calculate
from gated_react.tools.search import SearchCorpus, parse_corpus

CORPUS = "search_corpus.json"
GOAL = (
    "What is the highest temperature forecast for Beijing today, and what is that number "
    "plus 100? Look the forecast up, compute the sum with the calculator, then answer."
)
# Seconds per tool, by kind: local arithmetic, a local index, an external service.
TIMEOUTS = {"calculate": 5.0, "search": 10.0, "live_weather": 15.0}
SLOW_SERVICE_SECONDS = 20.0


class CityArgs(BaseModel):
    city: str = Field(min_length=1, max_length=80, description="A city name, e.g. 'Beijing'")


class LiveWeather(BaseTool):
    """A stand-in for an external weather service that takes ``delay`` seconds to answer."""

    name: str = "live_weather"
    description: str = "Current reading from the external live weather service (can be slow)."
    args_schema: type[BaseModel] = CityArgs
    metadata: dict[str, Any] | None = {"idempotent": True}  # noqa: RUF012 (pydantic field)
    delay: float = SLOW_SERVICE_SECONDS

    def _run(self, city: str, **_: Any) -> dict[str, Any]:
        time.sleep(self.delay)
        return {"city": city, "reading": "service answered too late to matter"}


def tools(_workdir: Path, *, service_delay: float = SLOW_SERVICE_SECONDS) -> list[BaseTool]:
    """search over the shipped corpus, the calculator, and the slow live_weather service."""
    documents = parse_corpus((package_files() / CORPUS).read_text(encoding="utf-8"), CORPUS)
    return [SearchCorpus(documents=documents), calculate, LiveWeather(delay=service_delay)]


EXAMPLE = Example(
    name="003-search",
    title="Search and calculate",
    shows="ReAct text with format retries, a local search tool, an AST calculator, timeouts",
    goal=GOAL,
    base_policy=Policy(
        protocol="text",
        on_invalid_action="retry",
        max_invalid_retries=2,
        on_tool_error="observe",
        tool_timeouts=TIMEOUTS,
        budget=Budget(max_steps=8, max_tool_calls=6, max_seconds=60),
    ),
    make_tools=tools,
)
