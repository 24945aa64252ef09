"""What a person sees is safe to see: text from the goal, the model, a tool or the store never
reaches the terminal as control sequences or rich markup, and never shows a secret."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from langchain_core.messages import AIMessage
from rich.cells import cell_len
from rich.console import Console

from gated_react import Budget, Policy, build_graph, open_checkpointer, run
from gated_react.cli.live import render
from gated_react.testing import ScriptedChatModel
from gated_react.tools.support import SUPPORT_TOOLS

from ...support.cli import invoke
from ...support.openai_server import FakeOpenAI, reply, tool_call

# What a terminal acts on instead of printing: C0 but newline and tab, DEL, C1, bidi overrides.
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
HOSTILE = "\x1b]0;pwned\x07 \x1b[2J \r\x9b31m [red]red[/red] :thumbs_up: \u202eevil"
KEY = "sk-proj-abcdef0123456789"
TOKEN = "abcdefgh12345678"
GOAL = f"check {HOSTILE} with {KEY} and Authorization: Bearer {TOKEN} and local-secret-key-98765"
THREAD = "t\x1b[2Jhostile"
"""A thread id only a program can give (``run --thread`` refuses it); every listing shows it."""


def _clean(out: Result) -> str:
    text = out.stdout + out.stderr
    assert not UNSAFE.search(text), [m.group() for m in UNSAFE.finditer(text)]
    for secret in (KEY, TOKEN, "local-secret-key-98765", "0123456789"):
        assert secret not in text
    return text


@pytest.fixture
def hostile(server: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Result:
    """A run whose goal, tool output, model text and thread id all carry terminal controls."""
    monkeypatch.setenv("OPENAI_API_KEY", "local-secret-key-98765")
    monkeypatch.setenv("COLUMNS", "400")  # room for the whole goal in `runs`
    (tmp_path / "notes.txt").write_text(f"notes {HOSTILE} {KEY}")
    server.push(tool_call("read_file", path="notes.txt"), reply(f"done {HOSTILE} {KEY}"))
    flags = ("--toolkit", "workspace", "--workspace", str(tmp_path), "--thread", "hostile")
    return invoke("run", GOAL, *flags)


def _program_run(db: Path, goal: str, replies: list[Any], policy: Policy | None = None) -> None:
    """A run under ``THREAD`` in the CLI's store, as an app's own program makes one."""
    with open_checkpointer(str(db)) as saver:
        model = ScriptedChatModel(replies=replies)
        graph = build_graph(model, SUPPORT_TOOLS, policy=policy, checkpointer=saver)
        run(graph, goal, thread_id=THREAD)


@pytest.fixture
def program_thread(hostile: Result, state_dir: Path) -> None:
    """Beside the hostile run, a thread whose id carries terminal controls."""
    _program_run(state_dir / "runs.sqlite", GOAL, [f"done {HOSTILE} {KEY}"])


def test_the_live_view_and_summary_print_no_controls_markup_or_secrets(hostile: Result) -> None:
    assert hostile.exit_code == 0, hostile.stderr
    text = _clean(hostile)
    assert "execute  ok" in text
    assert "[red]red[/red]" in text  # markup is shown as typed, not applied
    assert ":thumbs_up:" in text  # and so are emoji codes
    assert "\\x1b]0;pwned" in text  # controls are shown escaped, not dropped


@pytest.mark.usefixtures("program_thread")
def test_show_and_runs_print_no_controls_markup_or_secrets() -> None:
    for args in (["show", THREAD], ["runs"], ["runs", "--json"], ["show", THREAD, "--json"]):
        out = invoke(*args)
        assert out.exit_code == 0, (args, out.stderr)
        text = _clean(out)
        assert "[red]red[/red]" in text or "--json" in args
    shown = invoke("show", THREAD).stdout
    assert "goal  check \\x1b]0;pwned\\x07 \\x1b[2J \\x9b31m [red]red[/red]" in shown
    assert "sk-***" in shown
    listed = json.loads(invoke("runs", "--json").stdout)["runs"][0]
    assert listed["goal"].startswith("check \x1b]0;pwned")  # JSON keeps the value exactly


def test_errors_and_hints_print_no_controls(server: FakeOpenAI, state_dir: Path) -> None:
    out = invoke("show", "nope\x1b[2J\x9b")
    assert out.exit_code == 1
    _clean(out)
    refused = invoke("run", "x", "--thread", THREAD)
    assert refused.exit_code == 1
    assert "cannot be shown (U+001B)" in _clean(refused)
    asks = Policy(require_approval=["get_user_billing"])
    billing = AIMessage("", tool_calls=[{"name": "get_user_billing", "args": {"user_id": 42},
                                         "id": "c1"}])  # fmt: skip
    _program_run(state_dir / "runs.sqlite", "x", [billing], asks)
    paused = invoke("show", THREAD)
    assert paused.exit_code == 0
    _clean(paused)
    # a program's thread is answered by that program: named as Python types it back, the
    # escape written out, never the raw escape
    assert "thread 't\\x1b[2Jhostile' was not started by the gated-react CLI" in paused.stdout


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("a\x1b[2Jb", "a\\x1b[2Jb"),
        ("[bold]x[/]", "\\[bold]x\\[/]"),
        ("bell\x07 del\x7f c1\x9b \u202e", "bell\\x07 del\\x7f c1\\x9b \\u202e"),
        ("line\r\nnext\ttab", "line next tab"),
        ({"k": "v\x9b"}, '{"k": "v\\x9b"}'),
    ],
)
def test_safe_escapes_controls_and_markup(value: object, shown: str) -> None:
    assert render.safe(value) == shown


def test_safe_masks_secrets_before_it_clips_and_keeps_lines_when_asked() -> None:
    secret = "local-secret-key-98765"
    assert render.safe(f"key {secret} end", (secret,), limit=12) == "key *** end"
    assert render.safe(f"{'x' * 20} {KEY}", limit=27) == f"{'x' * 20} sk-***"
    assert render.safe("a\r\nb\tc\x1b", lines=True) == "a\nb\tc\\x1b"


def test_the_summary_says_how_many_input_tokens_came_from_the_prompt_cache() -> None:
    out = io.StringIO()
    usage = {"steps": 2, "tokens": 3112, "cached_tokens": 1408, "seconds": 0.5}
    result = {"status": "ok", "stop_reason": "success", "usage": usage, "history": []}
    render.summary(Console(file=out, width=120), result, Budget(), ())
    assert "3112 (1408 input tokens from the prompt cache)" in out.getvalue()
    out = io.StringIO()
    render.summary(Console(file=out, width=120), {**result, "usage": {"tokens": 9}}, Budget(), ())
    assert "prompt cache" not in out.getvalue()


def test_the_hint_offers_only_the_answers_the_question_takes() -> None:
    """The outcome-unknown question takes no edit: the hint offered one, then refused it."""
    out = io.StringIO()
    question = {
        "kind": "outcome_unknown",
        "tool": "ledger__pay",
        "args": {"amount": 5},
        "review_configs": [
            {"action_name": "ledger__pay", "allowed_decisions": ["approve", "reject", "respond"]}
        ],
    }
    render.pending(
        Console(file=out, width=200), {"pending": [question]}, "gated-react resume t", ()
    )
    shown = out.getvalue()
    assert "--approve" in shown
    assert "--reject" in shown
    assert "--respond" in shown
    assert "--args" not in shown
    # before: headed "waiting for approval:", as if the call had never run
    assert shown.startswith("may have run already (its outcome is unknown); approving runs")


def test_the_summary_counts_tool_calls_as_the_budget_does() -> None:
    """usage.tool_calls, as --json says; not the history, which leaves out the call that stopped
    the run and holds every run of the thread."""
    out = io.StringIO()
    usage = {"steps": 1, "tool_calls": 1, "tokens": 9, "seconds": 0.1}
    result = {"status": "stopped", "stop_reason": "tool_outcome_unknown:pay", "usage": usage}
    render.summary(Console(file=out, width=120), {**result, "history": []}, Budget(), ())
    assert "tool calls   1/6" in out.getvalue()


def test_a_listing_lines_up_wide_characters_by_the_cells_they_take() -> None:
    """Before: widths counted characters, so a thread id with an emoji (two terminal cells)
    pushed the rest of its row one cell right of the others."""
    rows = [["run-🚀🚀", "ok"], ["run-abcd", "stopped"]]
    widths = render.widths(("thread", "status"), rows)
    lines = [render.row_line(row, widths, "") for row in rows]
    assert widths == [8, 7]
    assert [cell_len(line.split("  ")[0]) for line in lines] == [8, 8]


@pytest.mark.parametrize(
    "thread", ["plain-id", "it's", "a\nb", "tab\there", "esc\x1b[2J", "bidi\u202eevil", "wide🚀"]
)
def test_a_printed_thread_id_is_typed_back_exactly_by_the_shell(thread: str) -> None:
    """Before: a newline or a tab in a store's thread id printed as a space, so the command
    shown named another thread (and an escape printed raw would have reached the terminal)."""
    import subprocess

    word = render.shell_word(thread)
    assert not UNSAFE.search(word)
    assert "\n" not in word
    assert "\t" not in word
    typed = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, check=True)
    assert typed.stdout.decode() == thread
    assert "\n" not in render.ident(thread)
    assert "\t" not in render.ident(thread)
    assert render.ident("a\nb") == "a\\nb"


def test_runs_and_show_give_a_thread_id_with_a_newline_as_it_is(state_dir: Path) -> None:
    """A thread an app's program named with a newline (the CLI refuses such ids): ``runs``
    shows ``\\n``, not a space, and ``show`` names that thread as its program types it."""
    import ast

    thread = "pay\nsecond-line"
    asks = Policy(require_approval=["get_user_billing"])
    billing = AIMessage("", tool_calls=[{"name": "get_user_billing", "args": {"user_id": 42},
                                         "id": "c1"}])  # fmt: skip
    with open_checkpointer(str(state_dir / "runs.sqlite")) as saver:
        graph = build_graph(ScriptedChatModel(replies=[billing]), SUPPORT_TOOLS, policy=asks,
                            checkpointer=saver)  # fmt: skip
        run(graph, "x", thread_id=thread)
    listed = invoke("runs").stdout
    assert "pay\\nsecond-line" in listed
    assert "pay second-line" not in listed
    shown = invoke("show", thread).stdout
    (line,) = [line for line in shown.splitlines() if "was not started by" in line]
    word = line.split(" ")[1]  # thread 'THREAD' was not started ... (gated_react.resume)
    assert word == "'pay\\nsecond-line'"
    assert ast.literal_eval(word) == thread  # typed back into the program, it is the thread
