"""Records for the SQLite checkpointer: two tables on the saver's own connection."""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from tether.store.record import RawRecord, StepPayload

__all__ = ["SqliteDriver"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tether_records (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    value TEXT NOT NULL,
    created_at REAL NOT NULL,
    UNIQUE (kind, key)
);
CREATE INDEX IF NOT EXISTS tether_records_thread ON tether_records (thread_id, kind);
CREATE TABLE IF NOT EXISTS tether_steps (
    thread_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (thread_id, idx)
);
"""
_COLUMNS = "kind, key, thread_id, value, created_at"


class SqliteDriver:
    """Uses the saver's aiosqlite connection and its lock, so writes never interleave.

    Args:
        saver: An ``AsyncSqliteSaver`` (tether's ``SqliteSaver``).
    """

    def __init__(self, saver: Any) -> None:
        self._saver = saver
        self.loop: asyncio.AbstractEventLoop | None = saver.loop
        self._ready = False

    async def _setup(self) -> None:
        if self._ready:
            return
        await self._saver.setup()
        async with self._saver.lock:
            await self._saver.conn.executescript(_SCHEMA)
            await self._saver.conn.commit()
        self._ready = True

    async def insert(self, raw: RawRecord) -> bool:
        await self._setup()
        async with self._saver.lock:
            cur = await self._saver.conn.execute(
                f"INSERT OR IGNORE INTO tether_records ({_COLUMNS}) VALUES (?, ?, ?, ?, ?)",
                (raw.kind, raw.key, raw.thread_id, raw.payload, raw.created_at),
            )
            inserted = bool(cur.rowcount == 1)
            await self._saver.conn.commit()
            return inserted

    async def upsert(self, raw: RawRecord) -> None:
        await self._setup()
        async with self._saver.lock:
            await self._saver.conn.execute(
                f"INSERT INTO tether_records ({_COLUMNS}) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (kind, key) DO UPDATE SET value = excluded.value",
                (raw.kind, raw.key, raw.thread_id, raw.payload, raw.created_at),
            )
            await self._saver.conn.commit()

    async def get(self, kind: str, key: str) -> RawRecord | None:
        await self._setup()
        async with (
            self._saver.lock,
            self._saver.conn.execute(
                f"SELECT {_COLUMNS} FROM tether_records WHERE kind = ? AND key = ?", (kind, key)
            ) as cur,
        ):
            row = await cur.fetchone()
        return None if row is None else RawRecord(*row)

    async def list(self, kind: str, thread_id: str | None) -> builtins.list[RawRecord]:
        await self._setup()
        sql = f"SELECT {_COLUMNS} FROM tether_records WHERE kind = ?"
        params: tuple[str, ...] = (kind,)
        if thread_id is not None:
            sql += " AND thread_id = ?"
            params += (thread_id,)
        async with self._saver.lock, self._saver.conn.execute(sql + " ORDER BY seq", params) as cur:
            rows = await cur.fetchall()
        return [RawRecord(*row) for row in rows]

    async def append_step(self, thread_id: str, step: StepPayload) -> int:
        await self._setup()
        async with self._saver.lock, self._transaction(step) as conn:
            return await self._append(conn, thread_id, step)

    async def put_with_step(self, raw: RawRecord, replace: bool, step: StepPayload) -> int | None:
        await self._setup()
        async with self._saver.lock, self._transaction(step) as conn:
            cur = await conn.execute(
                f"INSERT INTO tether_records ({_COLUMNS}) VALUES (?, ?, ?, ?, ?) "
                + (
                    "ON CONFLICT (kind, key) DO UPDATE SET value = excluded.value"
                    if replace
                    else "ON CONFLICT (kind, key) DO NOTHING"
                ),
                (raw.kind, raw.key, raw.thread_id, raw.payload, raw.created_at),
            )
            if cur.rowcount != 1:
                return None
            return await self._append(conn, raw.thread_id, step)

    @asynccontextmanager
    async def _transaction(self, step: StepPayload) -> AsyncIterator[Any]:
        """One write transaction, committed on success and rolled back on error."""
        conn = self._saver.conn
        if conn.in_transaction:
            await conn.commit()
        if step.fixed is None:
            # The index must be known before the step is encoded, so it is read
            # first: IMMEDIATE takes the write lock before that read, and another
            # process appending to the same file waits instead of reading the
            # same MAX(idx).
            await conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            await conn.rollback()
            raise
        await conn.commit()

    @staticmethod
    async def _append(conn: Any, thread_id: str, step: StepPayload) -> int:
        if step.fixed is not None:
            # One statement reads MAX(idx) and inserts under the write lock.
            async with conn.execute(
                "INSERT INTO tether_steps (thread_id, idx, value) "
                "SELECT ?, COALESCE(MAX(idx) + 1, 0), ? FROM tether_steps WHERE thread_id = ? "
                "RETURNING idx",
                (thread_id, step.fixed, thread_id),
            ) as cur:
                row = await cur.fetchone()
            return int(row[0])
        async with conn.execute(
            "SELECT COALESCE(MAX(idx) + 1, 0) FROM tether_steps WHERE thread_id = ?",
            (thread_id,),
        ) as cur:
            row = await cur.fetchone()
        index = int(row[0]) if row else 0
        await conn.execute(
            "INSERT INTO tether_steps (thread_id, idx, value) VALUES (?, ?, ?)",
            (thread_id, index, step.encode(index)),
        )
        return index

    async def steps(self, thread_id: str) -> builtins.list[tuple[int, str]]:
        await self._setup()
        async with (
            self._saver.lock,
            self._saver.conn.execute(
                "SELECT idx, value FROM tether_steps WHERE thread_id = ? ORDER BY idx", (thread_id,)
            ) as cur,
        ):
            rows = await cur.fetchall()
        return [(int(i), str(v)) for i, v in rows]

    async def delete_thread(self, thread_id: str) -> None:
        await self._setup()
        async with self._saver.lock:
            await self._saver.conn.execute(
                "DELETE FROM tether_records WHERE thread_id = ?", (thread_id,)
            )
            await self._saver.conn.execute(
                "DELETE FROM tether_steps WHERE thread_id = ?", (thread_id,)
            )
            await self._saver.conn.commit()
