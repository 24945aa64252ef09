"""Postgres going away mid-run: the run's connection cut by ``pg_terminate_backend``, or the
whole server stopped with ``pg_ctl`` and started again. The run raises the driver's own error
(the CLI prints one line), the session lock dies with the connection, nothing stored is lost,
and ``resume`` on a new connection ends the run as an uninterrupted run ends."""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest

from gated_react import StoreError, open_checkpointer, run

from ..support.helpers import REFUND_GOAL
from ..support.openai_server import FakeOpenAI
from ..support.scenarios import graph_for, model_calls_again
from .clirun import as_run_after_a_fault, environment, here
from .outcomes import REFUND, Model, reference, resumed_as_expected, spec_for
from .storeenv import FAULT_POINTS, AtNode, Cluster, terminate_backends, with_password

pytestmark = pytest.mark.postgres
PASSWORD = "pg-Secret-Zq8rT3"  # trust auth accepts it; it must never be shown


def database(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def cut_run(spec: dict[str, Any], url: str, at: tuple[str, int], cut: Any) -> str:
    """Run with ``cut()`` called as the node ``at`` starts; the error the run raised. It is
    the driver's (or LangGraph's) error about the lost connection, never one raised by the
    thread lock trying to unlock on a dead connection, which used to mask it."""
    with open_checkpointer(url) as saver:
        graph = graph_for(spec, saver).with_config(callbacks=[AtNode(*at, cut)])
        with pytest.raises(psycopg.OperationalError) as raised:
            run(graph, REFUND_GOAL, thread_id="t")
    frames = traceback.extract_tb(raised.value.__traceback__)
    assert not [f for f in frames if f.filename.endswith("locks.py") and "_UNLOCK" in f.line]
    return str(raised.value)


@pytest.mark.parametrize(("script", "node", "occurrence"), FAULT_POINTS)
def test_a_lost_connection_mid_run(
    pg_url: str, tmp_path: Path, script: str, node: str, occurrence: int
) -> None:
    spec = spec_for(script, tmp_path)
    expected = reference(spec)

    def cut() -> None:
        assert terminate_backends(pg_url, database(pg_url)) >= 1

    cut_run(spec, pg_url, (node, occurrence), cut)
    with open_checkpointer(pg_url) as saver:
        resumed_as_expected(spec, saver, expected)


def test_a_server_restarted_mid_run(tmp_path: Path) -> None:
    """The server stops (fast shutdown) while the run is inside ``execute`` of step 2; while it
    is down opening the store is one line without the password; started again on the same
    port, the run resumes. Uses a private cluster: the shared one must stay up."""
    cluster = Cluster()
    try:
        url = with_password(cluster.url, PASSWORD)
        spec = spec_for("refund", tmp_path)
        expected = reference(spec)
        cut_run(spec, url, ("execute", 2), cluster.stop)
        with pytest.raises(StoreError) as down, open_checkpointer(url):
            pass
        assert "\n" not in str(down.value)
        assert "Connection refused" in str(down.value) or "connect" in str(down.value)
        assert PASSWORD not in str(down.value)
        cluster.start()
        with open_checkpointer(url) as saver:
            resumed_as_expected(spec, saver, expected)
    finally:
        cluster.close()


def test_the_cli_when_postgres_drops_its_connection(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the model thinks about step 2 every connection of the run's database is cut:
    ``gated-react run`` ends with one line and exit 1, ``resume`` finishes the run."""
    url = with_password(pg_url, PASSWORD)
    model = Model(REFUND, lambda: terminate_backends(pg_url, database(pg_url)))
    with FakeOpenAI(default=model) as server:
        environment(monkeypatch, tmp_path, server.base_url)
        done = here("run", "refund?", "--thread", "ref", "--db", url)
        assert done.code == 0, done.err
        expected = here("show", "ref", "--db", url, "--json").json()
        model.armed = True
        failed = here("run", "refund?", "--thread", "t", "--db", url)
        line = failed.one_error_line()
        assert failed.code == 1
        assert "the store failed during the run: " in line
        assert "gated-react resume t --toolkit support --db 'postgresql://postgres:***@" in line
        assert PASSWORD not in failed.out + failed.err
        resumed = here("resume", "t", "--toolkit", "support", "--db", url, "--json")
    assert resumed.code == 0, resumed.err
    assert as_run_after_a_fault(resumed.json()) == as_run_after_a_fault(expected)
    assert 0 <= model_calls_again(resumed.json(), expected) <= 1  # the reply the fault lost
