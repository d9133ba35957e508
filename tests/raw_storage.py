"""Read a backend's raw storage, bypassing tether and LangGraph, to check what is really stored.

The reader is chosen by the backend that serves the saver, as tether's backend
registry recognises it; there is one reader per registered backend.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from tests.backends import Backend
from tether.checkpointing._backends import backend_of
from tether.checkpointing._delegating import innermost
from tether.store import store_for


async def raw_dump(backend: Backend, saver: BaseCheckpointSaver[Any]) -> list[str]:
    """Every stored row or key of this test's backend, each rendered as text, in sorted order.

    Sorted because neither a Redis SCAN nor a table without ORDER BY promises an
    order: two dumps of unchanged storage must compare equal.
    """
    inner = innermost(saver)
    entry = backend_of(inner)
    if entry is None:
        raise AssertionError(f"no tether backend serves {type(inner).__name__}")
    assert entry.name == backend.name, (entry.name, backend.name)
    return sorted(await READERS[entry.name](backend, inner))


async def _memory_entries(backend: Backend, inner: Any) -> list[str]:
    records = store_for(inner).driver
    stores = (
        inner.storage,
        inner.writes,
        inner.blobs,
        records._records,  # type: ignore[attr-defined]
        records._steps,  # type: ignore[attr-defined]
        records._chain,  # type: ignore[attr-defined]
    )
    return [f"{k!r}={v!r}" for store in stores for k, v in _flatten(store)]


def _flatten(store: dict[Any, Any]) -> list[tuple[Any, Any]]:
    out: list[tuple[Any, Any]] = []
    for key, value in store.items():
        if isinstance(value, dict) and value:
            out.extend(((key, k), v) for k, v in _flatten(value))
        elif not (isinstance(value, dict) and not value):
            out.append((key, value))
    return out


async def _sqlite_rows(backend: Backend, saver: Any) -> list[str]:
    rows: list[str] = []
    async with saver.conn.execute("SELECT name FROM sqlite_master WHERE type='table'") as cur:
        tables = [r[0] for r in await cur.fetchall()]
    for table in tables:
        async with saver.conn.execute(f'SELECT * FROM "{table}"') as cur:
            rows += [f"{table}: {row!r}" for row in await cur.fetchall()]
    return rows


async def _postgres_rows(backend: Backend, saver: Any) -> list[str]:
    import psycopg

    rows: list[str] = []
    async with await psycopg.AsyncConnection.connect(backend.url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT schemaname, tablename FROM pg_tables "
            "WHERE schemaname NOT IN ('pg_catalog', 'information_schema')"
        )
        for schema, table in await cur.fetchall():
            cur = await conn.execute(f'SELECT t::text FROM "{schema}"."{table}" t')
            rows += [f"{table}: {r[0]}" for r in await cur.fetchall()]
    return rows


async def _redis_keys(backend: Backend, saver: Any) -> list[str]:
    from redis.asyncio import Redis

    client = Redis.from_url(backend.url)
    rows: list[str] = []
    try:
        async for key in client.scan_iter(match=f"{backend.key_prefix}*", count=1000):
            rows.append(f"{key.decode()}: {await _redis_value(client, key)!r}")
    finally:
        await client.aclose()
    return rows


# One reader per backend of tether's registry (tests check that none is missing).
READERS: dict[str, Callable[[Backend, Any], Awaitable[list[str]]]] = {
    "memory": _memory_entries,
    "sqlite": _sqlite_rows,
    "postgres": _postgres_rows,
    "redis": _redis_keys,
}


async def _sorted_fields(client: Any, key: bytes) -> list[tuple[bytes, bytes]]:
    return sorted((await client.hgetall(key)).items())


async def _sorted_members(client: Any, key: bytes) -> list[bytes]:
    return sorted(await client.smembers(key))


_REDIS_READERS = {
    "string": lambda c, k: c.get(k),
    "hash": _sorted_fields,
    "list": lambda c, k: c.lrange(k, 0, -1),
    "set": _sorted_members,
    "zset": lambda c, k: c.zrange(k, 0, -1, withscores=True),
    "ReJSON-RL": lambda c, k: c.execute_command("JSON.GET", k),
}


async def _redis_value(client: Any, key: bytes) -> Any:
    kind = (await client.type(key)).decode()
    reader = _REDIS_READERS.get(kind)
    if reader is None:
        raise AssertionError(f"unexpected Redis type {kind} at {key!r}")
    return await reader(client, key)
