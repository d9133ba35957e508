"""Rotation on SQLite and PostgreSQL: one transaction per thread, its rows held until commit.

Checkpoints, pending writes, channel blobs, records and the step log of a thread
are rewritten together. While the transaction holds the thread's rows (SQLite's
``BEGIN IMMEDIATE`` takes the write lock; PostgreSQL reads ``FOR UPDATE``), a
worker that writes to them waits, and its write lands after the rotation's, so
it is never undone. Rows a worker adds meanwhile are sealed under its own ring.
"""

from __future__ import annotations

import json
from typing import Any

from tether.checkpointing import binding
from tether.checkpointing._encrypted import SEALED_METADATA_KEY
from tether.checkpointing._rotators import Rotator, ThreadPass, sealed_metadata, secret_slot

__all__ = ["PostgresRotator", "SqliteRotator"]

_RECORD_TABLES = ("tether_records", "tether_steps")
_RECORD_THREADS = (
    " UNION SELECT thread_id FROM tether_records UNION SELECT thread_id FROM tether_steps"
)


class SqliteRotator(Rotator):
    """Rewrites an ``AsyncSqliteSaver`` file and its record tables."""

    has_records = False

    async def _find_record_tables(self) -> None:
        async with self.saver.conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN (?, ?)",
            _RECORD_TABLES,
        ) as cur:
            row = await cur.fetchone()
        self.has_records = row is not None and row[0] == len(_RECORD_TABLES)

    async def _one(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        async with self.saver.conn.execute(sql, params) as cur:
            return await cur.fetchone()

    async def sealed(self) -> str | None:
        await self._find_record_tables()
        if self.has_records:
            sql = "SELECT 1 FROM tether_records WHERE kind = ? AND key = ?"
            if await self._one(sql, secret_slot()):
                return "its keyed-hash secret"
            newest = await self._one("SELECT value FROM tether_records ORDER BY seq DESC LIMIT 1")
            if newest and str(newest[0]).startswith("enc1:"):
                return "its newest record"
        # rowid order is insertion order: the newest checkpoint row, found by index.
        newest = await self._one("SELECT metadata FROM checkpoints ORDER BY rowid DESC LIMIT 1")
        if newest and sealed_metadata(newest[0]):
            return "its newest checkpoint"
        return None

    async def threads(self) -> list[str]:
        conn = self.saver.conn
        await self._find_record_tables()
        sql = "SELECT thread_id FROM checkpoints UNION SELECT thread_id FROM writes"
        if self.has_records:
            sql += _RECORD_THREADS
        async with conn.execute(sql + " ORDER BY 1") as cur:
            return [str(r[0]) for r in await cur.fetchall()]

    async def rewrite(self, one: ThreadPass) -> None:
        saver = self.saver
        async with saver.lock:
            conn = saver.conn
            try:
                await conn.execute("BEGIN IMMEDIATE")
                await self._checkpoints(one)
                await self._writes(one)
                if self.has_records:
                    await self._records(one)
                await conn.commit()
            except BaseException:
                await conn.rollback()
                raise

    async def _checkpoints(self, one: ThreadPass) -> None:
        saver, tid = self.saver, one.thread_id
        where = "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
        async with saver.conn.execute(
            "SELECT checkpoint_ns, checkpoint_id, type, checkpoint, metadata "
            "FROM checkpoints WHERE thread_id = ?",
            (tid,),
        ) as cur:
            rows = await cur.fetchall()
        for ns, cid, stored_type, stored, meta_raw in rows:
            checkpoint = saver.serde.loads_typed((stored_type, stored))
            metadata = json.loads(meta_raw) if meta_raw else {}
            if one.rewrap_values(checkpoint, ns):
                type_, blob = saver.serde.dumps_typed(checkpoint)
                await saver.conn.execute(
                    f"UPDATE checkpoints SET type = ?, checkpoint = ? {where}",
                    (type_, blob, tid, ns, cid),
                )
            versions = checkpoint.get("channel_versions", {})
            if one.rewrap_metadata(metadata, ns, cid, versions):
                await saver.conn.execute(
                    f"UPDATE checkpoints SET metadata = ? {where}",
                    (json.dumps(metadata, ensure_ascii=False).encode(), tid, ns, cid),
                )

    async def _writes(self, one: ThreadPass) -> None:
        conn, tid = self.saver.conn, one.thread_id
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

    async def _records(self, one: ThreadPass) -> None:
        conn, tid = self.saver.conn, one.thread_id
        async with conn.execute(
            "SELECT kind, key, value FROM tether_records WHERE thread_id = ?", (tid,)
        ) as cur:
            records = await cur.fetchall()
        for kind, key, value in records:
            new = one.rewrap_record(kind, key, value)
            if new is not None:
                await conn.execute(
                    "UPDATE tether_records SET value = ? WHERE kind = ? AND key = ?",
                    (new, kind, key),
                )
        async with conn.execute(
            "SELECT idx, value FROM tether_steps WHERE thread_id = ?", (tid,)
        ) as cur:
            steps = await cur.fetchall()
        for idx, value in steps:
            new = one.rewrap_step(int(idx), value)
            if new is not None:
                await conn.execute(
                    "UPDATE tether_steps SET value = ? WHERE thread_id = ? AND idx = ?",
                    (new, tid, idx),
                )


_PG_THREADS = """
SELECT thread_id FROM checkpoints UNION SELECT thread_id FROM checkpoint_writes
UNION SELECT thread_id FROM checkpoint_blobs
"""


class PostgresRotator(Rotator):
    """Rewrites an ``AsyncPostgresSaver`` database (through its pool) and its record tables."""

    has_records = False

    async def _find_record_tables(self, conn: Any) -> None:
        cur = await conn.execute(
            "SELECT to_regclass('tether_records') IS NOT NULL AS records, "
            "to_regclass('tether_steps') IS NOT NULL AS steps"
        )
        row = await cur.fetchone()
        self.has_records = bool(row and row["records"] and row["steps"])

    async def sealed(self) -> str | None:
        async with self.saver.conn.connection() as conn:
            await self._find_record_tables(conn)
            if self.has_records:
                cur = await conn.execute(
                    "SELECT 1 AS found FROM tether_records WHERE kind = %s AND key = %s",
                    secret_slot(),
                )
                if await cur.fetchone():
                    return "its keyed-hash secret"
            if getattr(self.saver, "scoped", False):
                # A worker role sees no checkpoint outside a run: the secret (every
                # worker may read it) is its only sign of an encrypted store.
                return None
            # The newest checkpoint of the last thread: both found through the primary key.
            cur = await conn.execute(
                "SELECT metadata FROM checkpoints WHERE thread_id = "
                "(SELECT max(thread_id) FROM checkpoints) ORDER BY checkpoint_id DESC LIMIT 1"
            )
            row = await cur.fetchone()
            if row and sealed_metadata(row["metadata"]):
                return "a recent checkpoint"
        return None

    async def threads(self) -> list[str]:
        async with self.saver.conn.connection() as conn:
            await self._find_record_tables(conn)
            sql = _PG_THREADS + (_RECORD_THREADS if self.has_records else "")
            cur = await conn.execute(sql + " ORDER BY 1")
            return [str(r["thread_id"]) for r in await cur.fetchall()]

    async def rewrite(self, one: ThreadPass) -> None:
        async with self.saver.conn.connection() as conn, conn.transaction():
            await _pg_blobs(conn, one)
            await _pg_writes(conn, one)
            await _pg_checkpoints(conn, one)
            if self.has_records:
                await _pg_records(conn, one)


async def _pg_blobs(conn: Any, one: ThreadPass) -> None:
    tid = one.thread_id
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
            binding.channel(tid, ns, ch, ver),
            f"namespace {ns!r}, channel {ch!r}",
        )
        if new is not None:
            await conn.execute(
                "UPDATE checkpoint_blobs SET blob = %s WHERE thread_id = %s AND "
                "checkpoint_ns = %s AND channel = %s AND version = %s",
                (new, tid, ns, ch, ver),
            )


async def _pg_writes(conn: Any, one: ThreadPass) -> None:
    tid = one.thread_id
    cur = await conn.execute(
        "SELECT checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob "
        "FROM checkpoint_writes WHERE thread_id = %s FOR UPDATE",
        (tid,),
    )
    for r in await cur.fetchall():
        ns, cid, task_id, ch = r["checkpoint_ns"], r["checkpoint_id"], r["task_id"], r["channel"]
        new = one.rewrap_write((r["type"], r["blob"]), ns, cid, task_id, ch)
        if new is not None:
            await conn.execute(
                "UPDATE checkpoint_writes SET blob = %s WHERE thread_id = %s AND "
                "checkpoint_ns = %s AND checkpoint_id = %s AND task_id = %s AND idx = %s",
                (new, tid, ns, cid, task_id, r["idx"]),
            )


async def _pg_checkpoints(conn: Any, one: ThreadPass) -> None:
    tid = one.thread_id
    cur = await conn.execute(
        "SELECT checkpoint_ns, checkpoint_id, metadata, "
        "checkpoint -> 'channel_versions' AS versions, "
        "(SELECT count(*) FROM jsonb_object_keys(checkpoint -> 'channel_values')) "
        "AS inline FROM checkpoints WHERE thread_id = %s FOR UPDATE",
        (tid,),
    )
    for r in await cur.fetchall():
        one.counts.plaintext += r["inline"]  # values PostgresSaver kept inline
        ns, cid = r["checkpoint_ns"], r["checkpoint_id"]
        metadata = dict(r["metadata"] or {})
        if one.rewrap_metadata(metadata, ns, cid, r["versions"] or {}):
            await conn.execute(
                "UPDATE checkpoints SET metadata = jsonb_set(metadata, %s, to_jsonb(%s::text)) "
                "WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s",
                ([SEALED_METADATA_KEY], metadata[SEALED_METADATA_KEY], tid, ns, cid),
            )


async def _pg_records(conn: Any, one: ThreadPass) -> None:
    tid = one.thread_id
    cur = await conn.execute(
        "SELECT kind, key, value FROM tether_records WHERE thread_id = %s FOR UPDATE", (tid,)
    )
    for r in await cur.fetchall():
        new = one.rewrap_record(r["kind"], r["key"], r["value"])
        if new is not None:
            await conn.execute(
                "UPDATE tether_records SET value = %s WHERE kind = %s AND key = %s",
                (new, r["kind"], r["key"]),
            )
    cur = await conn.execute(
        "SELECT idx, value FROM tether_steps WHERE thread_id = %s FOR UPDATE", (tid,)
    )
    for r in await cur.fetchall():
        new = one.rewrap_step(int(r["idx"]), r["value"])
        if new is not None:
            await conn.execute(
                "UPDATE tether_steps SET value = %s WHERE thread_id = %s AND idx = %s",
                (new, tid, r["idx"]),
            )
