"""Driving one run (new or resumed): live view, run log, Ctrl-C, result and exit code."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console

from gated_react.cli import resources
from gated_react.cli.exits import CliError, Exit, user_errors
from gated_react.cli.live import render
from gated_react.cli.live.waiting import MODEL, Waiting, next_wait
from gated_react.errors import Unrecorded, exception_line, printable
from gated_react.records.events import Tracker
from gated_react.records.run_log import RunLog
from gated_react.records.store import store_failure
from gated_react.redact import redact

if TYPE_CHECKING:
    from gated_react.settings import Settings

Result = Mapping[str, Any]
"""A thread's result as ``run``, ``resume`` and ``read`` return it (``ThreadResult``)."""
Start = Callable[[Callable[[str, Any], None]], Result]


@dataclass(frozen=True, slots=True)
class Place:
    """Where runs are kept and how results are shown (``--db``, ``--log``, ``--json``)."""

    db: str | None = None
    log: Path | None = None
    no_log: bool = False
    json_out: bool = False
    again: Sequence[str] = ()
    """The run's options as flags, which ``resume`` must be given again (``RunOptions.flags``)."""

    def kept(self) -> bool:
        """Whether the store outlives this command (``--db memory`` does not: nothing could
        resume a run kept there)."""
        return resources.store_url(resources.settings(), self.db).strip() != "memory"

    def resume_hint(self, thread: str) -> str:
        """The command that continues ``thread`` with the same options, store and log."""
        parts = ["gated-react", "resume", thread, *self.again]
        if self.db:
            parts += ["--db", resources.shown(self.db)]
        if self.no_log:
            parts.append("--no-log")
        elif self.log is not None:
            parts += ["--log", str(self.log)]
        return render.shell_join(parts)


@dataclass
class Session:
    """One invocation that advances a thread."""

    tracker: Tracker
    budget: Any
    log: RunLog
    secrets: tuple[str, ...]
    place: Place
    console: Console = field(default_factory=render.console)

    def __post_init__(self) -> None:
        json_out = self.place.json_out
        self.view = None if json_out else render.LiveView(self.console, self.budget, self.secrets)
        self.waiting = Waiting(self.console)
        self.tracker.secrets = self.secrets

    def header(self, model: str, url: str) -> None:
        """Thread, model, store and log, before the live view (not with ``--json``)."""
        if self.place.json_out:
            return
        rows = [
            ("thread", self.tracker.thread),
            ("model", redact(model)),
            ("store", resources.shown(url)),
        ]
        if self.log.path is not None:
            rows.append(("log", str(self.log.path)))
        render.header(self.console, rows)

    def note(self, decision: str, **extra: Any) -> None:
        """A run-level event (started, resumed, interrupted, failed) in the log, with the
        counters of the run's record; without them when the record cannot be read (a store
        that just failed): what was spent stays in the record for a resume, and the note, and
        the way to resume said after it, must not be lost to that read."""
        try:
            event = self.tracker.make("run", decision=decision, **extra)
        except Exception:
            event = replace(self.tracker, saver=None).make("run", decision=decision, **extra)
        self.log.write(event.record())

    def on_update(self, node: str, update: Any) -> None:
        event = self.tracker.event(node, update)
        self.log.write(event.record())
        if self.view is not None:
            self.view.budget = render.in_force(self.budget, self.tracker.extensions)
            self.waiting.stop()
            self.view.show(event)
            self.waiting.start(next_wait(event))

    def drive(self, start: Start, first_wait: str | None = MODEL) -> Result:
        """Advance the thread; Ctrl-C or a failing store leave it saved and say how to go on.
        ``first_wait`` is what the run waits on before its first node finishes."""
        if self.view is not None:
            self.waiting.start(first_wait)
        signals: list[str] = []
        try:
            with user_errors(), _terminable(signals):
                try:
                    return start(self.on_update)
                except Unrecorded as exc:  # the store failed during a call: which command
                    self.note("failed", message=f"the store failed: {exception_line(exc)}")
                    hint = self.place.resume_hint(self.tracker.thread)
                    raise CliError(f"{exception_line(exc)} with: {hint}") from None
        except KeyboardInterrupt:
            how = signals[0] if signals else "Ctrl-C"
            self.note("interrupted", message=f"{how}; the run is saved and can be resumed")
            hint = self.place.resume_hint(self.tracker.thread)
            sys.stderr.write(
                f"\ninterrupted: the run is saved; continue it with: {printable(hint)}\n"
            )
            sys.stderr.flush()
            raise typer.Exit(int(Exit.INTERRUPTED)) from None
        except Exception as exc:  # disk full, read-only file, lost connection: steps kept
            line = store_failure(exc)
            if line is None:
                raise
            self.note("failed", message=f"the store failed: {line}")
            raise CliError(self._store_failed(line)) from None
        finally:
            self.waiting.stop()

    def _store_failed(self, line: str) -> str:
        """What to do after the store failed: resume the run, unless the thread holds nothing
        (a new thread whose first write was refused: a read-only store), which no resume
        finds."""
        thread = self.tracker.thread
        if self._recorded() is False:
            return (
                f"the store failed before the run stored anything: {line}; thread {thread!r} "
                "holds nothing to resume: make the store writable (its file permissions, free "
                "space or server) or give a writable one with --db, then run the goal again"
            )
        return (
            f"the store failed during the run: {line}; the steps stored before are kept; "
            f"continue once it works again with: {self.place.resume_hint(thread)}"
        )

    def _recorded(self) -> bool | None:
        """Whether the store holds a checkpoint of the thread; None when it cannot say."""
        from gated_react.runs import config_for

        try:
            return self.tracker.saver.get_tuple(config_for(self.tracker.thread)) is not None
        except Exception:  # a store that cannot be read either: the resume hint stays
            return None

    def finish(self, result: Result) -> Exit:
        """Print the result (JSON or summary) and return the exit code."""
        budget = render.in_force(self.budget, self.tracker.extensions)
        show(self.console, result, budget, self.secrets, self.place)
        return exit_code(result)


@contextmanager
def _terminable(signals: list[str]) -> Iterator[None]:
    """SIGTERM (``kill``, ``timeout``, systemd stopping a unit) taken as Ctrl-C while a run is
    driven: a ``KeyboardInterrupt``, with "SIGTERM" put in ``signals`` (it ended the process
    silently). Set in the main thread only: signal handlers live there."""

    def terminated(_signal: int, _frame: Any) -> None:
        signals.append("SIGTERM")
        raise KeyboardInterrupt

    try:
        before = signal.signal(signal.SIGTERM, terminated)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


@contextmanager
def logged(url: str, place: Place, config: Settings) -> Iterator[RunLog]:
    """The run log for this store and these flags (``RunLog(None)`` with ``--no-log``)."""
    with RunLog(resources.log_path(url, place.log, place.no_log), config.secrets()) as runlog:
        yield runlog


def show(
    console: Console, result: Result, budget: Any, secrets: tuple[str, ...], place: Place,
    *, elsewhere: str | None = None,
) -> None:  # fmt: skip
    """A result as JSON (``--json``) or as a summary, with the approval commands if paused
    (``elsewhere``: how a thread this CLI cannot answer is answered, said instead)."""
    if place.json_out:
        render.print_json(result, secrets)
        return
    render.summary(console, result, budget, secrets)
    if result.get("pending") and not place.kept():
        console.print(
            "[bold yellow]waiting for a human, but the store is memory:[/] the run ends with "
            "this command and cannot be resumed; run it with --db PATH to answer its question",
            soft_wrap=True,
        )
    elif result.get("pending") and elsewhere is not None:
        render.pending(console, result, None, secrets)
        console.print(render.safe(elsewhere, secrets), soft_wrap=True, highlight=False)
    elif result.get("pending"):
        render.pending(console, result, place.resume_hint(str(result.get("thread_id"))), secrets)


def exit_code(result: Result) -> Exit:
    """0 success, 2 policy stop, 3 model or tool failure, 4 waiting for approval."""
    from gated_react.stops import is_failure

    if result.get("pending"):
        return Exit.PAUSED
    reason = result.get("stop_reason")
    if result.get("status") == "ok":
        return Exit.OK
    if result.get("status") != "stopped" or not reason:
        return Exit.FAILURE
    try:
        return Exit.FAILURE if is_failure(reason) else Exit.POLICY
    except ValueError:  # a reason this version does not know
        return Exit.FAILURE
