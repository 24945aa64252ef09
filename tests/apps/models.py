"""The model each program talks to: the local chat-completions server answering from the
request, as a model would, so both constructors get the same answers to the same conversation.

A reply depends on what the request shows: the user's last question, the tool results since
it, the tools offered. Where the two constructors ask for a structured answer differently
(``create_agent``'s ``ToolStrategy`` offers a tool named after the schema; gated-react asks for
the JSON as text), the same data comes back in the form asked for: that is the model's
protocol, not what the user sees.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from ..support.openai_server import Reply, reply, tool_call

Request = dict[str, Any]
Responder = Callable[[Request], Reply]


def text(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content if isinstance(block, dict))


def since_user(request: Request) -> list[dict[str, Any]]:
    """The messages after the last user message (this turn's calls and results)."""
    messages = request["messages"]
    users = [i for i, message in enumerate(messages) if message["role"] == "user"]
    return messages[users[-1] + 1 :] if users else []


def last_user(request: Request) -> str:
    users = [message for message in request["messages"] if message["role"] == "user"]
    return text(users[-1]) if users else ""


def results(request: Request) -> list[str]:
    """This turn's tool results, in order."""
    return [text(message) for message in since_user(request) if message["role"] == "tool"]


def offered(request: Request) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools") or []}


def said(request: Request) -> str:
    """Everything the user said in this request, lower-cased."""
    return " ".join(text(m) for m in request["messages"] if m["role"] == "user").lower()


def structured(request: Request, schema: str, data: dict[str, Any]) -> Reply:
    """``data`` as the tool call ``ToolStrategy`` offers, else as the JSON text asked for."""
    if schema in offered(request):
        return tool_call(schema, **data)
    return reply(json.dumps(data))


def quickstart(request: Request) -> Reply:
    if last_user(request) == "thank you!":
        return structured(
            request,
            "ResponseFormat",
            {"punny_response": "You're 'thund-erfully' welcome!", "weather_conditions": None},
        )
    done = results(request)
    if not done:
        return tool_call("get_user_location")
    if len(done) == 1:
        return tool_call("get_weather_for_location", city=done[0])
    answer = {
        "punny_response": f"{done[0]} is having a 'sun-derful' day!",
        "weather_conditions": done[1],
    }
    return structured(request, "ResponseFormat", answer)


SQL_QUERY = (
    "SELECT Genre.Name, AVG(Track.Milliseconds) AS AverageLength FROM Track "
    "INNER JOIN Genre ON Track.GenreId = Genre.GenreId GROUP BY Genre.Name "
    "ORDER BY AverageLength DESC LIMIT 5;"
)


def sql_agent(request: Request) -> Reply:
    if not request.get("tools") and "Double check the sqlite query" in last_user(request):
        return reply(SQL_QUERY)  # sql_db_query_checker's own call to the model
    done = results(request)
    steps = [
        tool_call("sql_db_list_tables"),
        tool_call("sql_db_schema", table_names="Track, Genre"),
        tool_call("sql_db_query_checker", query=SQL_QUERY),
        tool_call("sql_db_query", query=SQL_QUERY),
    ]
    if len(done) < len(steps):
        return steps[len(done)]
    top = re.findall(r"\('([^']+)'", done[-1])
    return reply(f'On average, the genre with the longest tracks is "{top[0]}".')


def rag_agent(request: Request) -> Reply:
    done = results(request)
    if not done:
        return tool_call("retrieve_context", query="standard method for Task Decomposition")
    if len(done) == 1:
        return tool_call("retrieve_context", query="common extensions of Task Decomposition")
    return reply(
        "The standard method for Task Decomposition is Chain of Thought (CoT); "
        "Tree of Thoughts extends it."
    )


def long_term_memory(request: Request) -> Reply:
    done = results(request)
    if last_user(request) == "look up user information":
        if not done:
            return tool_call("get_user_info")
        return reply(f"User information: {done[0]}")
    if not done:
        return tool_call("save_user_info", user_info={"name": "John Smith"})
    return reply("I saved your name, John Smith.")


def guardrails(request: Request) -> Reply:
    seen = last_user(request)
    return reply(f"Thanks, I have your details on file: {seen.removeprefix('My ')}")


CITY = re.compile(r"weather in ([A-Z][A-Za-z ]+?)[?.]")


def stream_modes(request: Request) -> Reply:
    done = results(request)
    question = last_user(request)
    city = CITY.search(question)
    if not done and city:
        return tool_call("get_weather", city=city.group(1))
    answer = done[-1] if done else "I can only tell the weather."
    if "Best regards" in question:
        answer += " Best regards"
    return reply(answer)


def summarizing_chat(request: Request) -> Reply:
    """A chat model that knows only what it is shown: the name, if a message it sees says it
    (the summarizing chat's, and the trimmed one's after its trims and deletions)."""
    question = last_user(request).lower()
    if "what's my name" in question:
        name = re.search(r"(?:my name is|i'm) (\w+)", said(request))
        return reply(f"Your name is {name.group(1).title()}." if name else "I don't know.")
    if "cats" in question:
        return reply("Soft paws at dawn,\na purr against the window.")
    if "dogs" in question:
        return reply("Wet nose at the door,\na tail that wags the whole room.")
    return reply("Hi Bob! Nice to meet you.")


def tool_errors(request: Request) -> Reply:
    done = results(request)
    if not done:  # the model's first call names the argument wrongly: the tool raises
        return tool_call("get_weather", city="San Francisco")
    if len(done) == 1:
        return tool_call("get_weather", location="San Francisco")
    return reply(f"{done[-1]}.")


def structured_output(request: Request) -> Reply:
    found = re.search(r"from: ([^,]+), ([^,]+), (.+)$", last_user(request))
    assert found, last_user(request)
    name, email, phone = found.groups()
    return structured(request, "ContactInfo", {"name": name, "email": email, "phone": phone})


def custom_state(request: Request) -> Reply:
    done = results(request)
    if not done:
        return tool_call("get_user_info")
    return reply(f"Hello! {done[0]}, welcome back.")


RESPONDERS: dict[str, Responder] = {
    "quickstart": quickstart,
    "sql_agent": sql_agent,
    "sql_agent_review": sql_agent,
    "rag_agent": rag_agent,
    "long_term_memory": long_term_memory,
    "guardrails": guardrails,
    "stream_modes": stream_modes,
    "summarizing_chat": summarizing_chat,
    "tool_errors": tool_errors,
    "structured_output": structured_output,
    "custom_state": custom_state,
    "trimmed_memory": summarizing_chat,
}
