"""``langgraph dev`` with the Studio checkpointer on Postgres, across a ``pg_ctl restart``
(issue 45): runs after the restart succeed, and ``threads.delete`` works (it answered 500)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from langgraph_sdk.client import LangGraphClient

from ..support.fleet import private_cluster, restart_cluster
from ..support.openai_server import FakeOpenAI, reply
from ..support.studio_server import dev_server, drive

pytestmark = [pytest.mark.studio, pytest.mark.postgres]


async def _answered(client: LangGraphClient, assistant: str, goal: str) -> str:
    thread = (await client.threads.create())["thread_id"]
    await client.runs.wait(thread, assistant, input={"goal": goal})
    state = await client.threads.get_state(thread)
    assert state["values"]["stop_reason"] == "success", state["values"]
    return str(thread)


def test_the_dev_server_on_postgres_comes_back_after_a_restart(tmp_path: Path) -> None:
    """Before: after the restart every call failed (``the connection is closed``) until the
    dev server itself was restarted."""
    with private_cluster() as (url, folder), FakeOpenAI(default=reply("done")) as model:
        server = dev_server(tmp_path, model)
        server.env["GATED_REACT_DB"] = url
        try:
            server.start()

            async def before(client: LangGraphClient) -> tuple[str, str, str]:
                assistant = (await client.assistants.create(graph_id="refund"))["assistant_id"]
                one = await _answered(client, assistant, "hello")
                return assistant, one, await _answered(client, assistant, "hello, two")

            assistant, deleted, kept = drive(server, before)
            restart_cluster(folder)

            async def after(client: LangGraphClient) -> None:
                await client.threads.delete(deleted)  # first: it answered 500
                with pytest.raises(httpx.HTTPStatusError) as gone:
                    await client.threads.get_state(deleted)
                assert gone.value.response.status_code == 404
                kept_values = (await client.threads.get_state(kept))["values"]
                assert kept_values["messages"][-1]["content"] == "done"
                await _answered(client, assistant, "hello again")

            drive(server, after)
        finally:
            server.cleanup()
