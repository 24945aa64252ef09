"""The workers' log lines: one JSON object per line on stderr, secrets masked, nothing raw."""

from __future__ import annotations

import json
import logging

import pytest

from gated_react.workers import log


@pytest.fixture(autouse=True)
def _no_lost_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a test loses stays in the test (the lost connections are the process's)."""
    monkeypatch.setattr(log, "_LOST", {})


def _lines(capfd: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    err = capfd.readouterr().err
    assert err.endswith("\n")
    return [json.loads(line) for line in err.splitlines()]


def test_a_job_is_two_lines_with_the_fields_an_operator_needs(
    capfd: pytest.CaptureFixture[str],
) -> None:
    ids = log.JobIds("worker-1", 7, "thread-a", 12, 2)
    log.job_started(ids)
    log.job_ended(ids, outcome="ended", seconds=1.23456, stop_reason="success", tokens=99)
    started, ended = _lines(capfd)
    assert list(started)[:3] == ["time", "event", "worker"]
    assert {k: started[k] for k in ("event", "worker", "worker_id", "thread", "job")} == {
        "event": "job_started",
        "worker": "worker-1",
        "worker_id": 7,
        "thread": "thread-a",
        "job": 12,
    }
    assert started["attempt"] == 2
    assert ended["event"] == "job_ended"
    assert (ended["outcome"], ended["stop_reason"], ended["tokens"]) == ("ended", "success", 99)
    assert ended["seconds"] == 1.235
    assert "error" not in ended  # None fields are left out


def test_lines_mask_secrets_and_escape_control_characters(
    capfd: pytest.CaptureFixture[str],
) -> None:
    error = ConnectionError("cannot reach postgresql://app:hunter2@db/runs \x1b[2J\x9b")
    log.connection_lost("w", error)
    err = capfd.readouterr().err
    assert "hunter2" not in err
    assert "\x1b" not in err
    assert "\x9b" not in err
    line = json.loads(err)
    assert line["event"] == "connection_lost"
    assert line["error"].startswith("ConnectionError: cannot reach postgresql://app:")


def test_a_lost_connection_is_lost_until_it_is_back(capfd: pytest.CaptureFixture[str]) -> None:
    log.connection_lost("w", "server closed the connection", what="queue")
    assert set(log.lost()) == {"queue"}
    log.reconnected("w", what="queue", seconds=3.21, attempts=4)
    assert log.lost() == {}
    lost, back = _lines(capfd)
    assert (lost["what"], lost["error"]) == ("queue", "server closed the connection")
    assert (back["event"], back["seconds"], back["attempts"]) == ("reconnected", 3.21, 4)


def test_an_unknown_event_is_a_bug_not_a_line(capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="unknown worker event"):
        log.emit("job_exploded", "w")
    assert capfd.readouterr().err == ""


def test_library_warnings_become_log_lines(capfd: pytest.CaptureFixture[str]) -> None:
    """psycopg's pools and procrastinate warn through logging: as JSON lines, stderr stays one
    object per line."""
    handler = log.JsonLines("w")
    logger = logging.getLogger("psycopg.pool.test")
    logger.addHandler(handler)
    try:
        logger.warning("error connecting in %r: %s", "pool-1", "password=hunter2\nrefused")
        logger.info("below the level: not a line")
    finally:
        logger.removeHandler(handler)
    (line,) = _lines(capfd)
    assert (line["event"], line["logger"], line["level"]) == ("log", "psycopg.pool.test", "WARNING")
    assert line["message"].startswith("error connecting in 'pool-1': password=")
    assert "hunter2" not in line["message"]


BREAKS = "\u2028\u2029\x85\x0b\x0c\x1c\x1d\x1e\r"
"""Every character ``str.splitlines()`` breaks a line at, but ``\\n`` (JSON escapes it anyway)."""


def test_unicode_line_separators_in_a_thread_id_or_an_error_stay_in_one_line(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """U+2028 and U+2029 passed raw into the JSON (valid JSON, but a line break to
    ``splitlines()`` and to many log collectors): three events read as six."""
    thread = f"thread{BREAKS}a"
    ids = log.JobIds("w", 1, thread, 2, 1)
    log.job_started(ids)
    log.job_ended(ids, outcome="failed", seconds=1.0, error=f"ValueError: bad{BREAKS}input")
    log.connection_lost("w", f"store gone{BREAKS}again")
    err = capfd.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 3, lines
    started, ended, lost = (json.loads(line) for line in lines)
    assert started["thread"] == ended["thread"] == thread  # the same value, escaped
    assert ended["error"] == f"ValueError: bad{BREAKS}input"
    assert lost["error"] == f"store gone{BREAKS}again"
    assert not any(char in err for char in BREAKS)
