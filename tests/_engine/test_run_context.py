"""A run records what it ran under, once, at its first decision: the model's class and name,
the base URL masked, the protocol, the policy with a hash to compare runs by, the version."""

from __future__ import annotations

from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from gated_react import Budget, Policy, build_graph
from gated_react._engine.authority.ledger import ledger_for
from gated_react._engine.authority.records import Kind
from gated_react._engine.model.pricing import pricer_for
from gated_react._engine.run_context import policy_fields, run_context
from gated_react.state import dump
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS


def test_the_context_names_model_url_protocol_policy_and_version() -> None:
    model = ChatOpenAI(
        model="gpt-4.1-mini",
        base_url="http://user:hunter2secret@127.0.0.1:9/v1",
        api_key="sk-test-123456789",
    )
    policy = Policy().replace(max_seconds=60, protocol="json", allow={"b", "a"})
    context = run_context(model, policy, pricer_for(model, policy.prices))
    assert context.model_class == "langchain_openai.chat_models.base.ChatOpenAI"
    assert context.model == "gpt-4.1-mini"
    assert context.base_url == "http://user:***@127.0.0.1:9/v1"
    assert context.protocol == "json"
    assert context.policy["budget"]["max_seconds"] == 60
    assert context.policy["allow"] == ["a", "b"]
    assert context.priced_by is not None
    assert context.priced_by.startswith("genai-prices")
    assert context.version
    assert "hunter2secret" not in context.model_dump_json()


def test_equal_policies_hash_alike_and_a_change_changes_the_hash() -> None:
    model = ScriptedChatModel(replies=[])

    def hashed(policy: Policy) -> str:
        return run_context(model, policy, pricer_for(model, {})).policy_hash

    one = Policy(allow=frozenset({"x", "y", "z"}))
    assert hashed(one) == hashed(Policy(allow=frozenset({"z", "y", "x"})))
    assert hashed(one) != hashed(one.replace(max_steps=9))
    assert len(hashed(one)) == 12
    assert policy_fields(Policy())["answer_schema"] is None


def test_a_policy_that_leaves_a_newer_field_at_its_default_hashes_as_before_it() -> None:
    """A thread paused before ``on_tool_limit`` and the thread budgets existed holds permits
    under the hash below
    (``Policy()`` at 9ee73c3): a release that changed it would ask its humans again. A new
    ``Policy`` field fails this until it is listed in ``run_context._ADDED``."""
    model = ScriptedChatModel(replies=[])
    context = run_context(model, Policy(), pricer_for(model, {}))
    assert context.policy_hash == "da6377001f2a"
    assert "on_tool_limit" not in context.policy
    assert not {"thread_max_steps", "thread_tool_limits"} & set(context.policy["budget"])
    observing = run_context(model, Policy(on_tool_limit="observe"), pricer_for(model, {}))
    assert observing.policy["on_tool_limit"] == "observe"
    assert observing.policy_hash != context.policy_hash


def test_a_limit_of_infinity_is_recorded_as_text_that_reads_back_as_the_limit() -> None:
    policy = Policy(budget=Budget(max_seconds=float("inf")), tool_timeout_seconds=float("inf"))
    policy = policy.replace(tool_timeouts={"search_policy": float("inf")})
    model = ScriptedChatModel(replies=[])
    context = run_context(model, policy, pricer_for(model, {}))
    stored = dump(context)  # what a checkpoint holds: null for a number JSON cannot hold
    assert stored is not None
    recorded = stored["policy"]
    assert recorded["budget"]["max_seconds"] == "inf"
    assert recorded["tool_timeouts"] == {"search_policy": "inf"}
    assert Budget.model_validate(recorded["budget"]) == policy.budget
    assert Policy.model_validate({**recorded, "answer_schema": None}) == policy
    assert context.policy_hash == run_context(model, policy, pricer_for(model, {})).policy_hash


def test_each_run_on_a_thread_records_its_context_once() -> None:
    """In the run's record (``opened``), beside the checkpoints: never a channel."""
    saver = InMemorySaver()
    replies = [call("get_user_profile", user_id=42), "done", "again"]
    policy = Policy().replace(max_seconds=60)
    model = ScriptedChatModel(replies=replies)
    graph = build_graph(model, SUPPORT_TOOLS, policy=policy, checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    updates = list(graph.stream({"goal": "who is 42?"}, config, stream_mode="updates"))
    decisions = [u["decide"] for u in updates if "decide" in u]
    assert len(decisions) == 2
    ledger = ledger_for(saver)
    first_run = ledger.backend.last_run("t")
    assert first_run is not None
    opened = [r for r in ledger.book("t", first_run).records if r.kind is Kind.OPENED]
    assert len(opened) == 1  # two decisions, one record
    assert opened[0].body["policy"]["budget"]["max_seconds"] == 60
    assert opened[0].body == run_context(model, policy, pricer_for(model, {})).model_dump(
        mode="json"
    )
    graph.invoke({"goal": "and again?"}, config)
    second_run = ledger.backend.last_run("t")
    assert second_run not in (None, first_run)
    again = ledger.book("t", second_run).tally.opened  # type: ignore[arg-type]
    assert again is not None
    assert again.body["model"] == "scripted"
