"""A full disk under the store. Real where this machine allows it (a size-limited tmpfs, filled
at a chosen node of a run in another process or of the CLI), simulated everywhere (a saver whose
writes fail with SQLite's own error from the N-th on, for every N a run has). The run fails with
one clear error; what was stored stays readable; once space returns, ``resume`` ends the run
exactly as an uninterrupted run ends, and a non-idempotent tool never runs twice."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from gated_react import open_checkpointer, read, resume, run
from gated_react._engine.authority.records import Kind

from ..support.helpers import REFUND_GOAL
from ..support.openai_server import FakeOpenAI
from ..support.procs import children
from ..support.reaping import PATIENCE
from ..support.scenarios import comparable, graph_for, model_calls_again, without_ids
from .clirun import as_run_after_a_fault, environment, gated_react, here
from .outcomes import (
    REFUND,
    SCRIPTS,
    Model,
    check_ending,
    reference,
    replies_lost,
    resumed_as_expected,
    spec_for,
)
from .storeenv import DISK_FULL, FAULT_POINTS, FillsUp, fill, tmpfs

WRITE_FAILED = f"OperationalError: {DISK_FULL}"


def faulted_run(spec: dict[str, Any], url: str, after: int) -> dict[str, Any] | None:
    """The run with its writes failing from write ``after + 1`` on; None if one failed."""
    with open_checkpointer(url) as saver:
        disk = FillsUp(saver, after)
        try:
            return run(graph_for(spec, saver), REFUND_GOAL, thread_id="t")
        except sqlite3.OperationalError as exc:
            failed = exc
    assert disk.full
    assert str(failed) == DISK_FULL
    return None


@pytest.mark.parametrize("script", list(SCRIPTS))
def test_a_disk_that_fills_up_at_any_write(script: str, tmp_path: Path) -> None:
    """Every write of the run in turn is the first one that fails."""
    spec = spec_for(script, tmp_path)
    expected = reference(spec)
    endings: dict[str, int] = {}
    for after in range(1000):
        url = f"sqlite:///{tmp_path / f'runs-{after}.sqlite'}"
        finished = faulted_run(spec, url, after)
        if finished is not None:  # no write failed: every write point has been tried
            assert comparable(finished) == comparable(expected)
            break
        with open_checkpointer(url) as saver:
            ending = resumed_as_expected(spec, saver, expected)
        endings[ending] = endings.get(ending, 0) + 1
        if spec.get("file"):
            Path(spec["file"]).unlink(missing_ok=True)
    assert after > 10
    print(f"\n{script}: the disk filled up at each of its {after} writes in turn: {endings}")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "mnt", "8m") as mnt:
        yield mnt


@pytest.mark.parametrize(("script", "node", "occurrence"), FAULT_POINTS)
def test_a_real_disk_fills_up_inside_a_node(
    small_disk: Path, tmp_path: Path, script: str, node: str, occurrence: int
) -> None:
    """The disk is filled while another process is inside ``node``; it goes on and fails at
    its next write. A resume on the full disk fails the same way; once space returns the run
    ends as if nothing had happened."""
    spec = spec_for(script, tmp_path)
    expected = reference(spec)
    url = f"sqlite:///{small_disk / 'runs.sqlite'}"
    with children(tmp_path) as kids:
        inside, go_on = kids.path("inside"), kids.path("go-on")
        block = {"node": node, "occurrence": occurrence, "marker": inside, "release": go_on}
        first = kids.start(url, "t", "run", block=block, **spec)
        first.wait_for(inside)
        filler = fill(small_disk)
        Path(go_on).touch()
        assert first.outcome() == {"error": WRITE_FAILED}
        assert kids.start(url, "t", "resume", **spec).outcome() == {"error": WRITE_FAILED}
        with open_checkpointer(url) as saver:
            kept = read(graph_for(spec, saver), "t")["history"]
        assert without_ids(kept) == without_ids(expected["history"])[: len(kept)]
        filler.unlink()
        out = kids.start(url, "t", "resume", **spec).result()
    check_ending(spec, out, expected)


def test_the_cli_on_a_disk_that_fills_up(
    small_disk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``gated-react run`` with its store and run log on a disk that fills up while the model
    thinks about step 2: one error line (after a warning about the log), exit 1; once space
    returns, ``gated-react resume`` ends the run as an uninterrupted one ends."""
    filled: list[Path] = []
    model = Model(REFUND, lambda: filled.append(fill(small_disk)))
    with FakeOpenAI(default=model) as server:
        env = environment(monkeypatch, tmp_path, server.base_url)
        expected = reference_cli(tmp_path / "reference.sqlite")
        db = str(small_disk / "runs.sqlite")
        model.armed = True
        failed = gated_react(env, "run", "refund?", "--thread", "t", "--db", db, "--json")
        assert filled, "the disk was never filled"
        assert (failed.code, failed.out) == (1, "")
        assert "Traceback" not in failed.err
        *warnings, error = failed.err.strip().splitlines()
        assert error.startswith(f"gated-react: error: the store failed during the run: {DISK_FULL}")
        hint = (
            f"continue once it works again with: gated-react resume t --toolkit support --db {db}"
        )
        assert error.endswith(hint)  # the options it ran under, given again: never read back
        assert all(w.startswith("gated-react: warning: cannot write the run log") for w in warnings)
        kept = here("show", "t", "--db", db, "--json").json()["history"]
        assert without_ids(kept) == without_ids(expected["history"])[: len(kept)]
        filled[0].unlink()
        resumed = gated_react(env, "resume", "t", "--toolkit", "support", "--db", db, "--json")
    assert resumed.code == 0, resumed.err
    assert as_run_after_a_fault(resumed.json()) == as_run_after_a_fault(expected)
    assert 0 <= model_calls_again(resumed.json(), expected) <= 1  # the reply the fault lost


def reference_cli(db: Path) -> dict[str, Any]:
    """The uninterrupted CLI run (in this process), as ``show --json`` reports it."""
    done = here("run", "refund?", "--thread", "t", "--db", str(db))
    assert done.code == 0, done.err
    return here("show", "t", "--db", str(db), "--json").json()


def test_the_cli_when_the_store_fails_mid_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same without privileges: SQLite's writes fail from the fifth on (in this process).
    Before: the steps the resume replayed were in the trace twice (the model server gives the
    replayed calls new ids, and the lost branch's permits stayed counted): 5 calls for the
    history's 3, and ``max_tool_calls`` charged 5."""
    with FakeOpenAI(default=Model(REFUND, lambda: None)) as server:
        environment(monkeypatch, tmp_path, server.base_url)
        expected = reference_cli(tmp_path / "reference.sqlite")
        asked = len(server.requests)
        db = str(tmp_path / "runs.sqlite")
        with monkeypatch.context() as patch:
            patch.setattr(SqliteSaver, "put", full_after(SqliteSaver.put, 5))
            failed = here("run", "refund?", "--thread", "t", "--db", db)
        line = failed.one_error_line()
        assert failed.code == 1
        assert f"the store failed during the run: {DISK_FULL}" in line
        assert "the steps stored before are kept" in line
        resumed = here("resume", "t", "--toolkit", "support", "--db", db, "--json")
    assert resumed.code == 0, resumed.err
    assert as_run_after_a_fault(resumed.json()) == as_run_after_a_fault(expected)
    # Only the checkpoints failed: the run's record went on, and so did the run, until the
    # failure surfaced (LangGraph stores checkpoints in the background). Every model call the
    # server answered, the replies lost with the checkpoints included, is in the run's usage.
    assert model_calls_again(resumed.json(), expected) >= 0
    assert resumed.json()["usage"]["steps"] == len(server.requests) - asked


def full_after(put: Any, writes: int) -> Any:
    done = [0]

    def failing(*args: Any, **kwargs: Any) -> Any:
        done[0] += 1
        if done[0] > writes:
            raise sqlite3.OperationalError(DISK_FULL)
        return put(*args, **kwargs)

    return failing


def test_a_run_log_that_cannot_be_written_does_not_stop_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store holds the run; the log only echoes it: ``/dev/full`` as the log (every write
    would fail with ENOSPC; as a device it is refused before any write) gives one warning and
    the run ends normally."""
    with FakeOpenAI(default=Model(REFUND, lambda: None)) as server:
        environment(monkeypatch, tmp_path, server.base_url)
        db = str(tmp_path / "runs.sqlite")
        out = here("run", "refund?", "--thread", "t", "--db", db, "--log", "/dev/full", "--json")
    assert out.code == 0, out.err
    assert out.json()["stop_reason"] == "success"
    assert out.err == (
        "gated-react: warning: the run log /dev/full is not a regular file; going on without it\n"
    )


class Lagging(FillsUp):
    """Under LangGraph's async durability the checkpoints and pending writes are written in
    the background and nothing waits for them: here all are held back after the first
    checkpoint (as a loaded machine's writer may fall behind) while the run pays ``paid``
    model calls; the next one's payment is where the disk fills up, and the held writes fail."""

    def __init__(self, saver: Any, paid: int) -> None:
        super().__init__(saver, after=10**9)
        self.paid, self.first, self.released = paid, threading.Event(), threading.Event()

    def put(self, *args: Any, **kwargs: Any) -> Any:
        if self.first.is_set():
            self.released.wait(PATIENCE)
        try:
            return super().put(*args, **kwargs)
        finally:
            self.first.set()

    def put_writes(self, *args: Any, **kwargs: Any) -> Any:
        self.released.wait(PATIENCE)
        return super().put_writes(*args, **kwargs)

    def insert(self, records: Any) -> Any:
        self.first.wait(PATIENCE)  # the thread is stored before its first model call
        if any(r.kind is Kind.PAID for r in records):
            self.paid -= 1
            if self.paid < 0:
                self.after, self.full = 0, True
                self.released.set()
        return super().insert(records)


def test_a_fault_behind_lagging_checkpoint_writes_asks_each_lost_reply_again_once(
    tmp_path: Path,
) -> None:
    """Three model calls made while the checkpoints after them were still to be written: the
    resume asks each again once, and the run's usage counts both the lost calls and their
    repeats (what was paid for), never a step twice in its history."""
    spec = spec_for("refund", tmp_path)
    expected = reference(spec)
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    with open_checkpointer(url) as saver:
        lagging = Lagging(saver, paid=2)
        with pytest.raises(sqlite3.OperationalError, match=DISK_FULL):
            run(graph_for(spec, saver), REFUND_GOAL, thread_id="t")
    with open_checkpointer(url) as saver:
        graph = graph_for(spec, saver)
        lost = replies_lost(graph)
        out = resume(graph, "t")
    assert lagging.full
    assert lost == 3  # not one at most: LangGraph does not wait for its background writes
    assert comparable(out)["history"] == comparable(expected)["history"]
    assert model_calls_again(out, expected) == lost
