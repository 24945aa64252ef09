"""Graph factories the worker tests start workers with (``tests.support.worker_graphs:refund``).

Each worker process builds its graph once and runs many threads with it, so the model answers
from the prompt (``by_progress``), like a deterministic LLM. Every final decision is logged to
``$GATED_REACT_TEST_DECISIONS`` as ``pid<TAB>goal``, so a test can see which process finished
which run and that none finished twice.
"""

from __future__ import annotations

import os
import time
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.base import BaseCheckpointSaver

from gated_react import Policy, build_graph
from gated_react.testing import ScriptedChatModel
from gated_react.tools.support import SUPPORT_TOOLS

from .helpers import REFUND_42
from .scenarios import progress

LOG_VAR = "GATED_REACT_TEST_DECISIONS"
STALL_VAR = "GATED_REACT_TEST_STALL_ONCE"  # a file: the first worker to take it hangs in decide


def _reply(messages: list[BaseMessage]) -> Any:
    done = progress(messages)
    if done == 1:
        _maybe_stall()
    if done >= len(REFUND_42) - 1:
        goal = str(messages[1].content).split("\n\n", 1)[0]  # the goal's turn
        with open(os.environ[LOG_VAR], "a", encoding="utf-8") as log:
            log.write(f"{os.getpid()}\t{goal}\n")
    return REFUND_42[min(done, len(REFUND_42) - 1)]


def _maybe_stall() -> None:
    once = os.environ.get(STALL_VAR)
    if not once:
        return
    try:
        os.rename(once, f"{once}.taken-by-{os.getpid()}")  # atomic: exactly one taker
    except FileNotFoundError:
        return
    while True:  # hangs inside decide until the test kills this worker
        time.sleep(1)


def refund(checkpointer: BaseCheckpointSaver[Any], policy: Policy | None = None) -> Any:
    model = ScriptedChatModel(replies=[_reply], cycle=True)
    return build_graph(model, SUPPORT_TOOLS, policy=policy, checkpointer=checkpointer)


def refund_with_approval(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    approve = frozenset({"get_user_billing", "search_policy"})
    return refund(checkpointer, Policy(require_approval=approve))


def forgets_the_checkpointer(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    return build_graph(ScriptedChatModel(replies=["x"]), SUPPORT_TOOLS)
