"""``gated-react resume``: approvals answered from the command line, under the options given
again on it (never those its checkpoints record: whoever can write the store could change
them)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from gated_react import Policy, build_graph, open_checkpointer, run
from gated_react.records.run_listing import METADATA_KEY
from gated_react.store.locks import thread_lock
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

from ...support.cli import invoke
from ...support.openai_server import FakeOpenAI, reply, tool_call
from ...support.tamper import forge_metadata, forge_record

GOAL = "refund for user 42?"
OPTIONS = ["--toolkit", "support", "--approve-tool", "get_user_billing"]
"""The run's options, which every command that continues it gives again."""
APPROVAL = ["--approve-tool", "get_user_billing", "--thread", "t-approve"]
HINT = "gated-react resume t-approve --toolkit support --approve-tool get_user_billing"


def _paused(server: FakeOpenAI, *script: object) -> dict[str, object]:
    server.push(tool_call("get_user_billing", user_id=42), *script)  # type: ignore[arg-type]
    out = invoke("run", GOAL, *APPROVAL)
    assert out.exit_code == 4, out.stdout
    assert "waiting for approval: get_user_billing" in out.stdout
    shown: dict[str, Any] = json.loads(invoke("show", "t-approve", "--json").stdout)
    asked = f"{HINT} --question {shown['pending'][0]['id']}"
    assert f"{asked} --approve" in out.stdout
    assert f"{asked} --args '{{\"user_id\": 42}}'" in out.stdout
    return shown


def _resume(*args: str) -> Any:
    return invoke("resume", "t-approve", *OPTIONS, *args)


def test_a_paused_run_waits_until_approved(server: FakeOpenAI) -> None:
    paused = _paused(server, reply("USD 49"))
    assert paused["pending"][0]["tool"] == "get_user_billing"  # type: ignore[index]
    again = invoke("resume", "t-approve", "--json")
    assert again.exit_code == 4
    assert json.loads(again.stdout)["pending"]
    assert len(server.requests) == 1  # waiting: nothing ran
    done = _resume("--approve", "--json")
    assert done.exit_code == 0
    ended = invoke("resume", "t-approve")  # before: the old summary, as if it had just run
    assert ended.exit_code == 0
    assert ended.stderr == (
        "gated-react: note: thread 't-approve' had ended (success); nothing ran: this is what "
        "it stored\n"
    )
    result = json.loads(done.stdout)
    assert result["answer"] == "USD 49"
    assert result["history"][0]["action"]["name"] == "get_user_billing"


def test_reject_ends_the_run_as_a_policy_stop(server: FakeOpenAI) -> None:
    _paused(server)
    out = _resume("--reject", "not today", "--json")
    assert out.exit_code == 2
    result = json.loads(out.stdout)
    assert result["stop_reason"] == "tool_rejected:get_user_billing"
    assert "not today" in result["message"]
    assert result["history"] == []


def test_args_approve_with_edited_arguments(server: FakeOpenAI) -> None:
    _paused(server, reply("Max is on the free plan"))
    out = _resume("--args", '{"user_id": 7}', "--json")
    assert out.exit_code == 0
    step = json.loads(out.stdout)["history"][0]
    assert step["action"]["args"] == {"user_id": 7}
    assert step["observation"]["billing"]["plan"] == "free"


def test_respond_answers_in_place_of_the_tool(server: FakeOpenAI) -> None:
    _paused(server, reply("USD 49"))
    out = _resume("--respond", "billing says USD 49", "--json")
    assert out.exit_code == 0, out.stdout
    result = json.loads(out.stdout)
    assert result["history"][0]["observation"] == "billing says USD 49"
    assert result["trace"][0]["by_human"] is True
    assert len(server.requests) == 2  # the model was asked again; the tool never ran


def test_answer_takes_langchains_decisions(server: FakeOpenAI) -> None:
    _paused(server, reply("Max is on the free plan"))
    edit = {"type": "edit", "edited_action": {"name": "get_user_billing", "args": {"user_id": 7}}}
    out = _resume("--answer", json.dumps({"decisions": [edit]}), "--json")
    assert out.exit_code == 0, out.stdout
    assert json.loads(out.stdout)["history"][0]["action"]["args"] == {"user_id": 7}


def test_resume_runs_under_the_policy_given_again(server: FakeOpenAI) -> None:
    server.push(
        tool_call("get_user_billing", user_id=42), tool_call("get_user_profile", user_id=42)
    )
    first = invoke("run", GOAL, *APPROVAL, "--max-tool-calls", "1")
    assert first.exit_code == 4
    assert re.search(f"{HINT} --max-tool-calls 1 --question \\w+ --approve", first.stdout)
    out = _resume("--max-tool-calls", "1", "--approve", "--json")
    assert out.exit_code == 2
    assert json.loads(out.stdout)["stop_reason"] == "max_tool_calls"


def test_resume_without_the_runs_options_is_one_line_saying_them(server: FakeOpenAI) -> None:
    """The options are never read back from the store: a resume that gives none is refused,
    naming what the run's checkpoints say it was started with, and nothing runs."""
    _paused(server, reply("USD 49"))
    out = invoke("resume", "t-approve", "--approve")
    assert out.exit_code == 1
    assert out.stderr.count("\n") == 1
    assert "give the options the run was started with again" in out.stderr
    started = "--toolkit support --approve-tool get_user_billing"
    assert f"its checkpoints say it was started with {started} (the store has no key" in out.stderr
    assert "gated-react resume" not in out.stderr  # without a key, never as a command to run
    assert len(server.requests) == 1
    assert json.loads(invoke("show", "t-approve", "--json").stdout)["pending"]


def test_an_approval_removed_from_the_stored_options_cannot_let_the_call_run(
    server: FakeOpenAI, state_dir: Path
) -> None:
    """Before, resume rebuilt the policy from the checkpoints' metadata: with the approval
    removed there, ``--reject`` went unread and the call ran."""
    _paused(server, reply("USD 49"))
    forge_metadata(str(state_dir / "runs.sqlite"), "t-approve", METADATA_KEY, "{}")
    forgot = invoke("resume", "t-approve", "--toolkit", "support", "--reject", "no", "--json")
    assert forgot.exit_code == 1  # these options would let it run unasked: refused
    assert "waits on a human's answer about get_user_billing" in forgot.stderr
    assert "--approve-tool get_user_billing" in forgot.stderr
    out = _resume("--reject", "no", "--json")
    assert out.exit_code == 2, out.stderr
    result = json.loads(out.stdout)
    assert result["stop_reason"] == "tool_rejected:get_user_billing"
    assert result["history"] == []
    assert len(server.requests) == 1  # the model was never asked again: nothing ran
    assert out.stderr == (  # what the store says is only said
        "gated-react: note: thread 't-approve' was started with --toolkit support (as its "
        "checkpoints say); resuming it with --toolkit support --approve-tool get_user_billing\n"
    )


def test_an_edited_base_url_never_receives_the_api_key(
    server: FakeOpenAI, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, resume sent the request (and OPENAI_API_KEY) to the base URL its checkpoints
    recorded, whoever wrote it there."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-secret-key-0123456789")
    server.push(tool_call("get_user_billing", user_id=42), reply("USD 49"))
    paused = invoke("run", GOAL, *APPROVAL, "--base-url", server.base_url)
    assert paused.exit_code == 4, paused.stderr
    with FakeOpenAI() as elsewhere:
        edited = json.dumps({"approve": ["get_user_billing"], "base_url": elsewhere.base_url})
        forge_metadata(str(state_dir / "runs.sqlite"), "t-approve", METADATA_KEY, edited)
        out = _resume("--approve", "--json")  # the base URL from the environment
        assert out.exit_code == 0, out.stderr
        assert json.loads(out.stdout)["answer"] == "USD 49"
        assert elsewhere.requests == []
    assert len(server.requests) == 2


def test_answers_only_go_to_a_waiting_run(server: FakeOpenAI) -> None:
    server.push(reply("done"))
    assert invoke("run", GOAL, "--thread", "t-done", "--json").exit_code == 0
    out = invoke("resume", "t-done", "--approve")
    assert out.exit_code == 1
    assert "has ended (success); nothing to approve" in out.stderr
    finished = invoke("resume", "t-done", "--json")  # nothing runs: no options needed
    assert finished.exit_code == 0  # a finished run is shown, nothing runs
    assert json.loads(finished.stdout)["answer"] == "done"
    assert len(server.requests) == 1


def test_a_thread_from_the_library_is_not_resumed_blindly(state_dir: Path) -> None:
    db = state_dir / "runs.sqlite"
    asking = Policy().replace(require_approval=frozenset({"get_user_billing"}))
    with open_checkpointer(str(db)) as saver:
        model = ScriptedChatModel(replies=[call("get_user_billing", user_id=42), "x"])
        graph = build_graph(model, SUPPORT_TOOLS, policy=asking, checkpointer=saver)
        assert run(graph, "hello", thread_id="from-lib")["pending"]
    out = invoke("resume", "from-lib", *OPTIONS, "--approve")
    assert out.exit_code == 1
    assert "not started by the gated-react CLI" in out.stderr
    # shown, it offers no command this CLI would then refuse: it says where it is answered
    for shown in (invoke("show", "from-lib"), invoke("resume", "from-lib")):
        assert shown.exit_code in (0, 4)
        assert "waiting for approval: get_user_billing" in shown.stdout
        assert "--approve" not in shown.stdout
        assert "resume it from the program that started it" in shown.stdout


def test_the_example_folder_follows_from_the_thread_not_from_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crafted or old store that records another folder cannot point the tools at it."""
    from gated_react.cli.commands.resume import options_for
    from gated_react.cli.run_options import RunOptions

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    crafted = RunOptions(example="001-coding", example_dir="/etc")
    options = options_for("../x", {"example": "001-coding"}, crafted.metadata())
    assert options.example_dir is not None
    folder = Path(options.example_dir)
    assert folder.parent == tmp_path / "state" / "gated-react" / "examples"
    assert "/etc" not in str(folder)


def test_a_spent_budget_asks_and_the_cli_answers_each_way(server: FakeOpenAI) -> None:
    """``--on-budget ask``: the run pauses (exit 4) on the spent budget and says how to answer;
    ``--approve`` extends it by the proposal, ``--args`` sets the limit, ``--reject`` stops."""
    budget = ["--toolkit", "support", "--max-steps", "1", "--on-budget", "ask"]
    for thread, answer, code in (
        ("b-approve", ["--approve"], 0),
        ("b-edit", ["--args", '{"limit": 3}'], 0),
        ("b-reject", ["--reject", "enough"], 2),
    ):
        server.push(tool_call("get_user_profile", user_id=42), reply("Anna"))
        out = invoke("run", GOAL, "--thread", thread, *budget)
        assert out.exit_code == 4, out.stdout
        assert "budget spent: max_steps (1 spent of 1)" in out.stdout
        (asked,) = json.loads(invoke("show", thread, "--json").stdout)["pending"]
        hint = f"gated-react resume {thread} {' '.join(budget)} --question {asked['id']}"
        assert f"{hint} --approve   (to 2)" in out.stdout
        assert f"{hint} --args '{{\"limit\": 2}}'" in out.stdout
        done = invoke("resume", thread, *budget, *answer, "--json")
        assert done.exit_code == code, done.stdout
        result = json.loads(done.stdout)
        extended = [e.get("extended") for e in result["trace"] if e.get("extended")]
        if code:
            assert result["stop_reason"] == "max_steps"
            assert extended == []
        else:
            limit = 3 if answer[0] == "--args" else 2
            decision = "edit" if answer[0] == "--args" else "approve"
            assert extended == [f"max_steps 1 -> {limit} ({decision})"]
            assert f"steps        2/{limit}" in invoke("resume", thread).stdout


def test_show_reads_the_limits_a_human_extended(server: FakeOpenAI) -> None:
    budget = ["--toolkit", "support", "--max-steps", "1", "--on-budget", "ask"]
    server.push(tool_call("get_user_profile", user_id=42), reply("Anna"))
    assert invoke("run", GOAL, "--thread", "b", *budget).exit_code == 4
    assert invoke("resume", "b", *budget, "--approve").exit_code == 0
    shown = invoke("show", "b").stdout  # the limits in force, not the policy's
    assert "steps        2/2" in shown
    assert "max_steps 1 -> 2 (approve)" in shown  # the trace says why


def test_the_summary_of_a_later_resume_shows_the_extended_limit(server: FakeOpenAI) -> None:
    """A budget extended in one command, the run then paused on an approval and resumed in
    another: before, that summary showed the policy's limit (``steps 3/1``)."""
    server.push(
        tool_call("get_user_profile", user_id=42),
        tool_call("get_user_billing", user_id=42),
        reply("Anna"),
    )
    flags = ["--max-steps", "1", "--on-budget", "ask", *OPTIONS]
    assert invoke("run", GOAL, "--thread", "later", *flags).exit_code == 4
    asked = invoke("resume", "later", *flags, "--args", '{"limit": 5}')
    assert asked.exit_code == 4, asked.stdout  # extended, then paused on the approval
    done = invoke("resume", "later", *flags, "--approve")
    assert done.exit_code == 0, done.stdout
    assert "steps        3/5" in done.stdout


@pytest.mark.parametrize("flag", ["--answer", "--args"])
@pytest.mark.parametrize("command", ["resume", "answer"])
def test_deeply_nested_json_is_one_line_and_nothing_runs(
    server: FakeOpenAI, flag: str, command: str
) -> None:
    """Before: a ``RecursionError`` traceback (``json.loads`` of 100,000 brackets)."""
    _paused(server, reply("USD 49"))
    for depth in (100_000, 65):
        nested = '{"a": ' * depth + "1" + "}" * depth
        out = invoke(command, "t-approve", *OPTIONS, flag, nested)
        assert out.exit_code == 1, out.stderr
        assert out.stderr == f"gated-react: error: {flag} nests deeper than 64 levels\n"
    assert len(server.requests) == 1
    assert json.loads(invoke("show", "t-approve", "--json").stdout)["pending"]


@pytest.mark.parametrize("flag", ["--answer", "--args"])
@pytest.mark.parametrize(
    ("given", "says"),
    [('{"user_id": 42, "user_id": 43}', "key 'user_id' is given twice"), ('{"n": NaN}', "NaN")],
)
def test_a_key_given_twice_or_a_constant_json_has_not_is_one_line(
    server: FakeOpenAI, flag: str, given: str, says: str
) -> None:
    """Before: ``--args '{"user_id": 42, "user_id": 43}'`` ran the call for user 43 (the model's
    own replies with a key twice are refused as ``bad_json``)."""
    _paused(server, reply("USD 49"))
    out = invoke("answer", "t-approve", *OPTIONS, flag, given)
    assert out.exit_code == 1, out.stderr
    assert out.stderr.count("\n") == 1
    assert f"{flag} is not valid JSON" in out.stderr
    assert says in out.stderr
    assert len(server.requests) == 1
    assert json.loads(invoke("show", "t-approve", "--json").stdout)["pending"]


def test_a_signed_thread_read_without_the_key_is_one_line_saying_so(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: ``NotImplementedError: Unsupported message type`` from LangChain, called a
    damaged store."""
    monkeypatch.setenv("GATED_REACT_STORE_KEY", "k" * 32)
    _paused(server, reply("USD 49"))
    monkeypatch.delenv("GATED_REACT_STORE_KEY")
    answering = [[command, "t-approve", *OPTIONS, "--approve"] for command in ("resume", "answer")]
    for args in (["show", "t-approve"], *answering):
        out = invoke(*args)
        assert out.exit_code == 1, (args, out.stdout)
        assert out.stderr.count("\n") == 1, args
        assert "'t-approve'" in out.stderr, args
        assert "signed with a store key" in out.stderr, args
        assert "set GATED_REACT_STORE_KEY" in out.stderr, args
    for listing in ("runs", "questions"):  # listed as such, the rest of the store still shown
        out = invoke(listing, "--json")
        assert out.exit_code == 0, (listing, out.stderr)
        assert '"keyed"' in out.stdout, listing
    assert len(server.requests) == 1


def test_a_resume_of_a_thread_another_run_advances_is_refused_before_it_prints(
    server: FakeOpenAI, state_dir: Path
) -> None:
    """Before: the header ("model ... store ...") printed, then the refusal."""
    _paused(server, reply("USD 49"))
    db = str(state_dir / "runs.sqlite")
    with open_checkpointer(db) as saver, thread_lock(saver, "t-approve"):
        out = _resume("--approve")
    assert out.exit_code == 1
    assert out.stdout == ""
    assert "being advanced by another run" in out.stderr
    assert out.stderr.count("\n") == 1
    assert len(server.requests) == 1


def test_the_printed_approve_command_run_twice_never_answers_the_next_question(
    server: FakeOpenAI,
) -> None:
    """Before: a paused run printed the same command at every question, so running it twice
    (a double click, the shell's history) approved the next call, which nobody had read."""
    server.push(tool_call("get_user_billing", user_id=42), tool_call("get_user_billing", user_id=7),
                reply("USD 49"))  # fmt: skip
    out = invoke("run", GOAL, *APPROVAL)
    (line,) = [line for line in out.stdout.splitlines() if line.startswith("  approve: ")]
    command = shlex.split(line.removeprefix("  approve: "))[1:]  # after "gated-react"
    assert invoke(*command).exit_code == 4  # approved; the run asks about the second call
    again = invoke(*command)
    assert again.exit_code == 1
    assert "does not wait on question" in again.stderr
    assert again.stderr.count("\n") == 1
    assert len(server.requests) == 2  # nothing ran for the second command
    (waiting,) = json.loads(invoke("show", "t-approve", "--json").stdout)["pending"]
    assert waiting["args"] == {"user_id": 7}
    named = command[: command.index("--question")]
    assert invoke(*named, "--question", waiting["id"], "--approve").exit_code == 0


def test_without_a_key_the_stored_options_are_never_printed_as_the_command_to_run(
    server: FakeOpenAI, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: ``show`` printed ``gated-react resume ... --mcp evil.json --approve`` from options
    anyone who could write the store had put there; pasted, it ran the MCP config's command."""
    _paused(server, reply("USD 49"))
    evil = json.dumps({"mcp": ["/tmp/evil.json"], "approve": ["get_user_billing"]})
    forge_metadata(str(state_dir / "runs.sqlite"), "t-approve", METADATA_KEY, evil)
    shown = invoke("show", "t-approve").stdout
    commands = [line for line in shown.splitlines() if "gated-react resume" in line]
    assert commands
    assert all("t-approve OPTIONS --question" in line for line in commands)
    said = "started with --toolkit support --mcp /tmp/evil.json --approve-tool get_user_billing"
    assert said in shown
    assert "the store has no key" in shown


def test_with_a_key_show_prints_the_signed_options_as_the_command(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATED_REACT_STORE_KEY", "k" * 32)
    paused = _paused(server, reply("USD 49"))
    shown = invoke("show", "t-approve").stdout
    assert f"{HINT} --question {paused['pending'][0]['id']} --approve" in shown  # type: ignore[index]
    assert "the store has no key" not in shown


def test_show_says_when_an_edited_record_puts_the_spend_in_doubt(
    server: FakeOpenAI, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: a run whose payment row was edited showed the lowered figures as any other."""
    monkeypatch.setenv("GATED_REACT_STORE_KEY", "k" * 32)
    _paused(server, reply("USD 49"))
    assert "spend in doubt" not in invoke("show", "t-approve").stdout
    forge_record(str(state_dir / "runs.sqlite"), "t-approve", "paid", '{"tokens": 0}')
    shown = invoke("show", "t-approve").stdout
    assert "spend in doubt: its paid record of " in shown
    assert "does not verify with the store key (edited, forged or copied)" in shown


@pytest.mark.postgres
def test_a_run_of_the_workers_cut_short_is_never_sent_to_answer_a_question(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker killed mid-run leaves its thread unfinished, with no question. ``resume`` sent
    it to ``gated-react answer --approve``, which refuses a thread with no question and sends
    it back to ``resume``. It now names the step that continues the run: the job a worker
    takes over, or, once its job has failed, queueing it again without an answer; taken,
    that step ends the run."""
    import psycopg

    from gated_react.workers import enqueue_resume, enqueue_run, install_queue, make_app

    from ...support.helpers import REFUND_GOAL
    from ...support.worker_graphs import LOG_VAR, stall_once
    from ...support.worker_procs import fleet, until
    from ...test_workers import jobs, stored

    monkeypatch.setenv(LOG_VAR, str(tmp_path / "decisions.tsv"))
    stall = stall_once(tmp_path, monkeypatch)
    install_queue(pg_url)
    app = make_app(pg_url)
    refund = "tests.support.worker_graphs:refund"
    with app.open():
        enqueue_run(app, REFUND_GOAL, thread_id="cut")
    with fleet(pg_url, refund, 1, tmp_path, "--stalled-after", "30") as (doomed,):
        until(lambda: not stall.exists(), "the worker hangs in the run")
        doomed.proc.kill()
        doomed.proc.wait()
    running = invoke("resume", "cut", "--db", pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:  # what a defect's last try leaves
        conn.execute("UPDATE procrastinate_jobs SET status = 'failed', worker_id = NULL")
    failed = invoke("resume", "cut", "--db", pg_url)
    for out in (running, failed):
        assert out.exit_code == 1
        assert out.stderr.count("\n") == 1
        assert "waits on no question" in out.stderr
        assert "--approve" not in out.stderr
        assert "gated-react queue --thread cut" in out.stderr
    assert "its job 1 is running: a worker continues it" in running.stderr
    assert "enqueue_resume" not in running.stderr
    assert "queue it again without an answer: enqueue_resume(app, 'cut')" in failed.stderr
    with app.open():
        enqueue_resume(app, "cut")  # the step it names
    (tmp_path / "next").mkdir()
    with fleet(pg_url, refund, 1, tmp_path / "next"):
        until(lambda: ("cut", "succeeded", 1) in jobs(pg_url), "the resumed run ended")
    assert stored(pg_url, "cut")["stop_reason"] == "success"
