"""Copy a backend's raw storage (as a backup or a replica would) and put rows of it back.

:func:`take_copy` copies the whole store the way an operator would back it up:
the SQLite file with SQLite's backup API, every PostgreSQL row of every table as
text, every Redis key of the test's prefix with ``DUMP``, the memory saver's
dicts deep-copied. :func:`restore_thread` then writes the copy's rows of one
thread back into the live store, *except* the thread's wrapped data key (the
rows a replica, an export or a partial restore would bring back), without going
through tether. :func:`restore_all` puts the whole copy back instead, every row
of every table (every key of the prefix), replacing what is there: a full
restore of the backup, data keys and all.
"""

from __future__ import annotations

import copy
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from tests.backends import Backend
from tether.checkpointing._delegating import innermost
from tether.store import store_for

KEY_KIND = "thread_key"  # the record kind of a thread's wrapped data key
_RECORD_TABLES = {"tether_records", "tether_steps", "tether_step_chain"}


def _copied(table: str) -> bool:
    """Checkpoint and record-store tables; not the runtime's run store (rows with ids)."""
    return table in _RECORD_TABLES or not table.startswith("tether_")


@dataclass
class RawCopy:
    """What :func:`take_copy` took: per backend, whatever restores its rows."""

    backend: str
    data: Any = field(default=None)


async def take_copy(backend: Backend, saver: BaseCheckpointSaver[Any]) -> RawCopy:
    """A raw copy of every stored row or key of this test's store."""
    inner = innermost(saver)
    if backend.name == "memory":
        driver: Any = store_for(inner).driver
        return RawCopy(
            "memory",
            copy.deepcopy(
                {
                    "storage": dict(inner.storage),  # type: ignore[attr-defined]
                    "writes": dict(inner.writes),  # type: ignore[attr-defined]
                    "blobs": dict(inner.blobs),  # type: ignore[attr-defined]
                    "records": dict(driver._records),
                    "steps": dict(driver._steps),
                    "next_step": dict(driver._next_step),
                    "chain": dict(driver._chain),
                }
            ),
        )
    if backend.name == "sqlite":
        path = backend.url.removeprefix("sqlite:///")
        target = sqlite3.connect(":memory:")
        with sqlite3.connect(path, timeout=10) as source:
            source.backup(target)
        return RawCopy("sqlite", target)
    if backend.name == "postgres":
        return RawCopy("postgres", await _postgres_copy(backend.url))
    return RawCopy("redis", await _redis_copy(backend))


async def restore_thread(
    backend: Backend, saver: BaseCheckpointSaver[Any], raw: RawCopy, thread_id: str
) -> int:
    """Write the copy's rows of ``thread_id`` back, all but its data key; how many."""
    inner = innermost(saver)
    if raw.backend == "memory":
        return _memory_restore(inner, raw.data, thread_id)
    if raw.backend == "sqlite":
        return _sqlite_restore(backend, raw.data, thread_id)
    if raw.backend == "postgres":
        return await _postgres_restore(backend.url, raw.data, thread_id)
    return await _redis_restore(backend, raw.data)


async def restore_all(backend: Backend, saver: BaseCheckpointSaver[Any], raw: RawCopy) -> int:
    """Replace everything the live store holds with the whole copy; how many rows or keys."""
    inner = innermost(saver)
    if raw.backend == "memory":
        return _memory_restore_all(inner, raw.data)
    if raw.backend == "sqlite":
        return _sqlite_restore_all(backend, raw.data)
    if raw.backend == "postgres":
        return await _postgres_restore_all(backend.url, raw.data)
    return await _redis_restore_all(backend, raw.data)


# -- memory ---------------------------------------------------------------------------


def _memory_restore_all(inner: Any, data: dict[str, Any]) -> int:
    driver: Any = store_for(inner).driver
    targets = {
        "storage": inner.storage,
        "writes": inner.writes,
        "blobs": inner.blobs,
        "records": driver._records,
        "steps": driver._steps,
        "next_step": driver._next_step,
        "chain": driver._chain,
    }
    for name, target in targets.items():
        target.clear()
        target.update(copy.deepcopy(data[name]))
    return sum(len(data[name]) for name in targets)


def _memory_restore(inner: Any, data: dict[str, Any], thread_id: str) -> int:
    driver: Any = store_for(inner).driver
    count = 0
    if thread_id in data["storage"]:
        inner.storage[thread_id] = data["storage"][thread_id]
        count += 1
    for name, target in (("writes", inner.writes), ("blobs", inner.blobs)):
        for k, v in data[name].items():
            if k[0] == thread_id:
                target[k] = v
                count += 1
    for k, rec in data["records"].items():
        if rec.thread_id == thread_id and rec.kind != KEY_KIND:
            driver._records[k] = rec
            count += 1
    for name, target in (
        ("steps", driver._steps),
        ("next_step", driver._next_step),
        ("chain", driver._chain),
    ):
        if thread_id in data[name]:
            target[thread_id] = data[name][thread_id]
            count += 1
    return count


# -- sqlite ---------------------------------------------------------------------------


def _thread_tables(conn: sqlite3.Connection) -> list[str]:
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    return [
        t
        for t in tables
        if _copied(t)
        and any(col[1] == "thread_id" for col in conn.execute(f'PRAGMA table_info("{t}")'))
    ]


def _sqlite_restore(backend: Backend, copied: sqlite3.Connection, thread_id: str) -> int:
    path = backend.url.removeprefix("sqlite:///")
    count = 0
    with sqlite3.connect(path, timeout=10) as live:
        for table in _thread_tables(copied):
            cur = copied.execute(f'SELECT * FROM "{table}" WHERE thread_id = ?', (thread_id,))
            names = [d[0] for d in cur.description]
            for row in cur.fetchall():
                if table == "tether_records" and row[names.index("kind")] == KEY_KIND:
                    continue
                marks = ", ".join("?" * len(row))
                live.execute(f'INSERT INTO "{table}" VALUES ({marks})', row)
                count += 1
    return count


def _sqlite_restore_all(backend: Backend, copied: sqlite3.Connection) -> int:
    path = backend.url.removeprefix("sqlite:///")
    count = 0
    tables = [
        r[0]
        for r in copied.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    with sqlite3.connect(path, timeout=10) as live:
        for table in tables:
            live.execute(f'DELETE FROM "{table}"')
            for row in copied.execute(f'SELECT * FROM "{table}"').fetchall():
                live.execute(f'INSERT INTO "{table}" VALUES ({", ".join("?" * len(row))})', row)
                count += 1
    return count


# -- postgres -------------------------------------------------------------------------


async def _postgres_copy(url: str) -> dict[str, list[tuple[str | None, str]]]:
    """Every row of every table, as (thread id or ``None``, row text)."""
    import psycopg

    rows: dict[str, list[tuple[str | None, str]]] = {}
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT table_name, bool_or(column_name = 'thread_id') "
            "FROM information_schema.columns WHERE table_schema = 'public' GROUP BY table_name"
        )
        for table, threaded in await cur.fetchall():
            tid = "thread_id::text" if threaded else "NULL::text"
            cur = await conn.execute(f'SELECT {tid}, t::text FROM "{table}" t')
            rows[table] = [(tid, text) for tid, text in await cur.fetchall()]
    return rows


async def _postgres_restore(
    url: str, rows: dict[str, list[tuple[str | None, str]]], thread: str
) -> int:
    import psycopg

    count = 0
    async with await psycopg.AsyncConnection.connect(url) as conn:
        for table, entries in rows.items():
            if not _copied(table):
                continue
            for tid, text in entries:
                if tid != thread:
                    continue
                cur = await conn.execute(f'SELECT (%s::"{table}").*', (text,))
                names = [d.name for d in cur.description or ()]
                values = await cur.fetchone()
                assert values is not None
                if table == "tether_records" and values[names.index("kind")] == KEY_KIND:
                    continue
                count += await _postgres_insert(conn, table, text)
        await conn.commit()
    return count


async def _postgres_insert(conn: Any, table: str, text: str) -> int:
    """Insert one row given as its text (identity columns kept as copied)."""
    await conn.execute(
        f'INSERT INTO "{table}" OVERRIDING SYSTEM VALUE SELECT (%s::"{table}").*', (text,)
    )
    return 1


async def _postgres_restore_all(url: str, rows: dict[str, list[tuple[str | None, str]]]) -> int:
    import psycopg

    count = 0
    async with await psycopg.AsyncConnection.connect(url) as conn:
        # As pg_restore --disable-triggers does: foreign keys are checked by the copy's source.
        await conn.execute("SET LOCAL session_replication_role = replica")
        for table, entries in rows.items():
            await conn.execute(f'DELETE FROM "{table}"')
            for _, text in entries:
                count += await _postgres_insert(conn, table, text)
        await conn.commit()
    return count


# -- redis ----------------------------------------------------------------------------


@asynccontextmanager
async def _redis(backend: Backend) -> AsyncIterator[tuple[Any, list[bytes]]]:
    """A client of the test's Redis, and every key of its prefix now."""
    from redis.asyncio import Redis

    client = Redis.from_url(backend.url)
    try:
        prefix = f"{backend.key_prefix}*"
        yield client, [k async for k in client.scan_iter(match=prefix, count=1000)]
    finally:
        await client.aclose()


async def _redis_copy(backend: Backend) -> dict[bytes, bytes]:
    async with _redis(backend) as (client, keys):
        return {key: await client.dump(key) for key in keys}


async def _redis_restore(backend: Backend, dumps: dict[bytes, bytes]) -> int:
    """RESTORE every copied key that is gone now (the erased thread's), but its data key."""
    count = 0
    async with _redis(backend) as (client, live):
        for key, dumped in dumps.items():
            if f":rec:{KEY_KIND}:".encode() in key or key in live:
                continue
            await client.restore(key, 0, dumped)
            count += 1
    return count


async def _redis_restore_all(backend: Backend, dumps: dict[bytes, bytes]) -> int:
    """Delete every key of the prefix, then RESTORE every copied one."""
    async with _redis(backend) as (client, live):
        if live:
            await client.delete(*live)
        for key, dumped in dumps.items():
            await client.restore(key, 0, dumped)
    return len(dumps)
