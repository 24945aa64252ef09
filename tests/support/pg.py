"""Postgres for tests: one fresh database per test on the server named by
``GATED_REACT_TEST_POSTGRES_URL`` (``scripts/pg-cluster start DIR`` prints one).

Without that variable the tests skip with the reason; with ``GATED_REACT_REQUIRE_POSTGRES=1``
(CI) a missing or unreachable server fails them instead, so they can never silently skip.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import pytest

URL_VAR = "GATED_REACT_TEST_POSTGRES_URL"
REQUIRE_VAR = "GATED_REACT_REQUIRE_POSTGRES"
HOW = "start one with `scripts/pg-cluster start DIR` and export the URL it prints"


def server_url() -> str | None:
    """The configured server, or None."""
    return os.environ.get(URL_VAR, "").strip() or None


def required() -> bool:
    return os.environ.get(REQUIRE_VAR, "").strip() not in ("", "0", "false", "no")


def unavailable(why: str) -> None:
    """Skip, or fail when Postgres is required."""
    if required():
        pytest.fail(f"{why}, but {REQUIRE_VAR}=1 requires Postgres ({HOW})", pytrace=False)
    pytest.skip(f"{why}: Postgres tests need {URL_VAR} ({HOW})")


def with_database(url: str, name: str) -> str:
    """The same server URL pointing at another database."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


@contextmanager
def fresh_database(url: str) -> Iterator[str]:
    """A new, empty database on the server of ``url``; dropped (connections and all) on exit."""
    import psycopg
    from psycopg import sql

    name = f"gr_test_{uuid.uuid4().hex[:16]}"
    try:
        admin = psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        unavailable(f"cannot connect to {URL_VAR}: {str(exc).strip().splitlines()[0]}")
        raise AssertionError("unreachable") from None
    with admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            yield with_database(url, name)
        finally:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
