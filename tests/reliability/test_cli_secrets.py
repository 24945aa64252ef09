"""No secret in anything the CLI writes. With ``OPENAI_API_KEY`` set and a Postgres URL with a
password as ``--db``, the CLI (in this process and as a real process) goes through a success, a
model 401 that echoes the key, store errors, ``show``, ``runs`` and ``resume``: neither the key
nor the password appears in stdout, stderr, the run log, the ``--json`` results or the stored
checkpoints (every byte of the SQLite files, every row of the Postgres tables)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..support.openai_server import FakeOpenAI, Status
from .clirun import Done, environment, gated_react, here
from .outcomes import REFUND
from .storeenv import with_password

KEY = "gr-local-key-7c41f09e2b5d"  # not shaped like a known key: only the CLI knows it is one
PASSWORD = "pw-Zq8rT3vLx9Kd"
ECHO = f"Incorrect API key provided: {KEY}. Find your key in your account settings."
GOAL = "User 42 asked: can I get a refund now? Answer with the USD amount."


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The ``--db`` value: a SQLite file, or a fresh Postgres database with a password in it."""
    if request.param == "sqlite":
        yield str(tmp_path / "runs.sqlite")
    else:
        yield with_password(request.getfixturevalue("pg_url"), PASSWORD)


def stored_bytes(db: str) -> bytes:
    """Everything the store holds, as bytes."""
    if not db.startswith("postgresql://"):
        files = [Path(db + suffix) for suffix in ("", "-wal")]
        return b"".join(f.read_bytes() for f in files if f.exists())
    import psycopg
    from psycopg import sql

    found = bytearray()
    with psycopg.connect(db) as conn:
        tables = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        for (table,) in tables.fetchall():
            for row in conn.execute(sql.SQL("SELECT * FROM {}").format(sql.Identifier(table))):
                found += b"".join(cell_bytes(cell) for cell in row)
    return bytes(found)


def cell_bytes(cell: Any) -> bytes:
    if isinstance(cell, bytes | memoryview):
        return bytes(cell)
    return json.dumps(cell, ensure_ascii=False, default=str).encode()


def run_log(db: str, state: Path) -> str:
    """The run log the CLI kept for the store: beside a SQLite file, or the database's own in
    the state folder (``runs-<database>-<digest>.log``)."""
    if not db.startswith("postgresql://"):
        return Path(db + ".log").read_text()
    (path,) = state.glob("runs-*.log")
    return path.read_text()


def test_no_secret_in_outputs_logs_or_the_store(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unreachable = f"postgresql://postgres:{PASSWORD}@127.0.0.1:1/runs"
    with FakeOpenAI() as server:
        env = environment(monkeypatch, tmp_path, server.base_url, OPENAI_API_KEY=KEY)
        db = ("--db", store)
        done: dict[str, Done] = {}
        server.push(*REFUND)
        done["success --json"] = here("run", GOAL, "--thread", "ok", *db, "--json")
        server.push(*REFUND)
        done["success"] = gated_react(env, "run", GOAL, "--thread", "ok2", *db)
        server.push(REFUND[0], Status(401, ECHO))
        done["401 --json"] = here("run", GOAL, "--thread", "auth", *db, "--json")
        server.push(REFUND[0], Status(401, ECHO))
        done["401"] = gated_react(env, "run", GOAL, "--thread", "auth2", *db)
        done["resume"] = here("resume", "auth", *db)
        done["show"] = here("show", "auth", *db)
        done["show --json"] = here("show", "auth", *db, "--json")
        done["runs"] = gated_react(env, "runs", *db)
        done["runs --json"] = here("runs", *db, "--json")
        done["unreachable run"] = here("run", GOAL, "--db", unreachable)
        done["unreachable runs"] = gated_react(env, "runs", "--db", unreachable)
        done["unknown thread"] = here("resume", "nope", *db)
    codes = {name: out.code for name, out in done.items()}
    assert codes == {
        **dict.fromkeys(["success --json", "success", "show", "show --json", "runs"], 0),
        "runs --json": 0,
        **dict.fromkeys(["401 --json", "401", "resume"], 3),
        **dict.fromkeys(["unreachable run", "unreachable runs", "unknown thread"], 1),
    }
    state = tmp_path / "gated-react"
    texts = {
        f"{name} {part}": getattr(out, part)
        for name, out in done.items()
        for part in ("out", "err")
    }
    texts["run log"] = run_log(store, state)
    kept = stored_bytes(store)
    for secret in (KEY, PASSWORD):
        leaks = [name for name, text in texts.items() if secret in text]
        assert leaks == [], f"{secret} leaked into {leaks}"
        assert secret.encode() not in kept, f"{secret} is in the store"
    # The checks look where the secrets would be: the run, its log and the error are there.
    echoed = "model call failed (auth): HTTP 401: Error code: 401 - Incorrect API key provided: ***"
    assert done["401 --json"].json()["message"].startswith(echoed)
    assert done["show --json"].json()["message"].startswith(echoed)
    assert echoed.encode() in kept
    assert b"get_user_profile" in kept
    assert '"thread": "auth"' in texts["run log"]
    assert "postgres:***@127.0.0.1:1/runs" in done["unreachable run"].one_error_line()


def test_the_library_masks_the_models_key_before_it_stores_an_error(tmp_path: Path) -> None:
    """Below the CLI: the stop message a failed model call leaves in the state is masked with
    the model's own key (``NodeDeps.secrets``, from its ``SecretStr`` fields), so no store ever
    gets it, whichever program runs the graph."""
    from langchain_openai import ChatOpenAI

    from gated_react import build_graph, open_checkpointer, run
    from gated_react.redact import secrets_of
    from gated_react.testing import ScriptedChatModel
    from gated_react.tools.support import SUPPORT_TOOLS

    db = tmp_path / "runs.sqlite"
    with FakeOpenAI([REFUND[0], Status(401, ECHO)]) as server:
        model = ChatOpenAI(model="m", api_key=KEY, base_url=server.base_url, max_retries=0)
        assert secrets_of(model) == (KEY,)
        assert secrets_of(ScriptedChatModel(replies=[])) == ()
        with open_checkpointer(f"sqlite:///{db}") as saver:
            out = run(build_graph(model, SUPPORT_TOOLS, checkpointer=saver), GOAL)
    assert out["stop_reason"] == "llm_error:auth"
    assert "Incorrect API key provided: ***" in out["message"]
    assert KEY not in json.dumps(out, default=str)
    assert KEY.encode() not in stored_bytes(str(db))
