"""A store edited by someone else: checkpoints written through a saver's own code, holding what
an attacker with write access to the store would put there."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import ormsgpack
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.base.id import uuid6


def touch(path: Path, code: int = 0) -> ormsgpack.Ext:
    """An extension value that LangGraph's default serializer revives as
    ``os.system("touch <path>")``: the file exists afterwards if anything ran it."""
    return ormsgpack.Ext(code, ormsgpack.packb(["os", "system", f"touch {path}"]))


def poison(saver: BaseCheckpointSaver[Any], thread: str, values: dict[str, Any]) -> None:
    """A newer checkpoint of ``thread`` whose channels hold ``values`` (raw msgpack values,
    extension values included), as if its latest row had been edited in the store."""
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    found = saver.get_tuple(config)  # type: ignore[arg-type]
    assert found is not None, f"thread {thread!r} has no checkpoint to edit"
    checkpoint = dict(found.checkpoint)
    versions = dict(checkpoint["channel_versions"])
    for channel in values:
        versions[channel] = saver.get_next_version(versions.get(channel), None)
    checkpoint.update(
        id=str(uuid6()),
        channel_versions=versions,
        channel_values={**checkpoint["channel_values"], **values},
    )
    new = {channel: versions[channel] for channel in values}
    saver.put(found.config, checkpoint, found.metadata, new)  # type: ignore[arg-type]


# ---- raw rows, as someone with SQL access edits them (issue 28 item 7) ----

_TABLES = {
    "sqlite": (("checkpoints", True), ("writes", True)),
    "postgres": (("checkpoints", True), ("checkpoint_blobs", False), ("checkpoint_writes", True)),
}


def _sql(url: str) -> tuple[str, Any]:
    """The store's kind and an open DB-API connection to it (autocommit)."""
    from gated_react.store.checkpointer import StoreURL

    store = StoreURL.parse(url)
    if store.kind == "sqlite":
        import sqlite3

        return "sqlite", sqlite3.connect(store.target, isolation_level=None)
    import psycopg

    return "postgres", psycopg.connect(store.target, autocommit=True)


def _columns(kind: str, conn: Any, table: str) -> list[str]:
    if kind == "sqlite":
        return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
    rows = conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = %s"
        " ORDER BY ordinal_position",
        (table,),
    )
    return [row[0] for row in rows]


def copy_rows(url: str, source: str, target: str, *, upto: str, writes_before: bool) -> int:
    """Copy thread ``source``'s rows under thread id ``target``: its checkpoints up to ``upto``
    (a checkpoint id), their blobs, and the writes of checkpoints before ``upto`` (or up to it
    too, unless ``writes_before``). Returns the number of rows copied."""
    kind, conn = _sql(url)
    mark = "?" if kind == "sqlite" else "%s"
    copied = 0
    with conn:
        for table, by_checkpoint in _TABLES[kind]:
            cols = _columns(kind, conn, table)
            chosen = ", ".join(mark if c == "thread_id" else c for c in cols)
            sql = f"INSERT INTO {table} ({', '.join(cols)}) SELECT {chosen} FROM {table}"
            sql += f" WHERE thread_id = {mark}"
            params: list[Any] = [target, source]
            if by_checkpoint:
                writes = "writes" in table
                sql += f" AND checkpoint_id {'<' if writes and writes_before else '<='} {mark}"
                params.append(upto)
            copied += conn.execute(sql, params).rowcount
    return copied


def forge_metadata(url: str, thread: str, key: str, value: str) -> None:
    """Set ``key`` to ``value`` in the metadata of every checkpoint of ``thread``."""
    kind, conn = _sql(url)
    with conn:
        if kind == "sqlite":
            conn.execute(
                "UPDATE checkpoints SET metadata = json_set(metadata, ?, ?) WHERE thread_id = ?",
                (f"$.{key}", value, thread),
            )
        else:
            conn.execute(
                "UPDATE checkpoints SET metadata = jsonb_set(metadata, %s, to_jsonb(%s::text))"
                " WHERE thread_id = %s",
                ([key], value, thread),
            )


def rewrite_latest(raw: BaseCheckpointSaver[Any], thread: str, values: dict[str, Any]) -> None:
    """The latest checkpoint row of ``thread`` rewritten in place with ``values`` in its
    channels, its metadata (a signature included) kept: the row's bytes edited."""
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    found = raw.get_tuple(config)  # type: ignore[arg-type]
    assert found is not None, f"thread {thread!r} has no checkpoint to edit"
    checkpoint = dict(found.checkpoint)
    versions = dict(checkpoint["channel_versions"])
    for channel in values:  # a new blob version (Postgres keeps blobs per version)
        versions[channel] = raw.get_next_version(versions.get(channel), None)
    checkpoint.update(
        channel_versions=versions, channel_values={**checkpoint["channel_values"], **values}
    )
    where = found.parent_config or {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    new = {channel: versions[channel] for channel in values}
    raw.put(where, checkpoint, found.metadata, new)  # type: ignore[arg-type]


def set_write(
    url: str, thread: str, checkpoint_id: str, channel: str, stored: tuple[str, bytes]
) -> int:
    """Replace the stored value of ``thread``'s writes to ``channel`` at ``checkpoint_id``
    with ``stored`` (a serializer's ``(type, bytes)``); the number of rows changed."""
    kind, conn = _sql(url)
    table, column, mark = (
        ("writes", "value", "?") if kind == "sqlite" else ("checkpoint_writes", "blob", "%s")
    )
    with conn:
        return int(
            conn.execute(
                f"UPDATE {table} SET type = {mark}, {column} = {mark} WHERE thread_id = {mark}"
                f" AND checkpoint_id = {mark} AND channel = {mark}",
                (*stored, thread, checkpoint_id, channel),
            ).rowcount
        )


def reparent(url: str, thread: str, checkpoint_id: str, parent: str | None) -> None:
    """Point ``thread``'s checkpoint ``checkpoint_id`` at another parent."""
    kind, conn = _sql(url)
    mark = "?" if kind == "sqlite" else "%s"
    with conn:
        conn.execute(
            f"UPDATE checkpoints SET parent_checkpoint_id = {mark} WHERE thread_id = {mark}"
            f" AND checkpoint_id = {mark}",
            (parent, thread, checkpoint_id),
        )


def snapshot(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the savers' tables, sorted: to see that nothing was changed."""
    kind, conn = _sql(url)
    with conn:
        return {
            table: sorted(tuple(map(str, row)) for row in conn.execute(f"SELECT * FROM {table}"))
            for table, _ in _TABLES[kind]
        }


def records(url: str) -> list[tuple[Any, ...]]:
    """Every run record in the store (``gated_react_records``), in order: thread, run, kind,
    signature."""
    _, conn = _sql(url)
    with conn:
        rows = conn.execute(
            "SELECT thread_id, run, kind, mac FROM gated_react_records ORDER BY seq"
        )
        return [tuple(row) for row in rows]


def forge_record(url: str, thread: str, kind: str, body: str) -> int:
    """Replace the body of ``thread``'s records of ``kind`` (what someone with SQL access would
    do to a permit's arguments); the number of rows changed."""
    sql_kind, conn = _sql(url)
    mark = "?" if sql_kind == "sqlite" else "%s"
    with conn:
        return int(
            conn.execute(
                f"UPDATE gated_react_records SET body = {mark} WHERE thread_id = {mark}"
                f" AND kind = {mark}",
                (body, thread, kind),
            ).rowcount
        )


def misshape_latest(url: str, thread: str, part: str) -> None:
    """``thread``'s latest checkpoint row edited into another shape: its ``checkpoint`` or its
    ``metadata`` made JSON ``null`` (on SQLite the checkpoint's serializer type: its bytes
    then read as None), or (``"list"``, Postgres) its checkpoint an empty JSON list."""
    kind, conn = _sql(url)
    mark = "?" if kind == "sqlite" else "%s"
    column, value = {
        ("sqlite", "checkpoint"): ("type", "'null'"),
        ("sqlite", "metadata"): ("metadata", "'null'"),
        ("postgres", "checkpoint"): ("checkpoint", "'null'::jsonb"),
        ("postgres", "metadata"): ("metadata", "'null'::jsonb"),
        ("postgres", "list"): ("checkpoint", "'[]'::jsonb"),
    }[kind, part]
    latest = f"SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = {mark}"
    with conn:
        changed = conn.execute(
            f"UPDATE checkpoints SET {column} = {value} WHERE thread_id = {mark}"
            f" AND checkpoint_id = ({latest})",
            (thread, thread),
        ).rowcount
    assert changed == 1, f"thread {thread!r} has no checkpoint to edit"


def set_record_at(path: Path, thread: str, kind: str, at: str) -> int:
    """Set the time of ``thread``'s records of ``kind`` in the SQLite store at ``path`` to
    ``at``, text that is no number (SQLite keeps it as text in a REAL column); the number of
    rows changed."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        return int(
            conn.execute(
                "UPDATE gated_react_records SET at = ? WHERE thread_id = ? AND kind = ?",
                (at, thread, kind),
            ).rowcount
        )
