"""Read and edit one stored checkpoint row around tether and LangGraph, as an attacker with
write access to the storage would: the checkpoint (with its channel versions) and its
clear metadata, as plain dicts.

On PostgreSQL and the memory backend a checkpoint row holds no channel values (they live
in blobs keyed by channel version); on SQLite and Redis the row holds them inline.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from tests.backends import Backend
from tether.checkpointing._delegating import innermost

Edit = Callable[[dict[str, Any], dict[str, Any]], None]


async def read_row(
    backend: Backend, saver: BaseCheckpointSaver[Any], thread_id: str, checkpoint_id: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The stored checkpoint and metadata of one root-namespace checkpoint."""
    found: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def keep(checkpoint: dict[str, Any], metadata: dict[str, Any]) -> None:
        found.append((json.loads(json.dumps(checkpoint, default=_raw)), dict(metadata)))

    await edit_row(backend, saver, thread_id, checkpoint_id, keep, write=False)
    return found[0]


def _raw(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"__raw_bytes__": value.hex()}
    raise TypeError(type(value).__name__)


def _unraw(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__raw_bytes__"}:
            return bytes.fromhex(value["__raw_bytes__"])
        return {k: _unraw(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unraw(v) for v in value]
    return value


async def edit_row(
    backend: Backend,
    saver: BaseCheckpointSaver[Any],
    thread_id: str,
    checkpoint_id: str,
    edit: Edit,
    *,
    write: bool = True,
) -> None:
    """Call ``edit(checkpoint, metadata)`` on one stored row, then store the result raw."""
    inner: Any = innermost(saver)
    editors = {
        "memory": _memory,
        "sqlite": _sqlite,
        "postgres": _postgres,
        "redis": _redis,
    }
    await editors[backend.name](backend, inner, thread_id, checkpoint_id, edit, write=write)


async def _memory(
    backend: Backend, inner: Any, thread_id: str, cid: str, edit: Edit, *, write: bool
) -> None:
    row = inner.storage[thread_id][""][cid]
    checkpoint = inner.serde.loads_typed(row[0])
    metadata = inner.serde.loads_typed(row[1])
    edit(checkpoint, metadata)
    if write:
        checkpoint = _unraw(checkpoint)
        typed = (inner.serde.dumps_typed(checkpoint), inner.serde.dumps_typed(metadata), row[2])
        inner.storage[thread_id][""][cid] = typed


async def _sqlite(
    backend: Backend, inner: Any, thread_id: str, cid: str, edit: Edit, *, write: bool
) -> None:
    where = "WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id = ?"
    async with inner.conn.execute(
        f"SELECT type, checkpoint, metadata FROM checkpoints {where}", (thread_id, cid)
    ) as cur:
        type_, blob, meta = await cur.fetchone()
    checkpoint = inner.serde.loads_typed((type_, blob))
    metadata = json.loads(meta)
    edit(checkpoint, metadata)
    if write:
        type_, blob = inner.serde.dumps_typed(_unraw(checkpoint))
        await inner.conn.execute(
            f"UPDATE checkpoints SET type = ?, checkpoint = ?, metadata = ? {where}",
            (type_, blob, json.dumps(metadata).encode(), thread_id, cid),
        )
        await inner.conn.commit()


async def _postgres(
    backend: Backend, inner: Any, thread_id: str, cid: str, edit: Edit, *, write: bool
) -> None:
    import psycopg
    from psycopg.types.json import Jsonb

    where = "WHERE thread_id = %s AND checkpoint_ns = '' AND checkpoint_id = %s"
    async with await psycopg.AsyncConnection.connect(backend.url, autocommit=True) as conn:
        cur = await conn.execute(
            f"SELECT checkpoint, metadata FROM checkpoints {where}", (thread_id, cid)
        )
        row = await cur.fetchone()
        assert row is not None, (thread_id, cid)
        checkpoint, metadata = row
        edit(checkpoint, metadata)
        if write:
            await conn.execute(
                f"UPDATE checkpoints SET checkpoint = %s, metadata = %s {where}",
                (Jsonb(checkpoint), Jsonb(metadata), thread_id, cid),
            )


async def _redis(
    backend: Backend, inner: Any, thread_id: str, cid: str, edit: Edit, *, write: bool
) -> None:
    from langgraph.checkpoint.redis.util import to_storage_safe_id
    from redis.asyncio import Redis

    client = Redis.from_url(backend.url)
    try:
        async for key in client.scan_iter(match=f"{backend.key_prefix}*", count=1000):
            if (await client.type(key)).decode() != "ReJSON-RL":
                continue
            doc = json.loads(await client.execute_command("JSON.GET", key))
            if (
                "checkpoint" in doc
                and doc.get("thread_id") == to_storage_safe_id(thread_id)
                and doc.get("checkpoint_id") == to_storage_safe_id(cid)
            ):
                metadata = json.loads(doc["metadata"])
                edit(doc["checkpoint"], metadata)
                if write:
                    doc["metadata"] = json.dumps(metadata)
                    await client.execute_command("JSON.SET", key, "$", json.dumps(doc))
                return
        raise AssertionError(f"no Redis document for checkpoint {cid!r}")
    finally:
        await client.aclose()
