"""Drive the dev server the way Studio does, with langgraph-sdk: an assistant whose context
puts billing lookups under human approval, a thread, a streamed run, the pending question, the
approval as a resume command, and the thread's final state: how the run ended, and its
answer, the conversation's last AI message.

    make studio                                   # in one terminal (needs a model: OPENAI_*)
    .venv/bin/python examples/api/studio_client.py http://127.0.0.1:PORT
"""

import asyncio
import sys

from langgraph_sdk import get_client

URL = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:2024"
GOAL = "User 42 asked: can I get a refund now? Check profile, billing and policy."


async def main():
    client = get_client(url=URL)
    assistant = await client.assistants.create(
        graph_id="refund",
        context={"require_approval": ["get_user_billing"], "max_steps": 6},
        name="refund, billing needs approval",
    )
    thread = await client.threads.create()
    tid, aid = thread["thread_id"], assistant["assistant_id"]

    async for part in client.runs.stream(tid, aid, input={"goal": GOAL}, stream_mode="updates"):
        if part.event == "updates":
            print("node:", *part.data)

    state = await client.threads.get_state(tid)
    waiting = state["interrupts"][0]
    question = waiting["value"]
    print("waiting at", state["next"], "for:", question["tool"], question["args"])

    # answered by the interrupt's id: sent again, it is never taken for a later question
    answer = {waiting["id"]: {"approved": True}}
    await client.runs.wait(tid, aid, command={"resume": answer})
    final = (await client.threads.get_state(tid))["values"]
    print("stop_reason:", final["stop_reason"])
    answer = [m for m in final["messages"] if m["type"] == "ai"][-1]  # as a chat UI shows it
    print("answer:", answer["content"])
    history = await client.threads.get_history(tid, limit=100)
    print("checkpoints:", len(history))


asyncio.run(main())
