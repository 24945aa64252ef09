"""The compiled graph is a LangChain Runnable: invoke, ainvoke, batch, stream, astream_events.
invoke returns the conversation and how the run ended; result_of adds the answer, trace,
history and usage the run's record holds.

Runs offline with a scripted model; use ChatOpenAI(model=..., temperature=0) for a real one.
"""

import asyncio

from gated_react import build_graph, result_of
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

GOAL = "User 42 asked: can I get a refund now? Answer with the USD amount."
REPLIES = [
    call("get_user_profile", user_id=42),
    call("get_user_billing", user_id=42),
    call("search_policy", query="refund pro monthly"),
    "Yes: USD 49.00, within the 14-day window.",
]


def agent():
    # A scripted model plays its script once, so each run below gets a fresh graph.
    return build_graph(ScriptedChatModel(replies=REPLIES), SUPPORT_TOOLS)


graph = agent()
out = graph.invoke({"goal": GOAL})  # the conversation and how the run ended
print("invoke:", out["status"], out["stop_reason"], out["messages"][-1].text)
result = result_of(graph, out)  # with the run's answer, trace, history and usage
print("calls:", [entry["tool"] for entry in result["trace"]], "steps:", result["usage"]["steps"])

for update in agent().stream({"goal": GOAL}, stream_mode="updates"):
    node, change = next(iter(update.items()))
    print("stream:", node, sorted(change or {}))


async def main():
    out = await agent().ainvoke({"goal": GOAL})
    print("ainvoke:", out["stop_reason"])
    async for event in agent().astream_events({"goal": GOAL}, version="v2"):
        if event["event"] == "on_tool_end":
            print("tool finished:", event["name"])


asyncio.run(main())
