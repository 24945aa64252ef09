"""Graph factories the worker tests start workers with (``tests.support.worker_graphs:refund``).

Each worker process builds its graph once and runs many threads with it, so the model answers
from the prompt (``by_progress``), like a deterministic LLM. Every final decision is logged to
``$GATED_REACT_TEST_DECISIONS`` as ``pid<TAB>goal``, so a test can see which process finished
which run and that none finished twice.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.tools import InjectedToolArg, tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.prebuilt import ToolRuntime
from pydantic import SecretStr

from gated_react import Policy, build_graph
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

from .helpers import REFUND_42
from .scenarios import progress

if TYPE_CHECKING:  # the workers import this module; they need no pytest
    import pytest

LOG_VAR = "GATED_REACT_TEST_DECISIONS"
STALL_VAR = "GATED_REACT_TEST_STALL_ONCE"  # a file: the first worker to take it hangs in decide
HOLD_VAR = "GATED_REACT_TEST_HOLD_ONCE"  # a FIFO: the first worker to take it waits in decide
# until the test writes to it (a try that goes on after its worker stalled)
HANG_IN_PAY_VAR = "GATED_REACT_TEST_HANG_IN_PAY_ONCE"  # a file: the first payment to take it
# pays, then hangs before it returns (its worker killed there leaves the payment's outcome unknown)


def _reply(messages: list[BaseMessage]) -> Any:
    done = progress(messages)
    if done == 1:
        _hang_once(STALL_VAR)  # the test kills this worker there
        _held_once()
    if done >= len(REFUND_42) - 1:
        # this run's goal: the thread's last human message
        goal = next(m.text for m in reversed(messages) if isinstance(m, HumanMessage))
        with open(os.environ[LOG_VAR], "a", encoding="utf-8") as log:
            log.write(f"{os.getpid()}\t{goal}\n")
    return REFUND_42[min(done, len(REFUND_42) - 1)]


def stall_once(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Arm the stall: the first worker to reach step 2 hangs there; the file then vanishes."""
    return _arm(folder / "stall-once", STALL_VAR, monkeypatch)


def hold_once(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Arm the hold: the first worker to reach step 2 waits there until the test writes a line
    to the FIFO (renamed ``<name>.taken-by-<pid>``: ``taken_by``, ``release``)."""
    fifo = folder / "hold-once"
    os.mkfifo(fifo)
    monkeypatch.setenv(HOLD_VAR, str(fifo))
    return fifo


def release(armed: Path) -> None:
    """Let the worker that took the hold go on (it reads the line the FIFO gets)."""
    (taken,) = armed.parent.glob(f"{armed.name}.taken-by-*")
    with taken.open("w") as fifo:
        fifo.write("go\n")


def hang_in_pay_once(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Arm the hang: the first ``pay`` call pays, then hangs; the file is then renamed
    ``<name>.taken-by-<pid>``, the pid of the worker to kill (``taken_by``)."""
    return _arm(folder / "hang-in-pay-once", HANG_IN_PAY_VAR, monkeypatch)


def taken_by(armed: Path) -> int | None:
    """The pid of the process that took an armed hang, once it has."""
    found = list(armed.parent.glob(f"{armed.name}.taken-by-*"))
    return int(found[0].name.rsplit("-", 1)[1]) if found else None


def _arm(file: Path, var: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    file.touch()
    monkeypatch.setenv(var, str(file))
    return file


def _hang_once(var: str) -> None:
    """Hang for ever (until the test kills this process) if this process is the first to take
    the file ``$var`` names."""
    once = os.environ.get(var)
    if not once:
        return
    try:
        os.rename(once, f"{once}.taken-by-{os.getpid()}")  # atomic: exactly one taker
    except FileNotFoundError:
        return
    threading.Event().wait()  # nothing sets it: the process ends only when it is killed


def _held_once() -> None:
    """Wait for the test's line on the FIFO ``$HOLD_VAR`` names, if this process is the first
    to take it (an event, not a sleep: the test writes when the try may go on)."""
    once = os.environ.get(HOLD_VAR)
    if not once:
        return
    taken = f"{once}.taken-by-{os.getpid()}"
    try:
        os.rename(once, taken)  # atomic: exactly one taker
    except FileNotFoundError:
        return
    with open(taken, encoding="utf-8") as fifo:  # opening waits for the writer
        fifo.readline()


def refund(checkpointer: BaseCheckpointSaver[Any], policy: Policy | None = None) -> Any:
    model = ScriptedChatModel(replies=[_reply], cycle=True)
    return build_graph(model, SUPPORT_TOOLS, policy=policy, checkpointer=checkpointer)


def refund_with_approval(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    approve = frozenset({"get_user_billing", "search_policy"})
    return refund(checkpointer, Policy(require_approval=approve))


def refund_asking_for_steps(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    """The refund run under two steps, asking to extend them (``on_budget="ask"``)."""
    return refund(checkpointer, Policy().replace(max_steps=2, on_budget="ask"))


def forgets_the_checkpointer(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    return build_graph(ScriptedChatModel(replies=["x"]), SUPPORT_TOOLS)


MODEL_URL_VAR = "GATED_REACT_TEST_MODEL_URL"  # the scripted OpenAI-compatible server
PAYMENTS_VAR = "GATED_REACT_TEST_PAYMENTS"  # a file: one line per payment made


@tool
def look_up_order(order: int) -> str:
    """The amount due on an order."""
    return f"order {order}: USD {order % 90 + 10}.00 due"


@tool
def pay(order: int, amount: str, idempotency_key: Annotated[str, InjectedToolArg] = "") -> str:
    """Pay an order (not idempotent: every call pays)."""
    with open(os.environ[PAYMENTS_VAR], "a", encoding="utf-8") as log:
        log.write(f"{order}\t{amount}\t{idempotency_key}\n")
    _hang_once(HANG_IN_PAY_VAR)  # paid: killed here, the run's record cannot say so
    return f"paid {amount} for order {order}"


def order_of(goal: str) -> int:
    """The order number in a goal such as "Pay order 7"."""
    return int(goal.rsplit(" ", 1)[1])


def pay_reply(request: dict[str, Any]) -> Any:
    """What the scripted server answers a pay run: look up, pay, answer, from the tool results
    already in the request (like a deterministic model, any worker continues the script)."""
    from .openai_server import Status, reply, tool_call

    messages = request.get("messages")
    if not messages:  # the body of a request cut short (its worker was killed mid-send)
        return Status(400, "no messages")
    done = sum(1 for message in messages if message["role"] == "tool")
    order = order_of(
        next(str(m["content"]) for m in messages if m["role"] == "user").split("\n")[0]
    )
    if done == 0:
        return tool_call("look_up_order", order=order)
    if done == 1:
        return tool_call("pay", order=order, amount=f"USD {order % 90 + 10}.00")
    return reply(f"order {order} is paid")


def pays(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    """Runs that look an order up and pay it, the model a real ChatOpenAI on a local server."""
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(
        base_url=os.environ[MODEL_URL_VAR], api_key=SecretStr("test"), model="scripted", timeout=60
    )
    return build_graph(model, [look_up_order, pay], checkpointer=checkpointer)


def refund_asking_once(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    """The refund run that waits for a human once, before it reads the billing."""
    return refund(checkpointer, Policy(require_approval=frozenset({"get_user_billing"})))


def _whose(runtime: ToolRuntime) -> str:  # type: ignore[type-arg]
    """Whose run this is, from the run's context."""
    return f"the run of {runtime.context['user_id']}"


def reads_its_context(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    """A run whose one tool reads the run's LangGraph context (``enqueue_run(context=)``),
    after a human approves it (so the context must come with the resume too)."""
    model = ScriptedChatModel(replies=[call("_whose"), "done"], cycle=True)
    approve = Policy(require_approval=frozenset({"_whose"}))
    return build_graph(model, [_whose], policy=approve, checkpointer=checkpointer)


def pays_after_approval(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    """``pays`` with each payment asked of a human, on a model the price table knows
    (``gpt-4.1-mini``, as the scripted server is told), and no retry, by the client or the
    graph: a model server's error ends the run at once."""
    return _pays_asking(checkpointer, "pay")


def pays_after_an_approved_look_up(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    """``pays_after_approval``, but the human approves the look-up, and the payment that
    follows it (in the same job) runs without a question."""
    return _pays_asking(checkpointer, "look_up_order")


def _pays_asking(checkpointer: BaseCheckpointSaver[Any], asked: str) -> Any:
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(
        base_url=os.environ[MODEL_URL_VAR],
        api_key=SecretStr("test"),
        model="gpt-4.1-mini",
        timeout=60,
        max_retries=0,
    )
    policy = Policy(require_approval=frozenset({asked}), model_retries=0)
    return build_graph(model, [look_up_order, pay], policy=policy, checkpointer=checkpointer)


def raises(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    """A factory that cannot build its graph (a setting it needs is missing)."""
    raise RuntimeError("OPENAI_API_KEY is not set\nsee the deployment guide")
