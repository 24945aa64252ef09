"""The Postgres test helpers: skip on a developer machine, fail in CI, fresh databases."""

from __future__ import annotations

import psycopg
import pytest

from . import pg


def test_a_missing_server_skips_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(pg.REQUIRE_VAR, raising=False)
    with pytest.raises(pytest.skip.Exception, match=f"need {pg.URL_VAR}.*pg-cluster start"):
        pg.unavailable("not set")


@pytest.mark.parametrize("flag", ["1", "true", "yes"])
def test_a_missing_server_fails_when_postgres_is_required(
    monkeypatch: pytest.MonkeyPatch, flag: str
) -> None:
    monkeypatch.setenv(pg.REQUIRE_VAR, flag)
    with pytest.raises(pytest.fail.Exception, match=f"{pg.REQUIRE_VAR}=1 requires Postgres"):
        pg.unavailable("not set")


def test_an_unreachable_server_fails_when_postgres_is_required(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(pg.REQUIRE_VAR, "1")
    with (
        pytest.raises(pytest.fail.Exception, match="cannot connect"),
        pg.fresh_database("postgresql://nobody@127.0.0.1:1/none"),
    ):
        pass


def test_with_database_keeps_the_server_and_credentials() -> None:
    url = "postgresql://app:secret@db.local:6543/runs?sslmode=disable"
    assert pg.with_database(url, "t1") == "postgresql://app:secret@db.local:6543/t1?sslmode=disable"


@pytest.mark.postgres
def test_each_test_gets_a_fresh_empty_database(pg_url: str) -> None:
    server = pg.server_url()
    assert server is not None
    assert pg_url != server
    with psycopg.connect(pg_url) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchone()
    assert tables == (0,)
    with pg.fresh_database(server) as other:
        assert other != pg_url
        psycopg.connect(other).close()
    with pytest.raises(psycopg.OperationalError, match="does not exist"):
        psycopg.connect(other).close()
