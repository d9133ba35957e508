"""Records for the SQLite checkpointer: two tables on the saver's own connection.

Every operation is one function run on aiosqlite's connection thread (one
hop instead of one per statement), under the saver's lock, so tether's writes
never interleave with the saver's, and no write transaction stays open across
an ``await``. The saver's connection carries a worker's fences (TEMP triggers,
see :mod:`tether.checkpointing`), so records and steps of a run the worker
lost are refused inside their own transaction, as ``LeaseLostError``.
"""

from __future__ import annotations

import asyncio
import builtins
import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar

from tether.checkpointing import install_sqlite_fence, lease_lost
from tether.store._chain import GENESIS, ChainRow, chain_link, merge_rows
from tether.store._record import RawRecord, StepPayload

__all__ = ["SqliteDriver"]

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tether_records (
    seq INTEGER PRIMARY KEY,  -- the rowid: increasing, so ORDER BY seq is insertion order
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    value TEXT NOT NULL,
    created_at REAL NOT NULL,
    run_id TEXT,
    UNIQUE (kind, key)
);
CREATE INDEX IF NOT EXISTS tether_records_thread ON tether_records (thread_id, kind);
CREATE TABLE IF NOT EXISTS tether_steps (
    thread_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    value TEXT NOT NULL,
    run_id TEXT,
    PRIMARY KEY (thread_id, idx)
);
CREATE TABLE IF NOT EXISTS tether_step_chain (
    thread_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    digest TEXT NOT NULL,
    link TEXT NOT NULL,
    PRIMARY KEY (thread_id, idx)
);
"""
# Tables written before records carried their run gain the column (NULL: no run).
_ADDED_COLUMNS = (("tether_records", "run_id TEXT"), ("tether_steps", "run_id TEXT"))
_INDEXES = """
CREATE INDEX IF NOT EXISTS tether_records_run ON tether_records (run_id) WHERE run_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS tether_steps_run ON tether_steps (run_id) WHERE run_id IS NOT NULL;
"""
_COLUMNS = "kind, key, thread_id, value, created_at, run_id"
# The log's highest index (of a step or of a link left by a deleted step) and its head link.
_NEXT = """SELECT MAX(COALESCE((SELECT MAX(idx) FROM tether_steps WHERE thread_id = ?), -1),
                   COALESCE((SELECT MAX(idx) FROM tether_step_chain WHERE thread_id = ?), -1)),
       (SELECT link FROM tether_step_chain WHERE thread_id = ? ORDER BY idx DESC LIMIT 1)"""
_INSERT = f"INSERT INTO tether_records ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?) "
_ON_CONFLICT_KEEP = "ON CONFLICT (kind, key) DO NOTHING"
_ON_CONFLICT_REPLACE = "ON CONFLICT (kind, key) DO UPDATE SET value = excluded.value"


def _params(raw: RawRecord) -> tuple[Any, ...]:
    return (raw.kind, raw.key, raw.thread_id, raw.payload, raw.created_at, raw.run_id)


def _create_schema(db: sqlite3.Connection) -> None:
    db.executescript(_SCHEMA)
    for table, column in _ADDED_COLUMNS:
        names = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        if column.split()[0] not in names:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column}")
    db.executescript(_INDEXES)


def _append(db: sqlite3.Connection, thread_id: str, step: StepPayload) -> int:
    """Append one step and its chain link inside the caller's write transaction.

    The index is one past the highest index of the log or its chain (a run's
    deleted steps leave their links, and their indexes are not reused).
    """
    top, head = db.execute(_NEXT, (thread_id, thread_id, thread_id)).fetchone()
    index = int(top) + 1
    db.execute(
        "INSERT INTO tether_steps (thread_id, idx, value, run_id) VALUES (?, ?, ?, ?)",
        (thread_id, index, step.encode(index), step.run_id),
    )
    link = chain_link(head or GENESIS, index, step.digest)
    db.execute(
        "INSERT INTO tether_step_chain (thread_id, idx, digest, link) VALUES (?, ?, ?, ?)",
        (thread_id, index, step.digest, link),
    )
    return index


class SqliteDriver:
    """Uses the saver's aiosqlite connection and its lock.

    Args:
        saver: An ``AsyncSqliteSaver`` (tether's ``SqliteSaver``).
    """

    def __init__(self, saver: Any) -> None:
        self._saver = saver
        self.loop: asyncio.AbstractEventLoop | None = saver.loop
        self._ready = False
        self._level: int | None = None

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if not self._ready:
            await self._saver.setup()
        async with self._saver.lock:
            # aiosqlite runs ``fn`` on the thread that owns the sqlite3 connection.
            result: T = await self._saver.conn._execute(self._prepared(fn))
            return result

    def _prepared(self, fn: Callable[[sqlite3.Connection], T]) -> Callable[[], T]:
        def call() -> T:
            db: sqlite3.Connection = self._saver.conn._conn
            if not self._ready:
                _create_schema(db)
                install_sqlite_fence(db)  # the fence triggers of the tables just created
                journal = db.execute("PRAGMA journal_mode").fetchone()[0]
                level = int(db.execute("PRAGMA synchronous").fetchone()[0])
                # In WAL mode our commits can skip the fsync (synchronous=NORMAL)
                # and still survive the process dying; the saver's next commit,
                # at the connection's own level, makes them durable against
                # power loss too. The level is restored after each write.
                self._level = level if str(journal).lower() == "wal" and level > 1 else None
                self._ready = True
            return fn(db)

        return call

    def _write(
        self, fn: Callable[[sqlite3.Connection], T], *, full_sync: bool = False
    ) -> Callable[[sqlite3.Connection], T]:
        """``fn`` as one write transaction: committed, or rolled back on error.

        With ``full_sync`` the commit keeps the connection's own synchronous
        level (FULL in tether's saver), so it survives a power loss, not only
        the process dying.
        """

        def transaction(db: sqlite3.Connection) -> T:
            relax = self._level is not None and not full_sync
            if db.in_transaction:
                db.commit()
            if relax:
                db.execute("PRAGMA synchronous = NORMAL")
            try:
                # IMMEDIATE takes the write lock before any read, so another
                # process appending to the same file cannot read the same MAX(idx).
                db.execute("BEGIN IMMEDIATE")
                try:
                    result = fn(db)
                except BaseException as exc:
                    db.rollback()
                    lost = lease_lost(exc)
                    if lost is not None:
                        raise lost from exc
                    raise
                db.commit()
                return result
            finally:
                if relax:
                    db.execute(f"PRAGMA synchronous = {self._level}")

        return transaction

    async def insert(self, raw: RawRecord) -> bool:
        def insert(db: sqlite3.Connection) -> bool:
            return db.execute(_INSERT + _ON_CONFLICT_KEEP, _params(raw)).rowcount == 1

        # Put-if-absent is how tools claim a call before its outside effect and
        # how decisions are taken: those must not be lost even to a power cut
        # after the effect happened. Results (put_with_step) may use NORMAL: a
        # lost result is found again through its durable claim.
        return await self._run(self._write(insert, full_sync=True))

    async def upsert(self, raw: RawRecord) -> None:
        def upsert(db: sqlite3.Connection) -> None:
            db.execute(_INSERT + _ON_CONFLICT_REPLACE, _params(raw))

        await self._run(self._write(upsert))

    async def get(self, kind: str, key: str) -> RawRecord | None:
        def get(db: sqlite3.Connection) -> RawRecord | None:
            row = db.execute(
                f"SELECT {_COLUMNS} FROM tether_records WHERE kind = ? AND key = ?", (kind, key)
            ).fetchone()
            return None if row is None else RawRecord(*row)

        return await self._run(get)

    async def list(self, kind: str, thread_id: str | None) -> builtins.list[RawRecord]:
        sql = f"SELECT {_COLUMNS} FROM tether_records WHERE kind = ?"
        params: tuple[str, ...] = (kind,)
        if thread_id is not None:
            sql += " AND thread_id = ?"
            params += (thread_id,)

        def select(db: sqlite3.Connection) -> builtins.list[RawRecord]:
            return [RawRecord(*row) for row in db.execute(sql + " ORDER BY seq", params)]

        return await self._run(select)

    async def append_step(self, thread_id: str, step: StepPayload) -> int:
        return await self._run(self._write(lambda db: _append(db, thread_id, step)))

    async def put_with_step(self, raw: RawRecord, replace: bool, step: StepPayload) -> int | None:
        conflict = _ON_CONFLICT_REPLACE if replace else _ON_CONFLICT_KEEP

        def put(db: sqlite3.Connection) -> int | None:
            if db.execute(_INSERT + conflict, _params(raw)).rowcount != 1:
                return None
            return _append(db, raw.thread_id, step)

        return await self._run(self._write(put))

    async def steps(self, thread_id: str) -> builtins.list[tuple[int, str]]:
        def select(db: sqlite3.Connection) -> builtins.list[tuple[int, str]]:
            rows = db.execute(
                "SELECT idx, value FROM tether_steps WHERE thread_id = ? ORDER BY idx",
                (thread_id,),
            )
            return [(int(i), str(v)) for i, v in rows]

        return await self._run(select)

    async def chain(self, thread_id: str) -> builtins.list[ChainRow]:
        def select(db: sqlite3.Connection) -> builtins.list[ChainRow]:
            # One read transaction for both tables (another process may append between them).
            if db.in_transaction:
                db.commit()
            db.execute("BEGIN")
            try:
                steps = db.execute(
                    "SELECT idx, value FROM tether_steps WHERE thread_id = ?", (thread_id,)
                ).fetchall()
                links = db.execute(
                    "SELECT idx, digest, link FROM tether_step_chain WHERE thread_id = ?",
                    (thread_id,),
                ).fetchall()
            finally:
                db.rollback()
            return merge_rows(steps, links)

        return await self._run(select)

    async def step_threads(self) -> builtins.list[str]:
        def select(db: sqlite3.Connection) -> builtins.list[str]:
            rows = db.execute(
                "SELECT thread_id FROM tether_steps UNION "
                "SELECT thread_id FROM tether_step_chain ORDER BY 1"
            )
            return [str(r[0]) for r in rows]

        return await self._run(select)

    async def delete_thread(self, thread_id: str) -> None:
        def delete(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM tether_records WHERE thread_id = ?", (thread_id,))
            db.execute("DELETE FROM tether_steps WHERE thread_id = ?", (thread_id,))
            db.execute("DELETE FROM tether_step_chain WHERE thread_id = ?", (thread_id,))

        await self._run(self._write(delete))

    async def delete_runs(self, run_ids: builtins.list[str]) -> None:
        marks = ", ".join("?" * len(run_ids))

        def delete(db: sqlite3.Connection) -> None:
            db.execute(f"DELETE FROM tether_records WHERE run_id IN ({marks})", run_ids)
            db.execute(f"DELETE FROM tether_steps WHERE run_id IN ({marks})", run_ids)

        await self._run(self._write(delete))
