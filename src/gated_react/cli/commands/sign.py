"""``gated-react sign``: sign a store that exists with the first key of GATED_REACT_STORE_KEY:
the threads written before the key was set (``--unsigned``), and rows an older key signed, so
that key can be dropped. Nothing is signed over a row no key given verifies."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated

import typer

from gated_react.cli import flags, resources
from gated_react.cli.exits import CliError, user_errors
from gated_react.cli.live import render

if TYPE_CHECKING:
    from gated_react.store.signing import Signing

_NAMED = 10  # threads named in an error line; --json or --dry-run lists them all


def sign_command(
    *,
    unsigned: Annotated[
        bool,
        typer.Option(
            "--unsigned",
            help="Also sign the threads written without a key (do it once you trust the store "
            "as it is: their rows have no signature to check).",
        ),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Check every row and say what would be signed.")
    ] = False,
    db: flags.Db = None,
    json_out: flags.Json = False,
) -> None:
    """Sign the store with the first key of GATED_REACT_STORE_KEY (new key first, older after)."""
    from gated_react.store.signing import sign_store

    config = resources.settings()
    url = resources.store_url(config, db)
    if not config.store_keys():
        raise CliError(
            "no store key: set GATED_REACT_STORE_KEY to the key to sign with, then the older "
            "keys the store was signed with (new,old)"
        )
    with resources.opened(url, create=False) as saver, user_errors():
        report = sign_store(saver, unsigned=unsigned, dry_run=dry_run)
    secrets = config.secrets()
    if json_out:
        render.print_json({"dry_run": dry_run, **asdict(report)}, secrets)
    else:
        _print(report, dry_run, unsigned, resources.shown(url), secrets)
    _refuse(report, unsigned, dry_run)


def _print(
    report: Signing, dry_run: bool, unsigned: bool, where: str, secrets: tuple[str, ...]
) -> None:
    console = render.console()
    for thread, why in report.refused.items():
        console.print(f"[red]refused[/]  {render.safe(thread, secrets)}  {render.safe(why)}")
    if dry_run:
        for thread in report.unsigned_threads:
            console.print(f"[yellow]unsigned[/] {render.safe(thread, secrets)}")
    held = report.refused or (report.unsigned_threads and not unsigned)
    threads = _count(report.threads, "thread")
    rows = f"{report.unsigned} unsigned, {report.older} signed by an older key"
    if dry_run or held:
        said = f"checked {threads}: {rows}, {report.current} by the first key"
        if not held:
            said += f"; {report.older + unsigned * report.unsigned} rows would be signed"
    else:
        said = f"signed {_count(report.signed, 'row')} of {threads} ({rows}); "
        said += f"{report.current} were signed by the first key already"
        if not report.changed:
            said += "; no row is signed by an older key now: drop them from GATED_REACT_STORE_KEY"
    console.print(f"{render.safe(said)} in {render.safe(where)}", soft_wrap=True)


def _refuse(report: Signing, unsigned: bool, dry_run: bool) -> None:
    """Exit 1 with one line when something was (or would be) left unsigned."""
    if report.refused:
        raise CliError(
            f"{_threads(list(report.refused))} with rows no key in GATED_REACT_STORE_KEY "
            "verifies (edited, forged, or signed by a key not given); nothing was signed: give "
            "the key that signed them, or delete them (gated-react delete THREAD)"
        )
    if report.unsigned_threads and not unsigned:
        raise CliError(
            f"{_threads(report.unsigned_threads)} written without a store key; "
            f"nothing was signed{' (dry run)' if dry_run else ''}: add --unsigned to sign them "
            "too, once you trust the store as it is"
        )
    if report.changed:
        raise CliError(
            f"{_threads(report.changed)} changed while being signed: some of their rows are "
            "left as they were; run gated-react sign again"
        )


def _threads(threads: list[str]) -> str:
    named = ", ".join(repr(thread) for thread in threads[:_NAMED])
    more = f" and {len(threads) - _NAMED} more" if len(threads) > _NAMED else ""
    return f"{_count(len(threads), 'thread')} ({named}{more})"


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' * (n != 1)}"
