"""Records for the PostgreSQL checkpointer: two tables reached through the saver's pool.

A record and its step (or a step alone) are written by one call of the
function ``tether_put_step_v1``: one statement, so one round trip and one
transaction, in which the function locks the thread's log, takes the next
index, writes the record and appends the step.

Under a worker's guard whose run store shares this database, every write
transaction starts with the run's fence check (``tether_assert_fence``, queued
in the same pipeline as the write), so records and steps of a run the worker
lost are refused in their own transaction, as ``LeaseLostError``. A saver
connected as a restricted worker role (``saver.scoped``) also names the run's
scope before its reads, in the same pipeline.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, nullcontext
from typing import Any

from langgraph.checkpoint.postgres import _ainternal
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from tether._pg_setup import lock_for_setup
from tether.checkpointing import (
    fence_errors,
    fenced_transaction,
    scope_reads,
    transaction_fence,
)
from tether.store._chain import ChainRow, merge_rows
from tether.store._step_index import WRITTEN, IndexGuesses
from tether.store._types import RawRecord, StepPayload

__all__ = ["PostgresDriver"]

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS tether_records (
        seq BIGSERIAL,
        kind TEXT NOT NULL,
        key TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        value TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (kind, key))""",
    "CREATE INDEX IF NOT EXISTS tether_records_thread ON tether_records (thread_id, kind, seq)",
    """CREATE TABLE IF NOT EXISTS tether_steps (
        thread_id TEXT NOT NULL,
        idx INTEGER NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (thread_id, idx))""",
    # Records and steps carry the run that wrote them, for delete_for_runs;
    # rows written before this have NULL (no run).
    "ALTER TABLE tether_records ADD COLUMN IF NOT EXISTS run_id TEXT",
    "ALTER TABLE tether_steps ADD COLUMN IF NOT EXISTS run_id TEXT",
    "CREATE INDEX IF NOT EXISTS tether_records_run ON tether_records (run_id) "
    "WHERE run_id IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS tether_steps_run ON tether_steps (run_id) WHERE run_id IS NOT NULL",
    # The step log's hash chain (tether.store._chain); a run's deleted steps leave theirs.
    """CREATE TABLE IF NOT EXISTS tether_step_chain (
        thread_id TEXT NOT NULL,
        idx INTEGER NOT NULL,
        digest TEXT NOT NULL,
        link TEXT NOT NULL,
        PRIMARY KEY (thread_id, idx))""",
    # Writes a record (unless p_kind is NULL) and appends a step to its thread's
    # log with its hash-chain link (tether.store._chain), atomically. p_index NULL:
    # the step's text does not depend on its index, which is the log's next; else
    # the text is bound to p_index, and a log that moved past it answers
    # {2, next index} having written nothing. Answers {1, index} if it wrote,
    # {0, -1} if the record existed and p_replace is false. The next index is past
    # any step or link a deleted run left, and the link covers the head link:
    # SHA-256 of "{head}:{index}:{digest}". One appender per thread at a time, on
    # every worker (the advisory lock); each statement of a function sees what
    # committed before it (READ COMMITTED), so the head is read after the lock.
    """CREATE OR REPLACE FUNCTION tether_put_step_v2(
        p_kind TEXT, p_key TEXT, p_thread TEXT, p_value TEXT, p_created DOUBLE PRECISION,
        p_run TEXT, p_replace BOOLEAN, p_index INTEGER, p_step TEXT, p_digest TEXT)
    RETURNS INTEGER[] LANGUAGE plpgsql AS $$
    DECLARE next_idx INTEGER; head TEXT;
    BEGIN
        PERFORM pg_advisory_xact_lock(hashtextextended('tether_steps|' || p_thread, 7));
        SELECT COALESCE(GREATEST(
            (SELECT MAX(idx) FROM tether_steps WHERE thread_id = p_thread),
            (SELECT MAX(idx) FROM tether_step_chain WHERE thread_id = p_thread)) + 1, 0)
            INTO next_idx;
        IF p_index IS NOT NULL AND p_index <> next_idx THEN
            RETURN ARRAY[2, next_idx];
        END IF;
        IF p_kind IS NOT NULL AND p_replace THEN
            INSERT INTO tether_records (kind, key, thread_id, value, created_at, run_id)
                VALUES (p_kind, p_key, p_thread, p_value, p_created, p_run)
                ON CONFLICT (kind, key) DO UPDATE SET value = excluded.value;
        ELSIF p_kind IS NOT NULL THEN
            INSERT INTO tether_records (kind, key, thread_id, value, created_at, run_id)
                VALUES (p_kind, p_key, p_thread, p_value, p_created, p_run)
                ON CONFLICT (kind, key) DO NOTHING;
            IF NOT FOUND THEN
                RETURN ARRAY[0, -1];
            END IF;
        END IF;
        SELECT link INTO head FROM tether_step_chain WHERE thread_id = p_thread
            ORDER BY idx DESC LIMIT 1;
        INSERT INTO tether_steps (thread_id, idx, value, run_id)
            VALUES (p_thread, next_idx, p_step, p_run);
        INSERT INTO tether_step_chain (thread_id, idx, digest, link)
            VALUES (p_thread, next_idx, p_digest, encode(sha256(convert_to(
                COALESCE(head, repeat('0', 64)) || ':' || next_idx || ':' || p_digest,
                'UTF8')), 'hex'));
        RETURN ARRAY[1, next_idx];
    END $$""",
)
_PUT_STEP = (
    "SELECT tether_put_step_v2(%s::text, %s::text, %s::text, %s::text, %s::float8, %s::text, "
    "%s::boolean, %s::integer, %s::text, %s::text) AS answer"
)
_COLUMNS = "kind, key, thread_id, value, created_at, run_id"
_INSERT = f"INSERT INTO tether_records ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s) "
# Serialises schema creation across processes (CREATE ... IF NOT EXISTS can race).
_SETUP_LOCK = 0x7E7E_5701
_SETUP_LOCK_SQL = "SELECT pg_advisory_xact_lock(%s)"
# The last objects _SCHEMA creates: all present, the schema is complete. Read from
# the catalog tables, not with to_regclass() alone: a statement that locks no table
# may answer from the session's catalog cache before it took in another session's
# commit (the setup lock just waited for), and say "incomplete" a moment too long.
_COMPLETE = """SELECT (SELECT count(*) FROM pg_catalog.pg_class c
                WHERE c.relname IN ('tether_records_run', 'tether_steps_run', 'tether_step_chain')
                  AND pg_catalog.pg_table_is_visible(c.oid)) = 3
       AND EXISTS (SELECT 1 FROM pg_catalog.pg_proc p
                    WHERE p.proname = 'tether_put_step_v2'
                      AND pg_catalog.pg_function_is_visible(p.oid)
                      AND pg_catalog.oidvectortypes(p.proargtypes) = 'text, text, text, text, '
                          'double precision, text, boolean, integer, text, text') AS complete"""


@asynccontextmanager
async def conn_cursor(conn: Any) -> AsyncIterator[Any]:
    async with _ainternal.get_connection(conn) as c, c.cursor(row_factory=dict_row) as cur:
        yield cur


def _raw(row: dict[str, Any]) -> RawRecord:
    return RawRecord(
        row["kind"],
        row["key"],
        row["thread_id"],
        row["value"],
        float(row["created_at"]),
        row["run_id"],
    )


def _params(raw: RawRecord) -> tuple[Any, ...]:
    return (raw.kind, raw.key, raw.thread_id, raw.payload, raw.created_at, raw.run_id)


class PostgresDriver:
    """Uses the saver's connection (or pool), so there is no second URL to configure.

    Args:
        saver: An ``AsyncPostgresSaver`` (tether's ``PostgresSaver``).
    """

    def __init__(self, saver: Any) -> None:
        self._saver = saver
        self.loop: asyncio.AbstractEventLoop | None = saver.loop
        self._ready = False
        self._setup_lock = asyncio.Lock()
        # The index each thread's next encrypted step will try (the text is bound to it).
        self._guesses = IndexGuesses()

    @asynccontextmanager
    async def _cursor(self, *, setup: bool = True) -> AsyncIterator[Any]:
        if setup and not self._ready:
            await self._setup()
        if isinstance(self._saver.conn, AsyncConnectionPool):
            async with (
                self._saver.conn.connection() as conn,
                conn.cursor(row_factory=dict_row) as cur,
            ):
                yield cur
            return
        # A single shared connection: take the saver's lock as its own queries do.
        async with self._saver.lock, conn_cursor(self._saver.conn) as cur:
            yield cur

    @asynccontextmanager
    async def _read(self) -> AsyncIterator[Any]:
        """A cursor for reads; a scoped saver's reads see only the current run's thread.

        The scope is queued in a pipeline before the reads (one implicit
        transaction until the first fetch syncs it), so it costs no round trip.
        """
        async with self._cursor() as cur:
            if not getattr(self._saver, "scoped", False) or transaction_fence() is None:
                yield cur
                return
            async with fence_errors(), cur.connection.pipeline():
                await scope_reads(cur)
                yield cur

    @asynccontextmanager
    async def _write(self, *, atomic: bool = True) -> AsyncIterator[Any]:
        """A cursor for a write: in a transaction that first checks the run's fence, if any.

        Fenced, the check and the write's own statements are one transaction
        sent in one pipeline (:func:`~tether.checkpointing.fenced_transaction`).
        Unfenced, a single-statement write (``atomic=False``) runs as it is, in
        autocommit.
        """
        async with fence_errors(), self._cursor() as cur:
            conn = cur.connection
            if transaction_fence() is None:
                async with conn.transaction() if atomic else nullcontext():
                    yield cur
                return
            async with fenced_transaction(cur, pipeline=self._saver.supports_pipeline):
                yield cur

    async def _setup(self) -> None:
        async with self._setup_lock:
            if self._ready:
                return
            async with self._cursor(setup=False) as cur:
                await cur.execute(_COMPLETE)
                row = await cur.fetchone()
            if row is not None and row["complete"]:
                # Nothing to create: a role without DDL rights opens it too.
                self._ready = True
                return
            async with self._cursor(setup=False) as cur, cur.connection.transaction():
                await lock_for_setup(cur.execute, _SETUP_LOCK_SQL, (_SETUP_LOCK,))
                # Asked again under the lock: another process may have just set it up,
                # and its ALTER TABLEs would lock the tables its workers write now
                # (ACCESS EXCLUSIVE, even with IF NOT EXISTS): a deadlock with them.
                await cur.execute(_COMPLETE)
                row = await cur.fetchone()
                if row is None or not row["complete"]:
                    for sql in _SCHEMA:
                        await cur.execute(sql)
            self._ready = True

    async def insert(self, raw: RawRecord) -> bool:
        async with self._write(atomic=False) as cur:
            await cur.execute(
                _INSERT + "ON CONFLICT (kind, key) DO NOTHING RETURNING seq", _params(raw)
            )
            return await cur.fetchone() is not None

    async def upsert(self, raw: RawRecord) -> None:
        async with self._write(atomic=False) as cur:
            await cur.execute(
                _INSERT + "ON CONFLICT (kind, key) DO UPDATE SET value = excluded.value",
                _params(raw),
            )

    async def get(self, kind: str, key: str) -> RawRecord | None:
        async with self._read() as cur:
            await cur.execute(
                f"SELECT {_COLUMNS} FROM tether_records WHERE kind = %s AND key = %s", (kind, key)
            )
            row = await cur.fetchone()
        return None if row is None else _raw(row)

    async def list(self, kind: str, thread_id: str | None) -> builtins.list[RawRecord]:
        sql = f"SELECT {_COLUMNS} FROM tether_records WHERE kind = %s"
        params: tuple[str, ...] = (kind,)
        if thread_id is not None:
            sql += " AND thread_id = %s"
            params += (thread_id,)
        async with self._read() as cur:
            await cur.execute(sql + " ORDER BY seq", params)
            rows = await cur.fetchall()
        return [_raw(row) for row in rows]

    async def _put_step(
        self, thread_id: str, step: StepPayload, raw: RawRecord | None, replace: bool = False
    ) -> tuple[int, int]:
        """One call of ``tether_put_step_v1``: the step, and ``raw`` unless ``None``."""
        record = (
            (None, None, thread_id, None, None)
            if raw is None
            else (raw.kind, raw.key, thread_id, raw.payload, raw.created_at)
        )

        async def put(index: str, text: str) -> tuple[int, int]:
            at = None if index == "next" else int(index)
            async with self._write(atomic=False) as cur:
                await cur.execute(_PUT_STEP, (*record, step.run_id, replace, at, text, step.digest))
                row = await cur.fetchone()
            status, written = row["answer"]
            return int(status), int(written)

        return await self._guesses.write(thread_id, step, put)

    async def append_step(self, thread_id: str, step: StepPayload) -> int:
        _, index = await self._put_step(thread_id, step, None)
        return index

    async def put_with_step(self, raw: RawRecord, replace: bool, step: StepPayload) -> int | None:
        status, index = await self._put_step(raw.thread_id, step, raw, replace)
        return index if status == WRITTEN else None

    async def steps(self, thread_id: str) -> builtins.list[tuple[int, str]]:
        async with self._read() as cur:
            await cur.execute(
                "SELECT idx, value FROM tether_steps WHERE thread_id = %s ORDER BY idx",
                (thread_id,),
            )
            rows = await cur.fetchall()
        return [(int(r["idx"]), str(r["value"])) for r in rows]

    async def chain(self, thread_id: str) -> builtins.list[ChainRow]:
        # One snapshot for both tables: a step appended between the two reads
        # would otherwise look removed (its link without its text).
        async with self._cursor() as cur, cur.connection.transaction():
            await cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            await cur.execute(
                "SELECT idx, value FROM tether_steps WHERE thread_id = %s", (thread_id,)
            )
            steps = [(int(r["idx"]), str(r["value"])) for r in await cur.fetchall()]
            await cur.execute(
                "SELECT idx, digest, link FROM tether_step_chain WHERE thread_id = %s",
                (thread_id,),
            )
            links = [(int(r["idx"]), r["digest"], r["link"]) for r in await cur.fetchall()]
        return merge_rows(steps, links)

    async def step_threads(self) -> builtins.list[str]:
        async with self._cursor() as cur:
            await cur.execute(
                "SELECT thread_id FROM tether_steps UNION "
                "SELECT thread_id FROM tether_step_chain ORDER BY 1"
            )
            return [str(r["thread_id"]) for r in await cur.fetchall()]

    async def delete_thread(self, thread_id: str) -> None:
        async with self._write() as cur:
            await cur.execute("DELETE FROM tether_records WHERE thread_id = %s", (thread_id,))
            await cur.execute("DELETE FROM tether_steps WHERE thread_id = %s", (thread_id,))
            await cur.execute("DELETE FROM tether_step_chain WHERE thread_id = %s", (thread_id,))
        self._guesses.forget(thread_id)

    async def delete_runs(self, run_ids: builtins.list[str]) -> None:
        async with self._write() as cur:
            await cur.execute("DELETE FROM tether_records WHERE run_id = ANY(%s)", (run_ids,))
            await cur.execute("DELETE FROM tether_steps WHERE run_id = ANY(%s)", (run_ids,))
