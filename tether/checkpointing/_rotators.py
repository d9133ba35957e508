"""Per-backend rewriters behind :func:`tether.checkpointing.rotation.rotate_keys`.

Each rewriter lists the store's threads and re-seals one thread's envelopes in
place, in one transaction where the backend has them; see ``rotation.py``.
"""

from __future__ import annotations

import base64
import importlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tether.checkpointing.encrypted import (
    SEALED_METADATA_KEY,
    channel_aad,
    metadata_aad,
    write_aad,
)
from tether.checkpointing.encryption import KeyRing

if TYPE_CHECKING:
    from tether.checkpointing.rotation import RotationReport

__all__ = ["ThreadPass", "rotator_for"]


@dataclass
class ThreadPass:
    """One thread's rewrite: the ring, the running report, and this thread's count."""

    ring: KeyRing
    report: RotationReport
    thread_id: str
    rewrapped: int = 0

    def rewrap(self, blob: Any, aad: bytes, where: str) -> bytes | None:
        """The re-sealed envelope, or ``None`` when nothing is to be written."""
        if not self.ring.is_envelope(blob):
            self.report.plaintext += 1
            return None
        new = self.ring.rewrap(blob, aad, f"thread {self.thread_id!r}, {where}")
        if new is None:
            self.report.current += 1
        else:
            self.rewrapped += 1
        return new

    def rewrap_write(
        self, stored: tuple[str, Any], ns: str, cid: str, task_id: str, channel: str
    ) -> bytes | None:
        """Re-seal one pending write stored as ``(serde type, bytes)``."""
        type_, blob = stored
        return self.rewrap(
            blob if type_ == "bytes" else None,
            write_aad(self.thread_id, ns, cid, task_id, channel),
            f"namespace {ns!r}, checkpoint {cid!r}, task {task_id!r}, channel {channel!r}",
        )

    def rewrap_metadata(self, metadata: dict[str, Any], ns: str, cid: str) -> bool:
        sealed = metadata.get(SEALED_METADATA_KEY)
        if not isinstance(sealed, str):
            self.report.plaintext += 1
            return False
        new = self.rewrap(
            base64.b64decode(sealed),
            metadata_aad(self.thread_id, ns, cid),
            f"namespace {ns!r}, checkpoint {cid!r}, metadata",
        )
        if new is None:
            return False
        metadata[SEALED_METADATA_KEY] = base64.b64encode(new).decode()
        return True

    def rewrap_values(self, checkpoint: dict[str, Any], ns: str, unwrap: Any = None) -> bool:
        """Re-seal ``checkpoint["channel_values"]`` in place; ``unwrap`` maps stored form."""
        versions = checkpoint.get("channel_versions", {})
        changed = False
        for ch, stored in checkpoint.get("channel_values", {}).items():
            blob = unwrap(stored) if unwrap else stored
            new = self.rewrap(
                blob,
                channel_aad(self.thread_id, ns, ch, versions.get(ch)),
                f"namespace {ns!r}, channel {ch!r}",
            )
            if new is not None:
                checkpoint["channel_values"][ch] = new if unwrap is None else _redis_bytes(new)
                changed = True
        return changed


def _redis_bytes(blob: bytes) -> dict[str, str]:
    return {"__bytes__": base64.b64encode(blob).decode()}


# -- backends ---------------------------------------------------------------


class _Rotator:
    """Lists a backend's threads and re-seals one thread at a time."""

    def __init__(self, saver: Any) -> None:
        self.saver = saver

    async def threads(self) -> list[str]:
        raise NotImplementedError

    async def rewrite(self, one: ThreadPass) -> None:
        raise NotImplementedError


class _Memory(_Rotator):
    async def threads(self) -> list[str]:
        saver = self.saver
        found = set(saver.storage) | {k[0] for k in saver.writes} | {k[0] for k in saver.blobs}
        return sorted(found)

    async def rewrite(self, one: ThreadPass) -> None:
        saver = self.saver
        serde, thread_id = saver.serde, one.thread_id
        updates: list[tuple[dict[Any, Any], Any, Any]] = []
        for key, (type_, blob) in list(saver.blobs.items()):
            if key[0] == thread_id and type_ != "empty":
                new = one.rewrap(
                    blob if type_ == "bytes" else None,
                    channel_aad(*key),
                    f"namespace {key[1]!r}, channel {key[2]!r}",
                )
                if new is not None:
                    updates.append((saver.blobs, key, ("bytes", new)))
        for ns, checkpoints in saver.storage.get(thread_id, {}).items():
            for cid, (checkpoint, metadata_typed, parent) in list(checkpoints.items()):
                metadata = serde.loads_typed(metadata_typed)
                if one.rewrap_metadata(metadata, ns, cid):
                    value = (checkpoint, serde.dumps_typed(metadata), parent)
                    updates.append((checkpoints, cid, value))
        for (tid, ns, cid), writes in saver.writes.items():
            if tid != thread_id:
                continue
            for inner_key, (task_id, ch, typed, path) in list(writes.items()):
                new = one.rewrap_write(typed, ns, cid, task_id, ch)
                if new is not None:
                    updates.append((writes, inner_key, (task_id, ch, ("bytes", new), path)))
        for target, key, value in updates:  # all opened: now swap them in
            target[key] = value


class _Sqlite(_Rotator):
    @staticmethod
    async def _checkpoint(
        saver: Any, one: ThreadPass, ns: str, cid: str, row: tuple[str, bytes, Any]
    ) -> None:
        type_, blob, meta_raw = row
        checkpoint = saver.serde.loads_typed((type_, blob))
        metadata = json.loads(meta_raw) if meta_raw else {}
        if one.rewrap_values(checkpoint, ns):
            type_, blob = saver.serde.dumps_typed(checkpoint)
            await saver.conn.execute(
                "UPDATE checkpoints SET type = ?, checkpoint = ? "
                "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                (type_, blob, one.thread_id, ns, cid),
            )
        if one.rewrap_metadata(metadata, ns, cid):
            await saver.conn.execute(
                "UPDATE checkpoints SET metadata = ? "
                "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                (json.dumps(metadata, ensure_ascii=False).encode(), one.thread_id, ns, cid),
            )

    async def threads(self) -> list[str]:
        saver = self.saver
        async with saver.conn.execute(
            "SELECT thread_id FROM checkpoints UNION SELECT thread_id FROM writes ORDER BY 1"
        ) as cur:
            return [str(r[0]) for r in await cur.fetchall()]

    async def rewrite(self, one: ThreadPass) -> None:
        saver = self.saver
        tid = one.thread_id
        async with saver.lock:
            conn = saver.conn
            try:
                await conn.execute("BEGIN IMMEDIATE")
                async with conn.execute(
                    "SELECT checkpoint_ns, checkpoint_id, type, checkpoint, metadata "
                    "FROM checkpoints WHERE thread_id = ?",
                    (tid,),
                ) as cur:
                    rows = await cur.fetchall()
                for ns, cid, type_, blob, meta_raw in rows:
                    await _Sqlite._checkpoint(saver, one, ns, cid, (type_, blob, meta_raw))
                async with conn.execute(
                    "SELECT checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value "
                    "FROM writes WHERE thread_id = ?",
                    (tid,),
                ) as cur:
                    writes = await cur.fetchall()
                for ns, cid, task_id, idx, ch, type_, value in writes:
                    new = one.rewrap_write((type_, value), ns, cid, task_id, ch)
                    if new is not None:
                        await conn.execute(
                            "UPDATE writes SET value = ? WHERE thread_id = ? AND checkpoint_ns = ? "
                            "AND checkpoint_id = ? AND task_id = ? AND idx = ?",
                            (new, tid, ns, cid, task_id, idx),
                        )
                await conn.commit()
            except BaseException:
                await conn.rollback()
                raise


_PG_THREADS = """
SELECT thread_id FROM checkpoints UNION SELECT thread_id FROM checkpoint_writes
UNION SELECT thread_id FROM checkpoint_blobs ORDER BY 1
"""


class _Postgres(_Rotator):
    async def threads(self) -> list[str]:
        saver = self.saver
        async with saver.conn.connection() as conn:
            cur = await conn.execute(_PG_THREADS)
            return [str(r["thread_id"]) for r in await cur.fetchall()]

    async def rewrite(self, one: ThreadPass) -> None:
        saver = self.saver
        tid = one.thread_id
        async with saver.conn.connection() as conn, conn.transaction():
            cur = await conn.execute(
                "SELECT checkpoint_ns, channel, version, type, blob FROM checkpoint_blobs "
                "WHERE thread_id = %s FOR UPDATE",
                (tid,),
            )
            for r in await cur.fetchall():
                if r["type"] == "empty":
                    continue
                ns, ch, ver = r["checkpoint_ns"], r["channel"], r["version"]
                new = one.rewrap(
                    r["blob"] if r["type"] == "bytes" else None,
                    channel_aad(tid, ns, ch, ver),
                    f"namespace {ns!r}, channel {ch!r}",
                )
                if new is not None:
                    await conn.execute(
                        "UPDATE checkpoint_blobs SET blob = %s WHERE thread_id = %s AND "
                        "checkpoint_ns = %s AND channel = %s AND version = %s",
                        (new, tid, ns, ch, ver),
                    )
            cur = await conn.execute(
                "SELECT checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob "
                "FROM checkpoint_writes WHERE thread_id = %s FOR UPDATE",
                (tid,),
            )
            for r in await cur.fetchall():
                ns, cid, task_id, ch = (
                    r["checkpoint_ns"],
                    r["checkpoint_id"],
                    r["task_id"],
                    r["channel"],
                )
                new = one.rewrap_write((r["type"], r["blob"]), ns, cid, task_id, ch)
                if new is not None:
                    await conn.execute(
                        "UPDATE checkpoint_writes SET blob = %s WHERE thread_id = %s AND "
                        "checkpoint_ns = %s AND checkpoint_id = %s AND task_id = %s AND idx = %s",
                        (new, tid, ns, cid, task_id, r["idx"]),
                    )
            cur = await conn.execute(
                "SELECT checkpoint_ns, checkpoint_id, metadata, "
                "(SELECT count(*) FROM jsonb_object_keys(checkpoint -> 'channel_values')) "
                "AS inline FROM checkpoints WHERE thread_id = %s FOR UPDATE",
                (tid,),
            )
            for r in await cur.fetchall():
                one.report.plaintext += r["inline"]  # values PostgresSaver kept inline
                metadata = dict(r["metadata"] or {})
                if one.rewrap_metadata(metadata, r["checkpoint_ns"], r["checkpoint_id"]):
                    await conn.execute(
                        "UPDATE checkpoints SET metadata = "
                        "jsonb_set(metadata, %s, to_jsonb(%s::text)) WHERE thread_id = %s "
                        "AND checkpoint_ns = %s AND checkpoint_id = %s",
                        (
                            [SEALED_METADATA_KEY],
                            metadata[SEALED_METADATA_KEY],
                            tid,
                            r["checkpoint_ns"],
                            r["checkpoint_id"],
                        ),
                    )


class _Redis(_Rotator):
    keys: dict[str, list[str]]

    async def threads(self) -> list[str]:
        """Every thread's checkpoint and write document keys, found by SCAN."""
        from langgraph.checkpoint.redis.util import from_storage_safe_id

        client, saver = self.saver._redis, self.saver
        found: dict[str, list[str]] = {}
        patterns = (f"{saver._checkpoint_prefix}:*", f"{saver._checkpoint_write_prefix}:*")
        for pattern in patterns:
            keys = [
                k.decode() if isinstance(k, bytes) else k
                async for k in client.scan_iter(match=pattern, count=1000)
            ]
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                for key, value in zip(
                    chunk, await client.json().mget(chunk, "$.thread_id"), strict=True
                ):
                    if value:
                        found.setdefault(from_storage_safe_id(value[0]), []).append(key)
        self.keys = found
        return sorted(found)

    async def rewrite(self, one: ThreadPass) -> None:
        # Imported here: only a Redis saver (which needs the extra) is ever rotated by this.
        from langgraph.checkpoint.redis.util import from_storage_safe_id, from_storage_safe_str

        keys = self.keys.get(one.thread_id, [])
        client = self.saver._redis
        docs = await client.json().mget(keys, "$") if keys else []
        pipe = client.pipeline(transaction=True)
        for key, found in zip(keys, docs, strict=True):
            if not found:
                continue  # deleted since the scan
            doc = found[0]
            ns = from_storage_safe_str(doc["checkpoint_ns"])
            cid = from_storage_safe_id(doc["checkpoint_id"])
            if "checkpoint" in doc:
                checkpoint = doc["checkpoint"]
                metadata = json.loads(doc.get("metadata") or "{}")
                changed = one.rewrap_values(checkpoint, ns, unwrap=_from_redis_bytes)
                if one.rewrap_metadata(metadata, ns, cid):
                    doc["metadata"] = json.dumps(metadata, separators=(",", ":"))
                    changed = True
                if changed:
                    pipe.json().set(key, "$", doc)
            else:
                type_ = doc.get("type", "")
                blob = base64.b64decode(doc["blob"]) if type_ == "bytes" else None
                stored = (type_, blob)
                new = one.rewrap_write(stored, ns, cid, doc["task_id"], doc["channel"])
                if new is not None:
                    pipe.json().set(key, "$.blob", base64.b64encode(new).decode())
        await pipe.execute()


def _from_redis_bytes(stored: Any) -> Any:
    """The envelope bytes a RedisJSON checkpoint holds as ``{"__bytes__": base64}``."""
    if isinstance(stored, dict) and set(stored) == {"__bytes__"}:
        return base64.b64decode(stored["__bytes__"])
    return stored  # a value stored in clear: counted, never decoded


_BASES: dict[str, tuple[str, str, type[_Rotator]]] = {
    "memory": ("langgraph.checkpoint.memory", "InMemorySaver", _Memory),
    "sqlite": ("langgraph.checkpoint.sqlite.aio", "AsyncSqliteSaver", _Sqlite),
    "postgres": ("langgraph.checkpoint.postgres.aio", "AsyncPostgresSaver", _Postgres),
    "redis": ("langgraph.checkpoint.redis.aio", "AsyncRedisSaver", _Redis),
}


def rotator_for(saver: Any) -> _Rotator | None:
    """The rewriter for ``saver``'s upstream saver class, or ``None``."""
    for module_name, class_name, rotator in _BASES.values():
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # that backend's extra is not installed
            continue
        if isinstance(saver, getattr(module, class_name)):
            made: _Rotator = rotator(saver)
            return made
    return None
