"""Runs under a real ``langgraph dev`` are traced: the Studio graphs install the SDK from the
OTEL_* variables the server was started with, and each run the server makes is one
``invoke_agent`` span with its children, exported to a real Arize Phoenix."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph_sdk.client import LangGraphClient

from ..support.helpers import REFUND_GOAL
from ..support.openai_server import FakeOpenAI, reply, tool_call
from ..support.phoenix import Phoenix
from ..support.studio_server import DevServer, dev_server, drive

pytestmark = [pytest.mark.studio, pytest.mark.phoenix]


@pytest.fixture
def traced_dev(phoenix: Phoenix, tmp_path: Path) -> Iterator[tuple[DevServer, FakeOpenAI]]:
    with FakeOpenAI() as model:
        server = dev_server(tmp_path, model)
        server.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = phoenix.url
        server.env["OTEL_SERVICE_NAME"] = "gated-react-studio"
        try:
            server.start()
            yield server, model
        finally:
            server.cleanup()


def test_a_studio_run_is_one_invocation_span_with_its_children(
    traced_dev: tuple[DevServer, FakeOpenAI], phoenix: Phoenix
) -> None:
    dev, model = traced_dev
    model.push(tool_call("get_user_profile", user_id=42), reply("Anna is on the pro plan."))

    async def scenario(client: LangGraphClient) -> str:
        thread = (await client.threads.create())["thread_id"]
        done = await client.runs.wait(thread, "refund", input={"goal": REFUND_GOAL})
        assert isinstance(done, dict)
        assert done["stop_reason"] == "success"
        return str(thread)

    thread = drive(dev, scenario)
    spans = phoenix.conversation(thread, 5)  # the batch processor exports within 5 s
    names = sorted(str(s["name"]) for s in spans)
    assert names == sorted(
        [
            "invoke_agent gated-react",
            "chat gpt-4.1-mini",
            "apply_guardrail gate",
            "execute_tool get_user_profile",
            "chat gpt-4.1-mini",
        ]
    ), dev.tail()
    (root,) = [s for s in spans if s["parent_id"] is None]
    assert root["attributes"]["gated_react.stop_reason"] == "success"
