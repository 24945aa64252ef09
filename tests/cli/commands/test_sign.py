"""A store key turned on in a store that exists (issue 45): ``runs`` and ``questions`` list
threads their signature keeps from being read as such, a keyed thread read without a key says
so in one line, and ``gated-react sign`` signs the store (``--unsigned``: its threads written
without a key; older keys' rows after a rotation), refusing in one line, naming them, threads
with rows no key given verifies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ...support.cli import invoke
from ...support.openai_server import FakeOpenAI, reply, tool_call
from ...support.tamper import forge_metadata, misshape_latest, set_record_at, snapshot

KEY, OLD, OTHER = "k" * 32, "o" * 32, "x" * 32


def _pause(server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, thread: str, key: str) -> None:
    """``thread`` waits for an approval, written with ``key`` (empty: without a key)."""
    monkeypatch.setenv("GATED_REACT_STORE_KEY", key)
    server.push(tool_call("get_user_billing", user_id=42))
    out = invoke(
        "run", "refund for user 42?", "--approve-tool", "get_user_billing", "--thread", thread
    )
    assert out.exit_code == 4, out.stderr


ASKED = ("--approve-tool", "get_user_billing")
"""The options the paused runs were started with: an answer gives them again."""


def _listed(command: str) -> dict[str, dict[str, Any]]:
    out = invoke(command, "--json")
    assert out.exit_code == 0, out.stderr
    rows = json.loads(out.stdout)["runs" if command == "runs" else "questions"]
    return {row["thread_id"]: row for row in rows}


@pytest.fixture
def mixed(server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, state_dir: Path) -> Path:
    """Paused threads written without a key, with KEY, and with another key."""
    _pause(server, monkeypatch, "plain", "")
    _pause(server, monkeypatch, "keyed", KEY)
    _pause(server, monkeypatch, "foreign", OTHER)
    return state_dir / "runs.sqlite"


def test_listings_show_threads_their_signature_keeps_from_being_read(
    mixed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: with the key set, ``runs`` and ``questions`` failed whole (exit 1) on the first
    unsigned thread; without it, ``questions`` failed on a keyed one."""
    monkeypatch.setenv("GATED_REACT_STORE_KEY", KEY)
    for command in ("runs", "questions"):
        rows = _listed(command)
        assert {t: r["status"] for t, r in rows.items()} == {
            "plain": "unsigned", "keyed": "paused", "foreign": "unverified",
        }  # fmt: skip
        assert "gated-react sign --unsigned" in rows["plain"]["problem"]
        assert rows["keyed"]["problem"] is None
    table = invoke("runs").stdout
    assert [line.split()[:2] for line in table.splitlines()[1:4]] == [
        ["foreign", "unverified"], ["keyed", "paused"], ["plain", "unsigned"],
    ]  # fmt: skip
    assert "(unsigned)" in invoke("questions").stdout
    assert invoke("runs", "--status", "unsigned", "--json").stdout.count("thread_id") == 1
    monkeypatch.delenv("GATED_REACT_STORE_KEY")
    statuses = {t: r["status"] for t, r in _listed("questions").items()}
    assert statuses == {"plain": "paused", "keyed": "keyed", "foreign": "keyed"}


def test_a_keyed_thread_read_without_a_key_says_a_key_is_needed(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: "the store is damaged" (NotImplementedError: Unsupported message type)."""
    _pause(server, monkeypatch, "keyed", KEY)
    monkeypatch.delenv("GATED_REACT_STORE_KEY")
    for command in (("show", "keyed"), ("answer", "keyed", *ASKED, "--approve")):
        out = invoke(*command)
        assert out.exit_code == 1
        assert out.stderr.count("\n") == 1
        assert "signed with a store key" in out.stderr
        assert "set GATED_REACT_STORE_KEY" in out.stderr
        assert "damaged" not in out.stderr
    assert len(server.requests) == 1


def test_sign_adopts_a_store_and_its_paused_run_is_answered(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: a run paused without a key could never be answered once the key was set."""
    _pause(server, monkeypatch, "plain", "")
    monkeypatch.setenv("GATED_REACT_STORE_KEY", KEY)
    assert invoke("answer", "plain", *ASKED, "--approve").exit_code == 1
    refused = invoke("sign")
    assert refused.exit_code == 1
    assert "1 thread ('plain') written without a store key" in refused.stderr
    assert "--unsigned" in refused.stderr
    signed = invoke("sign", "--unsigned")
    assert signed.exit_code == 0, signed.stderr
    assert "signed " in signed.stdout
    server.push(reply("USD 49"))
    done = invoke("answer", "plain", *ASKED, "--approve", "--json")
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["answer"] == "USD 49"


def test_sign_after_a_rotation_lets_the_old_key_go(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pause(server, monkeypatch, "rotated", OLD)
    monkeypatch.setenv("GATED_REACT_STORE_KEY", f"{KEY},{OLD}")
    dry = json.loads(invoke("sign", "--dry-run", "--json").stdout)
    assert dry["older"] > 0
    assert dry["signed"] == 0
    assert invoke("sign").exit_code == 0
    monkeypatch.setenv("GATED_REACT_STORE_KEY", KEY)
    assert _listed("runs")["rotated"]["status"] == "paused"
    server.push(reply("USD 49"))
    assert invoke("answer", "rotated", *ASKED, "--approve").exit_code == 0


def test_sign_refuses_in_one_line_naming_the_rows_no_key_verifies(
    mixed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{mixed}"
    forge_metadata(url, "keyed", "source", "loop")
    before = snapshot(url)
    monkeypatch.setenv("GATED_REACT_STORE_KEY", KEY)
    out = invoke("sign", "--unsigned")
    assert out.exit_code == 1
    assert out.stderr.count("\n") == 1
    assert "2 threads ('foreign', 'keyed') with rows no key" in out.stderr
    assert "nothing was signed" in out.stderr
    listed = {line.split()[1] for line in out.stdout.splitlines() if line.startswith("refused")}
    assert listed == {"foreign", "keyed"}
    assert snapshot(url) == before


def test_sign_without_a_key_is_one_line(state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GATED_REACT_STORE_KEY", raising=False)
    out = invoke("sign")
    assert out.exit_code == 1
    assert "no store key: set GATED_REACT_STORE_KEY" in out.stderr


@pytest.mark.parametrize("damage", ["checkpoint", "metadata", "record"])
def test_a_thread_edited_into_another_shape_is_one_line_and_listings_go_on(
    mixed: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    """A row of the keyed thread made JSON ``null``, or a record's time made text. Before:
    ``sign`` printed an ``AttributeError`` or ``ValueError`` traceback, and ``runs`` and
    ``questions`` failed whole (exit 1) on that thread."""
    url = f"sqlite:///{mixed}"
    if damage == "record":
        assert set_record_at(mixed, "keyed", "opened", "not a time") == 1
    else:
        misshape_latest(url, "keyed", damage)
    before = snapshot(url)
    monkeypatch.setenv("GATED_REACT_STORE_KEY", KEY)
    out = invoke("sign", "--unsigned")
    assert out.exit_code == 1, out.stdout + out.stderr
    assert out.stderr.count("\n") == 1
    assert "nothing was signed" in out.stderr
    listed = {line.split()[1] for line in out.stdout.splitlines() if line.startswith("refused")}
    assert listed == {"foreign", "keyed"}
    assert snapshot(url) == before
    if damage == "record":  # the thread reads: only that record does not verify
        return
    for command in ("runs", "questions"):
        rows = _listed(command)
        assert {t: r["status"] for t, r in rows.items()} == {
            "plain": "unsigned", "keyed": "unverified", "foreign": "unverified",
        }  # fmt: skip
    shown = invoke("show", "keyed")
    assert shown.exit_code == 1
    assert shown.stderr.count("\n") == 1
    assert "edited or damaged" in shown.stderr
