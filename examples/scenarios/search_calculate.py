"""003 search and calculate, scripted: search then calculate, format reminders, and a slow
service's timeout observed, stopping the run, or repeated (a loop).

The example itself (goal, policy with its timeouts table, the search, calculator and
live_weather tools) is ``gated_react.examples.search_calculate``.
"""

from __future__ import annotations

from functools import partial

from gated_react.examples.search_calculate import EXAMPLE, TIMEOUTS, tools
from scenarios.spec import Expect, Scenario, Seed, script

DEMO_TIMEOUT = 0.3

# In the timeout scenarios the service hangs 3 s and its timeout is cut to 0.3 s, so a demo
# shows the timeout without waiting the real 15 s.
demo_tools = partial(tools, service_delay=3.0)

LOOKUP = (
    "Thought: I need today's forecast for Beijing.\nAction: search[Beijing weather today]",
    "Thought: The forecast high is 31 °C. Now the sum.\nAction: calculate[31 + 100]",
    "Thought: I have both numbers.\nFinish: Beijing's forecast high today is 31 °C; "
    "31 + 100 = 131.",
)
MALFORMED = "Beijing is usually warm in summer, so probably about 30 degrees; plus 100 is 130."
LIVE_FIRST = "Thought: A live reading is best.\nAction: live_weather[Beijing]"
ANSWER = ("31 °C", "131")

SCENARIOS = (
    Scenario(
        name="beijing-plus-100",
        shows="search, then the AST calculator, then Finish",
        script=script(*LOOKUP),
        expect=Expect("success", ("search", "calculate"), answer_has=ANSWER, grounded=True),
    ),
    Scenario(
        name="format-retry",
        shows="a reply without an Action line gets a format reminder; the next one is fine",
        script=script(MALFORMED, *LOOKUP),
        expect=Expect("success", ("search", "calculate"), answer_has=ANSWER, grounded=True),
    ),
    Scenario(
        name="format-gives-up",
        shows="after max_invalid_retries reminders in a row the run stops",
        script=script(MALFORMED, MALFORMED, MALFORMED),
        expect=Expect("invalid_action:no_action"),
    ),
    Scenario(
        name="timeout-continue",
        shows="live_weather times out; on_tool_error=observe: the model falls back to search",
        changes={"tool_timeouts": {**TIMEOUTS, "live_weather": DEMO_TIMEOUT}},
        tools=demo_tools,
        script=script(LIVE_FIRST, *LOOKUP),
        expect=Expect(
            "success",
            ("live_weather", "search", "calculate"),
            errors=("tool_timeout:live_weather",),
            answer_has=ANSWER,
            grounded=True,
        ),
    ),
    Scenario(
        name="timeout-stop",
        shows="the same timeout with on_tool_error=stop (the default) ends the run",
        changes={
            "tool_timeouts": {**TIMEOUTS, "live_weather": DEMO_TIMEOUT},
            "on_tool_error": "stop",
        },
        tools=demo_tools,
        script=script(LIVE_FIRST, *LOOKUP),
        expect=Expect("tool_timeout:live_weather", ("live_weather",)),
    ),
    Scenario(
        name="timeout-no-retry",
        shows="calling the timed-out tool again with the same city is a loop: the run stops",
        changes={"tool_timeouts": {**TIMEOUTS, "live_weather": DEMO_TIMEOUT}},
        tools=demo_tools,
        script=script(LIVE_FIRST, LIVE_FIRST),
        expect=Expect(
            "loop_detected",
            ("live_weather", "live_weather"),
            errors=("tool_timeout:live_weather",),
        ),
    ),
)

SEED = Seed(EXAMPLE, SCENARIOS)
