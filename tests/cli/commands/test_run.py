"""``gated-react run`` in this process: the live view, --json, exit codes, one-line errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, get_args

import pytest
import typer.main

from gated_react.cli.app import app
from gated_react.cli.flags import OnBudgetChoice
from gated_react.cli.run_options import RunOptions
from gated_react.policy import Budget, Policy

from ...support.cli import REFUND, invoke
from ...support.docs import page
from ...support.openai_server import FakeOpenAI, Status, reply, tool_call

GOAL = "User 42 asked: can I get a refund now?"


def test_a_run_shows_every_node_then_a_summary(server: FakeOpenAI, state_dir: Path) -> None:
    server.push(*REFUND)
    out = invoke("run", GOAL)
    assert out.exit_code == 0, out.stderr
    lines = out.stdout.splitlines()
    nodes = [line.split()[1] for line in lines if line[:3].strip().isdigit()]
    assert nodes == ["decide", "validate", "gate", "execute", "observe"] * 3 + [
        "decide",
        "validate",
        "finish",
    ]
    assert any("allowed" in line and "get_user_billing" in line for line in lines)
    assert any("steps 3/8 · tools 3/6" in line for line in lines)
    summary = "\n".join(lines[-11:])
    for text in ("status       ok", "stop reason  success", "USD 49.00", "tool calls   3/6"):
        assert text in summary
    assert out.stderr == ""
    assert (state_dir / "runs.sqlite").is_file()
    padded = [line for line in lines if line.endswith(" ")]
    assert padded == []  # piped: rich padded every table line with spaces before


def test_a_question_in_a_memory_store_says_it_cannot_be_resumed(server: FakeOpenAI) -> None:
    """The resume commands it printed before could never work: the store ends with the run."""
    server.push(tool_call("get_user_billing", user_id=42))
    out = invoke("run", GOAL, "--db", "memory", "--approve-tool", "get_user_billing")
    assert out.exit_code == 4, out.stderr
    assert "the store is memory" in out.stdout
    assert "cannot be resumed" in out.stdout
    assert "gated-react resume" not in out.stdout


def test_json_prints_exactly_the_result_object(server: FakeOpenAI) -> None:
    server.push(*REFUND)
    out = invoke("run", GOAL, "--json", "--thread", "t-json")
    assert out.exit_code == 0
    result = json.loads(out.stdout)  # the whole of stdout is one JSON document
    for key in ("status", "stop_reason", "answer", "trace", "history", "thread_id"):
        assert key in result
    assert result["thread_id"] == "t-json"
    assert result["stop_reason"] == "success"
    assert [h["action"]["name"] for h in result["history"]] == [
        "get_user_profile",
        "get_user_billing",
        "search_policy",
    ]
    assert [t["ok"] for t in result["trace"]] == [True, True, True]
    assert out.stderr == ""


@pytest.mark.parametrize(
    ("flags", "script", "reason", "code"),
    [
        (["--max-tool-calls", "1"], REFUND, "max_tool_calls", 2),
        (["--allow", "get_user_profile"], REFUND, "tool_denied:get_user_billing", 2),
        ([], [tool_call("refund_now", user_id=42)], "tool_missing:refund_now", 2),
        ([], [Status(500)], "llm_error:server_error", 3),
        (["--toolkit", "calculator"], [tool_call("calculate", expression="1/0")], None, 3),
    ],
)
def test_exit_codes_follow_the_stop_reason(
    server: FakeOpenAI, flags: list[str], script: list[object], reason: str | None, code: int
) -> None:
    server.push(*script)
    out = invoke("run", GOAL, "--json", *flags)
    result = json.loads(out.stdout)
    assert out.exit_code == code, result
    assert result["status"] == "stopped"
    if reason:
        assert result["stop_reason"] == reason
    assert result["message"]


def _one_line_error(out: object, *needles: str) -> str:
    err: str = out.stderr  # type: ignore[attr-defined]
    assert out.exit_code == 1, (out.stdout, err)  # type: ignore[attr-defined]
    assert out.stdout == ""  # type: ignore[attr-defined]
    assert err.startswith("gated-react: error: ")
    assert err.count("\n") == 1
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err
    return err


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["run", GOAL, "--toolkit", "nope"], ["unknown toolkit 'nope'", "support"]),
        (["run", GOAL, "--allow", "refund"], ["--allow", "refund", "get_user_profile"]),
        (["run", GOAL, "--approve-tool", "refund"], ["--approve-tool", "refund"]),
        (["run", GOAL, "--toolkit", "sql"], ["database"]),
        (["run", GOAL, "--toolkit", "workspace", "--workspace", "/nonexistent/x"], ["x"]),
        (["run", GOAL, "--db", "ftp://host/runs"], ["unknown scheme 'ftp'"]),
        (["run", GOAL, "--db", "sqlite:///"], ["no file path"]),
        (["run", "   "], ["goal is empty"]),
        # a thread id no listing can show as it is (before: 20,000 characters were taken)
        (["run", GOAL, "--thread", "t" * 257], ["at most 256 characters; this one has 257"]),
        (["run", GOAL, "--thread", "a\x07b"], ["cannot be shown (U+0007)"]),
        (["run", GOAL, "--thread", "a\udcffb"], ["not UTF-8 text (0xFF)"]),
        (["run", GOAL, "--thread", " "], ["the thread id is empty"]),
        (["run", GOAL, "--thread", " lead"], ["begins or ends with a space"]),  # shown trimmed
        (["run", GOAL, "--thread=-x"], ["begins with '-'"]),  # `show -x` took it for an option
        (["run", GOAL, "--thread", "trail\u00a0"], ["begins or ends with a space"]),
        (["run", GOAL, "--max-steps", "0"], ["--max-steps", "--help"]),
        (["run", GOAL, "--protocol", "xml"], ["--protocol"]),
        (["run"], ["GOAL"]),
        (["run", GOAL, "--no-such-flag"], ["--no-such-flag"]),
        (["resume", "nope"], ["no run is stored under thread 'nope'"]),
        (["show", "nope"], ["no run is stored under thread 'nope'"]),
        (["resume", "nope", "--args", "{bad"], ["--args is not valid JSON"]),
        (["resume", "nope", "--args", "[1]"], ["--args must be a JSON object"]),
        (["resume", "nope", "--approve", "--reject", "no"], ["only one of"]),
        (
            ["resume", "nope", "--respond", "x", "--answer", "{}"],
            ["only one of --respond, --answer"],
        ),
        (["resume", "nope", "--answer", "[1]"], ["--answer must be a JSON object"]),
        (["graph", "--format", "svg"], ["--format"]),
    ],
)
def test_user_errors_are_one_line(server: FakeOpenAI, args: list[str], needles: list[str]) -> None:
    _one_line_error(invoke(*args), *needles)
    assert server.requests == []  # nothing reached the model


def test_unreachable_postgres_is_one_line_without_the_password(server: FakeOpenAI) -> None:
    out = invoke("run", GOAL, "--db", "postgresql://app:hunter22@127.0.0.1:1/runs")
    err = _one_line_error(out, "127.0.0.1:1")
    assert "hunter22" not in err


def test_no_model_configured_and_no_local_model(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gated_react.hosting import local

    def missing() -> Path:
        raise local.LocalModelUnavailable(local.INSTALL_HINT)

    monkeypatch.setattr(local, "default_model_file", missing)
    _one_line_error(
        invoke("run", GOAL), "local model is not installed", "make local", "OPENAI_API_KEY"
    )
    assert not (state_dir / "runs.sqlite").exists()  # nothing was created


def test_a_missing_model_file_is_one_line(state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gated_react.hosting import local

    # Any existing file stands in for llama-server, so the model file is what is checked
    # whether or not the local extra is installed (`make test` may run before `make local`).
    monkeypatch.setattr(local, "binary_path", lambda: Path(sys.executable))
    out = invoke("run", GOAL, "--model-file", str(state_dir / "nope.gguf"))
    _one_line_error(out, "nope.gguf")
    assert not (state_dir / "runs.sqlite").exists()


def test_a_bad_setting_is_one_line(server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_TIMEOUT_SECONDS", "soon")
    _one_line_error(invoke("run", GOAL), "OPENAI_TIMEOUT_SECONDS")


def test_a_taken_thread_is_refused(server: FakeOpenAI) -> None:
    server.push(reply("first"))
    assert invoke("run", GOAL, "--thread", "taken", "--json").exit_code == 0
    _one_line_error(invoke("run", "again", "--thread", "taken"), "'taken' already holds a run")
    assert len(server.requests) == 1


def test_flags_override_settings(server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")  # nothing listens there
    monkeypatch.setenv("OPENAI_MODEL", "from-env")
    server.push(reply("hi"))
    out = invoke("run", GOAL, "--json", "--base-url", server.base_url, "--model", "from-flag")
    assert out.exit_code == 0
    assert server.requests[0]["model"] == "from-flag"


def test_db_flag_and_env_choose_the_store(
    server: FakeOpenAI, state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.push(reply("one"), reply("two"))
    flag_db = tmp_path / "flag.sqlite"
    env_db = tmp_path / "env.sqlite"
    monkeypatch.setenv("GATED_REACT_DB", str(env_db))
    assert invoke("run", GOAL, "--db", str(flag_db), "--json").exit_code == 0
    assert invoke("run", GOAL, "--json").exit_code == 0
    assert flag_db.is_file()
    assert env_db.is_file()
    assert (tmp_path / "flag.sqlite.log").is_file()
    assert (tmp_path / "env.sqlite.log").is_file()
    assert not state_dir.exists()


def _readme_json_sample() -> dict[str, object]:
    readme = page("reference/cli.md")
    command = "--toolkit calculator --thread year --json\n"
    start = readme.index(command) + len(command)
    return json.loads(readme[start : readme.index("\n$ echo", start)])  # type: ignore[no-any-return]


def _shape(value: object) -> object:
    """Keys all the way down, and the type of each leaf: what a sample must agree on."""
    if isinstance(value, dict):
        return {key: _shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_shape(item) for item in value]
    return type(value).__name__


def test_the_trace_numbers_a_call_by_the_step_that_made_it(server: FakeOpenAI) -> None:
    server.push(*REFUND)
    result = json.loads(invoke("run", GOAL, "--json").stdout)
    assert [e["step"] for e in result["trace"]] == [e["step"] for e in result["history"]]
    assert [e["step"] for e in result["trace"]] == [1, 2, 3]


def test_the_cli_reference_json_sample_is_real_output(server: FakeOpenAI) -> None:
    sample = _readme_json_sample()
    server.push(tool_call("calculate", expression="49 * 12"), reply("588"))
    args = ("--toolkit", "calculator", "--thread", "year", "--json")
    out = invoke("run", "What does a year of the USD 49 plan cost?", *args)
    assert out.exit_code == 0, out.stderr
    result = json.loads(out.stdout)
    assert _shape(sample) == _shape(result)
    result["usage"]["seconds"] = sample["usage"]["seconds"]  # type: ignore[index]
    assert _without_ids(sample) == _without_ids(result)  # a tool call's id is the server's


def _without_ids(value: object) -> object:
    """The value without the ids a server makes up (tool call ids) in every place they are."""
    if isinstance(value, dict):
        return {k: _without_ids(v) for k, v in value.items() if k not in ("id", "tool_call_id")}
    if isinstance(value, list):
        return [_without_ids(item) for item in value]
    return value


def test_max_cost_stops_a_run_and_an_unpriced_model_is_refused(server: FakeOpenAI) -> None:
    server.push(tool_call("get_user_profile", user_id=42), reply("Anna"))
    out = invoke("run", "who is 42?", "--max-cost", "0.00001", "--json")
    assert out.exit_code == 2, out.stdout
    result = json.loads(out.stdout)
    assert result["stop_reason"] == "max_cost"
    assert result["message"] == "max_cost 1e-05 USD reached (0.000016 USD spent)"
    events = json.loads(invoke("show", result["thread_id"], "--json").stdout)["events"]
    decided = [e for e in events if e["node"] == "decide"]
    assert decided[0]["cost"] == result["usage"]["cost"]  # every run-log line has the cost so far
    assert decided[0]["context"]["priced_by"].startswith("genai-prices")
    refused = invoke("run", "who is 42?", "--max-cost", "1", "--model", "m-1")
    assert refused.exit_code != 0
    assert "max_cost 1 needs a price: model 'm-1' is unpriced" in refused.stderr
    assert "Traceback" not in refused.stderr


def _budget_flags() -> dict[str, Any]:
    command = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    budget = {*Budget.model_fields, "on_budget"}
    return {param.name: param for param in command.params if param.name in budget}


def test_the_budget_flags_are_the_budgets_fields() -> None:
    """One declaration: every scalar ``Budget`` field has a ``run`` flag and a ``RunOptions``
    field of its type (or None: keep the policy's), the flag's lower bound is the field's, and
    its help shows the field's default. ``tool_limits`` (per tool) has no flag, nor have the
    limits across a thread's runs (the command line starts one run a thread)."""
    flags = _budget_flags()
    unflagged = {"tool_limits", "thread_max_steps", "thread_max_tool_calls", "thread_tool_limits"}
    scalar = [name for name in Budget.model_fields if name not in unflagged]
    assert sorted(flags) == sorted([*scalar, "on_budget"])
    for name in scalar:
        field, flag = Budget.model_fields[name], flags[name]
        assert RunOptions.model_fields[name].annotation == field.annotation | None, name
        bounds = {type(m).__name__: m for m in field.metadata}
        if "Ge" in bounds:
            assert flag.min == bounds["Ge"].ge, name
        else:
            assert flag.min > bounds["Gt"].gt, name
        shown = "unlimited" if field.default is None else f"{field.default:g}"
        assert flag.help.endswith(f"[default: {shown}]"), name
    on_budget = Policy.model_fields["on_budget"]
    assert RunOptions.model_fields["on_budget"].annotation == on_budget.annotation | None
    assert {choice.value for choice in OnBudgetChoice} == set(get_args(on_budget.annotation))
    assert flags["on_budget"].help.endswith(f"[default: {on_budget.default}]")
