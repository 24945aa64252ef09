"""``gated-react questions`` and ``gated-react answer``: every run waiting on a human, and the
answer that continues it: on the workers for a run of theirs, else in this shell."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph_sdk.client import LangGraphClient

from gated_react import Policy, build_graph, open_checkpointer, read, resume, run
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS
from gated_react.workers import enqueue_run, install_queue, make_app

from ...support.cli import invoke, spawn
from ...support.helpers import REFUND_GOAL
from ...support.openai_server import FakeOpenAI, reply, tool_call
from ...support.reaping import PATIENCE
from ...support.scenarios import graph_for
from ...support.studio_server import DevServer, drive
from ...support.worker_graphs import LOG_VAR
from ...support.worker_procs import fleet, until
from ...test_workers import scripted

ASKING = "tests.support.worker_graphs:refund_asking_once"
AGAIN = ("--approve-tool", "get_user_billing")
"""The options of the runs ``_pause`` starts, which an answer continuing one here gives again."""
RUNS = 10


def _questions(*args: str) -> list[dict[str, Any]]:
    out = invoke("questions", "--json", *args)
    assert out.exit_code == 0, out.stderr
    return json.loads(out.stdout)["questions"]  # type: ignore[no-any-return]


def _pause(server: FakeOpenAI, thread: str, *script: object) -> None:
    server.push(tool_call("get_user_billing", user_id=42), *script)  # type: ignore[arg-type]
    out = invoke(
        "run", "refund for user 42?", "--approve-tool", "get_user_billing", "--thread", thread
    )
    assert out.exit_code == 4, out.stdout


def test_the_table_shows_the_arguments_whole_at_normal_width(server: FakeOpenAI) -> None:
    """Before: at 80 columns the arguments were cut to 20 characters (``{"query": "refund pol``),
    the one thing an approver must read."""
    query = "refund policy for a pro monthly plan paid ten days ago, with the amount"
    server.push(tool_call("search_policy", query=query))
    out = invoke("run", "refund?", "--approve-tool", "search_policy", "--thread", "wide")
    assert out.exit_code == 4, out.stdout
    table = invoke("questions").stdout
    assert query in " ".join(line.strip() for line in table.splitlines())


def test_questions_lists_the_waiting_runs_and_answer_resumes_one_here(
    server: FakeOpenAI,
) -> None:
    _pause(server, "first")
    _pause(server, "second")
    listed = _questions()
    assert [(q["thread_id"], q["tool"], q["args"]) for q in listed] == [
        ("first", "get_user_billing", {"user_id": 42}),
        ("second", "get_user_billing", {"user_id": 42}),
    ]  # the longest waiting first
    assert all(len(q["question"]) == 32 and q["since"] and q["step"] == 1 for q in listed)
    table = invoke("questions")
    assert "get_user_billing" in table.stdout
    assert "2 waiting in" in table.stdout
    server.push(reply("USD 49"))
    done = invoke("answer", "first", *AGAIN, "--approve", "--json")  # no queue: resumed here
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["answer"] == "USD 49"
    assert [q["thread_id"] for q in _questions()] == ["second"]
    asked = listed[1]["question"]
    rejected = invoke("answer", "second", *AGAIN, "--reject", "no", "--question", asked)
    assert rejected.exit_code == 2
    assert _questions() == []
    assert "no run waits on a question" in invoke("questions").stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([], "give the answer: --approve, --reject WHY"),
        (["--approve", "--reject", "no"], "use only one of --approve, --reject"),
        (["--approve", "--question", "nope"], "does not wait on question 'nope'"),
        (["--answer", "[1]"], "--answer must be a JSON object"),
    ],
)
def test_a_bad_answer_is_one_line_and_nothing_runs(
    server: FakeOpenAI, args: list[str], says: str
) -> None:
    _pause(server, "t")
    out = invoke("answer", "t", *args)
    assert out.exit_code == 1
    assert says in out.stderr
    assert out.stderr.count("\n") == 1
    assert len(server.requests) == 1
    assert len(_questions()) == 1


def test_an_ended_or_unknown_thread_is_one_line(server: FakeOpenAI) -> None:
    _pause(server, "t", reply("USD 49"))
    assert invoke("answer", "t", *AGAIN, "--approve").exit_code == 0
    ended = invoke("answer", "t", "--approve")
    assert ended.exit_code == 1
    assert "has ended (success); nothing to approve" in ended.stderr
    unknown = invoke("answer", "nobody", "--approve")
    assert unknown.exit_code == 1
    assert unknown.stderr.count("\n") == 1


def test_questions_are_shown_escaped_and_masked(server: FakeOpenAI) -> None:
    hostile = "refund \x1b]0;pwned\x07\x1b[2J sk-proj-abcdefghijklmnopqrstuvwxyz0123"
    server.push(tool_call("search_policy", query=hostile))
    out = invoke("run", "policy?", "--approve-tool", "search_policy", "--thread", "evil")
    assert out.exit_code == 4
    for listing in (invoke("questions").stdout, invoke("questions", "--json").stdout):
        assert "\x1b" not in listing
        assert "\x07" not in listing
        assert "abcdefghijklmnopqrstuvwxyz0123" not in listing


def _threads_done(url: str, threads: list[str]) -> bool:
    with open_checkpointer(url) as saver:
        graph = graph_for({}, saver)
        return all(read(graph, thread)["status"] == "ok" for thread in threads)


@pytest.mark.postgres
def test_ten_runs_on_workers_are_answered_from_the_cli_and_finish_on_the_workers(
    pg_url: str, tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decisions = tmp_path / "decisions.tsv"
    monkeypatch.setenv(LOG_VAR, str(decisions))
    monkeypatch.setenv("GATED_REACT_DB", pg_url)
    threads = [f"ask-{n}" for n in range(RUNS)]
    install_queue(pg_url)
    app = make_app(pg_url)
    with app.open():
        for thread in threads:
            enqueue_run(app, f"{REFUND_GOAL} ({thread})", thread_id=thread)
    (tmp_path / "asking").mkdir()
    with fleet(pg_url, ASKING, 3, tmp_path / "asking") as workers:
        until(lambda: len(_questions()) == RUNS, "every run waits")
    listed = _questions()
    assert sorted(q["thread_id"] for q in listed) == threads
    assert {q["tool"] for q in listed} == {"get_user_billing"}
    assert {q["started_by"] for q in listed} == {"workers"}  # answered through the queue
    shell = invoke("resume", threads[0], "--approve")  # resume would run it here: refused
    assert shell.exit_code == 1
    assert f"is run by the workers: answer its question with gated-react answer {threads[0]}" in (
        shell.stderr
    )
    # No worker runs now: each answer is queued for the fleet, none resumes in this shell.
    for question in listed:
        out = invoke("answer", question["thread_id"], "--approve", "--json")
        assert out.exit_code == 0, out.stderr
        queued = json.loads(out.stdout)
        assert queued["queued"] is True
        assert queued["question"] == question["question"]
    again = invoke("answer", threads[0], "--approve")
    assert again.exit_code == 1
    assert "is answered already" in again.stderr
    assert _questions() == listed  # answered, not yet run: still waiting in the store
    waiting = json.loads(invoke("queue", "--json").stdout)
    assert waiting["counts"]["queued"] == RUNS
    assert {job["kind"] for job in waiting["jobs"]} == {"answer"}
    assert not decisions.exists()
    (tmp_path / "finishing").mkdir()
    with fleet(pg_url, ASKING, 3, tmp_path / "finishing") as workers:
        until(lambda: _threads_done(pg_url, threads), "every run finished")
        ends = [line for worker in workers for line in worker.events("job_ended")]
    assert sorted(line["thread"] for line in ends) == threads
    assert {(line["outcome"], line["stop_reason"]) for line in ends} == {("ended", "success")}
    with open_checkpointer(pg_url) as saver:
        graph = graph_for({}, saver)
        assert all(scripted(read(graph, thread)) for thread in threads)
    assert len(decisions.read_text().splitlines()) == RUNS  # each answered once, on a worker
    assert _questions() == []


def _blocked_on_the_queue(url: str) -> int:
    """Sessions waiting to write procrastinate's jobs table."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks"
            " WHERE relation = 'procrastinate_jobs'::regclass AND NOT granted"
        ).fetchone()
    return int(row[0]) if row else 0


@pytest.mark.postgres
def test_two_answers_at_once_queue_one_job_and_the_second_is_refused(
    pg_url: str, tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both ``answer`` calls checked for a queued answer, found none, and both queued one (the
    check and the enqueue were two steps): the table is held so both reach the enqueue after
    their check, as two operators answering at once would."""
    monkeypatch.setenv(LOG_VAR, str(tmp_path / "decisions.tsv"))
    monkeypatch.setenv("GATED_REACT_DB", pg_url)
    install_queue(pg_url)
    app = make_app(pg_url)
    with app.open():
        enqueue_run(app, REFUND_GOAL, thread_id="twice")
    with fleet(pg_url, ASKING, 1, tmp_path):
        until(lambda: len(_questions()) == 1, "the run waits")
    shown = invoke("show", "twice").stdout  # before: offered a resume, which refuses it
    assert "  approve: gated-react answer twice --question " in shown
    assert "gated-react resume" not in shown
    with psycopg.connect(pg_url) as holder:
        holder.execute("LOCK TABLE procrastinate_jobs IN SHARE ROW EXCLUSIVE MODE")
        answers = [spawn("answer", "twice", "--approve") for _ in range(2)]
        until(lambda: _blocked_on_the_queue(pg_url) == 2, "both answers at the enqueue")
    outs = [proc.communicate(timeout=PATIENCE) for proc in answers]
    codes = sorted(proc.returncode for proc in answers)
    assert codes == [0, 1], outs
    refused = next(err for (_, err), proc in zip(outs, answers, strict=True) if proc.returncode)
    assert "is answered already (job " in refused
    assert refused.count("\n") == 1
    jobs = json.loads(invoke("queue", "--json", "--thread", "twice").stdout)["jobs"]
    assert [job["kind"] for job in jobs if job["status"] == "queued"] == ["answer"]


def test_each_thread_says_how_it_is_answered_and_answer_is_never_offered_where_it_refuses(
    server: FakeOpenAI, state_dir: Path
) -> None:
    """A thread a program started beside one of the CLI: the listing offered ``gated-react
    answer`` for both, and ``answer`` refused the program's ("not started by the gated-react
    CLI")."""
    _pause(server, "from-cli")
    with open_checkpointer(str(state_dir / "runs.sqlite")) as saver:
        model = ScriptedChatModel(replies=[call("get_user_billing", user_id=42)])
        asks = Policy(require_approval=frozenset({"get_user_billing"}))
        graph = build_graph(model, SUPPORT_TOOLS, policy=asks, checkpointer=saver)
        assert run(graph, "refund?", thread_id="from-lib")["status"] == "paused"
    lines = invoke("questions").stdout.splitlines()
    (cli_row,) = [line for line in lines if line.startswith("from-cli")]
    (lib_row,) = [line for line in lines if line.startswith("from-lib")]
    assert cli_row.rstrip().endswith("gated-react answer")
    assert lib_row.rstrip().endswith("its program")
    footer = "\n".join(lines[-3:])
    here = "those answered with gated-react answer: gated-react answer THREAD --question ID"
    assert here in footer
    assert "a thread a program started is answered by that program: gated_react.resume(" in footer
    by_thread = {q["thread_id"]: q for q in _questions()}
    assert {t: (q["started_by"], q["assistant_id"]) for t, q in by_thread.items()} == {
        "from-cli": ("cli", None),
        "from-lib": ("program", None),
    }
    refused = invoke("answer", "from-lib", "--approve")
    assert refused.exit_code == 1
    assert "not started by the gated-react CLI" in refused.stderr


@pytest.mark.studio
def test_a_thread_of_langgraph_dev_is_listed_as_answered_through_the_langgraph_sdk(
    dev: DevServer, studio_model: FakeOpenAI, state_dir: Path
) -> None:
    """``langgraph dev`` on the same store: its paused thread was listed with ``gated-react
    answer``, which refused it. The listing now names the way that works (the LangGraph SDK,
    with the assistant), and that way answers it."""
    studio_model.push(tool_call("get_user_billing", user_id=42), reply("USD 49"))

    async def paused(client: LangGraphClient) -> tuple[str, str]:
        context = {"require_approval": ["get_user_billing"]}
        aid = (await client.assistants.create(graph_id="refund", context=context))["assistant_id"]
        tid = (await client.threads.create())["thread_id"]
        await client.runs.wait(tid, aid, input={"goal": "User 42: can I get a refund?"})
        return str(aid), str(tid)

    aid, tid = drive(dev, paused)
    db = str(dev.workdir / "runs.sqlite")
    table = invoke("questions", "--db", db).stdout
    assert "gated-react answer" not in table  # every thread of this store is the server's
    assert "answered there: in Studio, or with the LangGraph SDK: client.runs.create(" in table
    (listed,) = [q for q in _questions("--db", db) if q["thread_id"] == tid]
    assert (listed["started_by"], listed["assistant_id"]) == ("langgraph", aid)
    refused = invoke("answer", tid, "--approve", "--db", db)
    assert refused.exit_code == 1
    assert f"client.runs.create({tid!r}, {aid!r}, command=" in refused.stderr

    async def answered(client: LangGraphClient) -> Any:
        return await client.runs.wait(tid, aid, command={"resume": {"approved": True}})

    assert drive(dev, answered)["stop_reason"] == "success"
    assert [q for q in _questions("--db", db) if q["thread_id"] == tid] == []


def test_a_call_that_may_have_run_says_so_in_the_listing(state_dir: Path) -> None:
    """Before: a question about a call a crash cut off looked like any approval, and
    approving it ran the payment a second time."""
    from langchain_core.tools import tool

    ran: list[int] = []

    @tool
    def pay(amount: int) -> str:
        """Pay an amount."""
        ran.append(amount)
        if len(ran) == 1:
            raise KeyboardInterrupt("the process dies while the payment is made")
        return "paid"

    asks = Policy(require_approval=frozenset({"pay"}))
    with open_checkpointer(str(state_dir / "runs.sqlite")) as saver:
        model = ScriptedChatModel(replies=[call("pay", amount=9), "Paid."])
        graph = build_graph(model, [pay], policy=asks, checkpointer=saver)
        assert run(graph, "pay 9", thread_id="cut")["status"] == "paused"
        with pytest.raises(KeyboardInterrupt):
            resume(graph, "cut", {"approved": True})
        assert resume(graph, "cut")["pending"][0]["kind"] == "outcome_unknown"
    shown = invoke("questions").stdout
    assert "may have run already: it started before its run was cut off" in shown
    assert ran == [9]
