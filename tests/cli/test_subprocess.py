"""The installed ``gated-react`` script as a real process: exit codes, a pure --json stdout,
Ctrl-C in the middle of a slow model reply or a slow tool and then resume, a kill in the middle
of a slow model reply, a busy thread."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest

from gated_react import open_checkpointer
from gated_react._engine.authority.ledger import ledger_for
from gated_react.store.locks import thread_lock

from ..support.cli import REFUND, cli, invoke, spawn
from ..support.openai_server import Delay, FakeOpenAI, Status, reply, tool_call
from ..support.reaping import PATIENCE, reap, wait_for


@pytest.mark.parametrize(
    ("flags", "script", "code"),
    [
        ([], REFUND, 0),
        (["--max-steps", "1"], REFUND[:1], 2),
        ([], [Status(500)], 3),
        (["--approve-tool", "get_user_billing"], [tool_call("get_user_billing", user_id=42)], 4),
    ],
)
def test_exit_codes_and_a_pure_json_stdout(
    server: FakeOpenAI, flags: list[str], script: list[object], code: int
) -> None:
    server.push(*script)  # type: ignore[arg-type]
    done = cli("run", "refund for 42?", "--json", *flags)
    assert done.returncode == code, done.stderr
    assert done.stderr == ""
    result = json.loads(done.stdout)  # stdout is exactly one JSON document
    assert {"status", "stop_reason", "answer", "trace", "history", "thread_id"} <= set(result)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ("run", "refund?", "--toolkit", "nosuch", "--base-url", "http://127.0.0.1:9/v1"),
            "nosuch",
        ),
        (("resume", "no-such-thread"), "no-such-thread"),
    ],
)
def test_a_user_error_is_one_line_and_exit_1(
    state_dir: Path, args: tuple[str, ...], says: str
) -> None:
    done = cli(*args)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith("gated-react: error: ")
    assert says in done.stderr
    assert done.stderr.count("\n") == 1


@pytest.mark.parametrize("url", ["http://[::1", "not-a-url", "ftp://127.0.0.1/v1"])
@pytest.mark.parametrize("where", ["env", "flag"])
def test_a_base_url_that_is_not_one_is_one_line_and_exit_1(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch, url: str, where: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")
    if where == "env":
        monkeypatch.setenv("OPENAI_BASE_URL", url)
    flags = ["--base-url", url] if where == "flag" else []
    done = cli("run", "refund?", *flags)
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    named = "OPENAI_BASE_URL" if where == "env" else "base URL"
    assert done.stderr.startswith(f"gated-react: error: {named}: expected an http:// or https")
    assert done.stderr.count("\n") == 1


def _interrupt(proc: subprocess.Popen[str], how: signal.Signals = signal.SIGINT) -> tuple[str, str]:
    """Ctrl-C (or ``how``), and what the process wrote until it exited (it is reaped whatever
    happens)."""
    proc.send_signal(how)
    try:
        return proc.communicate(timeout=PATIENCE)
    finally:
        reap(proc)


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_during_a_slow_model_reply_then_resume(
    server: FakeOpenAI, state_dir: Path, how: signal.Signals
) -> None:
    """SIGTERM (``kill``, ``timeout``, systemd) as Ctrl-C. Before: the process ended silently,
    exit -15, and the run log said nothing."""
    server.push(tool_call("get_user_billing", user_id=42), Delay(60, reply("late")))
    proc = spawn("run", "refund?", "--thread", "cc")
    assert server.wait_for_requests(2)  # the slow second model call is under way
    logged = (state_dir / "runs.sqlite.log").read_text().splitlines()
    assert [json.loads(line)["node"] for line in logged][-1] == "observe"  # flushed per line
    out, err = _interrupt(proc, how)
    assert proc.returncode == 130
    assert "interrupted: the run is saved; continue it with: gated-react resume cc" in err
    assert "Traceback" not in err
    assert "observe" in out  # the live view had shown the first step
    server.push(reply("USD 49"))
    assert "continue it with: gated-react resume cc --toolkit support" in err
    done = cli("resume", "cc", "--toolkit", "support", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["answer"] == "USD 49"
    assert [h["action"]["name"] for h in result["history"]] == ["get_user_billing"]
    assert len(server.requests) == 3  # the tool step was not asked for again
    log = (state_dir / "runs.sqlite.log").read_text().splitlines()
    nodes = [json.loads(line)["decision"] for line in log]
    assert "interrupted" in nodes
    assert "resumed" in nodes


def test_ctrl_c_during_a_slow_tool_then_resume(
    server: FakeOpenAI, state_dir: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    marker = work / "runs.txt"  # in the workspace: the sandbox lets tests write nothing else
    (work / "test_slow.py").write_text(
        "import time\n"
        f"def test_slow():\n    open({str(marker)!r}, 'a').write('x')\n    time.sleep(3)\n"
    )
    server.push(tool_call("run_tests", path="test_slow.py"))
    # The active-seconds budget holds across the Ctrl-C: two sandboxed pytest runs on a loaded
    # machine took 20.2 s in CI, past the default 20 s, and the resume stopped on time.
    proc = spawn(
        "run", "run the tests", "-t", "workspace", "--workspace", str(work), "--thread", "tt",
        "--max-seconds", "600",
    )  # fmt: skip
    wait_for(marker.exists, proc, "the tool's start")  # the tool is running
    _, err = _interrupt(proc)
    assert proc.returncode == 130
    again = ("-t", "workspace", "--workspace", str(work), "--max-seconds", "600")
    assert "gated-react resume tt --toolkit workspace --max-seconds 600 --workspace" in err
    done = cli("resume", "tt", *again, "--json")
    assert done.returncode == 3, (done.stdout[-800:], done.stderr)
    result = json.loads(done.stdout)
    assert result["stop_reason"] == "tool_outcome_unknown:run_tests"
    # A test may write in the workspace, so run_tests is not run twice: before, the resume ran
    # the tests again (two marks) as if they only read.
    assert marker.read_text() == "x"
    assert len(server.requests) == 1


def test_a_busy_thread_is_refused(server: FakeOpenAI, state_dir: Path) -> None:
    server.push(tool_call("get_user_billing", user_id=42))
    assert (
        invoke("run", "x", "--thread", "busy", "--approve-tool", "get_user_billing").exit_code == 4
    )
    with open_checkpointer(str(state_dir / "runs.sqlite")) as saver, thread_lock(saver, "busy"):
        done = cli("resume", "busy", "--approve-tool", "get_user_billing", "--approve")
    assert done.returncode == 1
    assert done.stderr == (
        "gated-react: error: thread 'busy' is being advanced by another run; nothing was changed\n"
    )
    assert len(server.requests) == 1


def test_help_and_runs_do_not_import_the_model_stack(state_dir: Path) -> None:
    code = (
        "import sys\n"
        "from gated_react.cli.app import app\n"
        "from gated_react.cli import resources\n"
        "from gated_react.records.run_listing import latest_runs\n"
        "with resources.opened(resources.store_url(resources.settings(), None)) as saver:\n"
        "    latest_runs(saver, 20)\n"
        "heavy = ('langchain_openai', 'openai', 'langgraph.graph', 'langgraph.pregel')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=PATIENCE
    )
    assert done.stdout.strip() == "[]"
    assert cli("--help").stdout.startswith("Usage: gated-react")


def test_console_spans_never_reach_the_json_on_stdout(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: ``OTEL_TRACES_EXPORTER=console`` printed the spans into stdout after the result
    object, so ``run --json | jq`` failed."""
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    server.push(*REFUND)
    done = cli("run", "refund for user 42?", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["stop_reason"] == "success"  # exactly the result object
    assert '"name": "invoke_agent gated-react"' in done.stderr


def _seconds_spent(db: Path, thread: str) -> float:
    """The seconds the thread's newest run has spent, as its record says now."""
    with open_checkpointer(f"sqlite:///{db}") as saver:
        return ledger_for(saver).last(thread).tally.usage().seconds


def _seconds_over(db: Path, thread: str, seconds: float) -> bool:
    return _seconds_spent(db, thread) >= seconds


def test_a_kill_during_a_model_call_keeps_its_seconds_and_kills_spend_the_budget(
    server: FakeOpenAI, state_dir: Path
) -> None:
    """Before: a model call cut off by a kill left no seconds, so a run killed and resumed again
    and again never spent ``max_seconds``. Now each kill keeps all but the last beat of the
    call it cut off, and the third resume stops the run on its time budget."""
    server.push(*[Delay(60, reply("late"))] * 3)
    spent = 0.0
    for attempt in range(2):
        args = ("run", "refund?", "--thread", "kk") if attempt == 0 else ("resume", "kk")
        proc = spawn(*args, "--max-seconds", "60")
        beaten = partial(_seconds_over, state_dir / "runs.sqlite", "kk", spent + 1.0)
        wait_for(beaten, proc, f"a beat of model call {attempt + 1}")
        proc.kill()
        reap(proc)
        spent = _seconds_spent(state_dir / "runs.sqlite", "kk")
    assert spent >= 2.0
    budget = f"{spent + 0.5:.3f}"  # half a second left
    done = cli("resume", "kk", "--json", "--max-seconds", budget)
    result = json.loads(done.stdout)
    assert (done.returncode, result["stop_reason"]) == (2, "max_seconds"), done.stderr
    assert "while waiting for the model" in result["message"]
    assert result["usage"]["seconds"] >= float(budget)
    assert result["usage"]["steps"] == 3  # each call cut off counts, at its estimate
