"""Checkpoints and records beside the run store refuse a stale fence inside their transaction.

A worker that passed every check before its write (its verify said "still
yours", as it does for a worker stopped between the two) and then lost the run
to a takeover writes nothing: the saver's ``aput`` and ``aput_writes`` and the
record store's writes fail with ``LeaseLostError`` inside their own
transaction, on PostgreSQL (``tether_assert_fence``) and on SQLite (TEMP
triggers on the saver's connection).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint

from tests.runtime.store.actions import (
    GRAPH,
    LEASE,
    SHORT_LEASE,
    claim_one,
    create,
    held_guard,
    take_over,
)
from tether import open_checkpointer
from tether.boundaries import LeaseLostError, guarding
from tether.checkpointing import (
    drop_fence,
    fence_errors,
    fenced_transaction,
    hold_fence,
    queued_transaction,
)
from tether.runtime.context import RunContext
from tether.runtime.saver import RunSaver
from tether.runtime.store import Claim, Outcome, RunStore
from tether.store import store_for

THREAD = "t1"


@asynccontextmanager
async def _held(saver: BaseCheckpointSaver[Any], claim: Claim) -> AsyncIterator[RunContext]:
    """Execute as the claim's worker: its fence held on the saver, its guard in context."""
    guard = held_guard(claim)
    await hold_fence(saver, guard.fence)
    try:
        with guarding(guard):
            yield guard
    finally:
        await drop_fence(saver, guard.fence)


async def _until_expired(store: RunStore, run_id: str) -> None:
    for _ in range(200):
        expires = (await store.get_run(run_id)).lease_expires_at
        assert expires is not None
        if expires < datetime.now(UTC):
            return
        await asyncio.sleep(SHORT_LEASE)
    raise AssertionError("the lease never expired")


def _config(checkpoint_id: str | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": THREAD, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


async def _put(saver: BaseCheckpointSaver[Any]) -> str:
    checkpoint = empty_checkpoint()
    await saver.aput(_config(), checkpoint, {"source": "loop", "step": 0}, {})
    return str(checkpoint["id"])


async def _stored(saver: BaseCheckpointSaver[Any]) -> tuple[Any, ...]:
    """Everything the thread has: checkpoints, pending writes, records, steps."""
    checkpoints = [c async for c in saver.alist(_config())]
    writes = [(c.checkpoint["id"], c.pending_writes) for c in checkpoints]
    records = store_for(saver)
    return (
        [c.checkpoint["id"] for c in checkpoints],
        writes,
        [r.key for r in await records.list("fence-test", thread_id=THREAD)],
        await records.steps(THREAD),
    )


Write = Callable[[BaseCheckpointSaver[Any], str], Awaitable[Any]]
WRITES: dict[str, Write] = {
    "aput": lambda saver, _: _put(saver),
    "aput_writes": lambda saver, cid: saver.aput_writes(_config(cid), [("x", 1)], "task-1"),
    "put (sync)": lambda saver, _: asyncio.to_thread(
        saver.put, _config(), empty_checkpoint(), {"source": "loop", "step": 1}, {}
    ),
    "record insert": lambda saver, _: store_for(saver).insert(
        "fence-test", "k-insert", {"v": 1}, thread_id=THREAD
    ),
    "record upsert": lambda saver, _: store_for(saver).upsert(
        "fence-test", "k-upsert", {"v": 1}, thread_id=THREAD
    ),
    "record insert (sync)": lambda saver, _: asyncio.to_thread(
        store_for(saver).sync.insert, "fence-test", "k-sync", {"v": 1}, thread_id=THREAD
    ),
    "append_step": lambda saver, _: store_for(saver).append_step(THREAD, {"kind": "model"}),
    "put_with_step": lambda saver, _: store_for(saver).put_with_step(
        "fence-test", "k-step", {"v": 1}, thread_id=THREAD, step={"kind": "tool"}
    ),
}


@pytest.mark.parametrize("write", list(WRITES))
async def test_a_stale_fence_is_refused_inside_the_write_transaction(
    store: RunStore, store_url: str, write: str
) -> None:
    await create(store, THREAD)
    old = await claim_one(store, "w1", lease=SHORT_LEASE)
    async with open_checkpointer(store_url, encryption=False) as base:
        saver = RunSaver(base)
        async with _held(saver, old):
            first = await _put(saver)  # the current holder writes
        new = await take_over(store, "w2")
        before = await _stored(saver)
        async with _held(saver, old):
            with pytest.raises(LeaseLostError):
                await WRITES[write](saver, first)
        assert await _stored(saver) == before
        # The refused write left no lock behind: the new holder writes, on the
        # saver and on the run store.
        async with _held(saver, new):
            await WRITES[write](saver, first)
        assert await _stored(saver) != before
        await store.finish(new.hold, Outcome("success", "idle"))


async def test_the_current_holder_writes_and_a_finished_run_refuses_it(
    store: RunStore, store_url: str
) -> None:
    await create(store, THREAD)
    claim = await claim_one(store, "w1")
    async with open_checkpointer(store_url, encryption=False) as base:
        saver = RunSaver(base)
        async with _held(saver, claim):
            first = await _put(saver)
            await saver.aput_writes(_config(first), [("x", 1)], "task-1")
            assert await store_for(saver).insert("fence-test", "k", {"v": 1}, thread_id=THREAD)
            await store.finish(claim.hold, Outcome("success", "idle"))
            before = await _stored(saver)
            with pytest.raises(LeaseLostError):
                await _put(saver)
            with pytest.raises(LeaseLostError):
                await store_for(saver).append_step(THREAD, {"kind": "model"})
            assert await _stored(saver) == before
        # Outside a run nothing is fenced: the API and tools write as before.
        await _put(saver)
        assert len((await _stored(saver))[0]) == 2


async def test_holding_a_fence_leaves_the_saver_reading_fresh_data(
    store: RunStore, store_url: str
) -> None:
    await create(store, THREAD)
    claim = await claim_one(store, "w1")
    async with (
        open_checkpointer(store_url, encryption=False) as saver,
        open_checkpointer(store_url, encryption=False) as other,
        _held(saver, claim),
    ):
        assert await saver.aget_tuple(_config()) is None
        written = await _put(other)  # another process writes the thread
        item = await saver.aget_tuple(_config())
        assert item is not None
        assert item.checkpoint["id"] == written


async def _claimed_on_postgres(store: RunStore, store_url: str) -> Claim:
    """A run claimed under a short lease (the test is skipped on SQLite)."""
    if not store_url.startswith("postgres"):
        pytest.skip("PostgreSQL row locks; SQLite orders writers by its one write lock")
    await create(store, THREAD)
    return await claim_one(store, "w1", lease=SHORT_LEASE)


async def test_a_takeover_skips_a_run_while_its_old_holder_s_write_is_in_flight(
    store: RunStore, store_url: str
) -> None:
    old = await _claimed_on_postgres(store, store_url)
    run = old.run
    async with open_checkpointer(store_url, encryption=False) as saver:
        with guarding(held_guard(old)):
            async with saver._cursor(pipeline=True) as cur:  # type: ignore[attr-defined]
                await cur.execute("SELECT 1 AS one")
                assert await cur.fetchone() == {"one": 1}  # the fence check ran too
                # A worker stopped mid-pipeline is not "idle in transaction" to the server;
                # the transaction's own timeout frees the row (PostgreSQL 17+).
                if cur.connection.info.server_version >= 170000:
                    await cur.execute("SHOW transaction_timeout")
                    assert await cur.fetchone() == {"transaction_timeout": "10s"}
                await _until_expired(store, run.run_id)
                # The lease expired, but the write holds the run row: a claim skips it.
                assert await store.claim_expired("w2", graphs=[GRAPH], limit=1, lease=LEASE) == []
        new = await take_over(store, "w2")  # once it committed
        assert new.run.fence == old.run.fence + 1


async def test_a_takeover_waits_out_a_run_store_transaction_a_stopped_holder_left_open(
    store: RunStore, store_url: str
) -> None:
    old = await _claimed_on_postgres(store, store_url)
    run = old.run
    pool: Any = store._pool  # type: ignore[attr-defined]
    holder = await pool.getconn()
    try:
        # A worker stopped between two statements of its run-store transaction
        # (writing events, finishing): its run and thread rows stay locked.
        await holder.execute("BEGIN")
        await holder.execute(
            "SELECT 1 FROM tether_runs WHERE run_id = %s FOR UPDATE", (run.run_id,)
        )
        await _until_expired(store, run.run_id)
        assert await store.claim_expired("w2", graphs=[GRAPH], limit=1, lease=LEASE) == []
        # The server aborts the idle transaction, so the run is not skipped for ever.
        new = await take_over(store, "w2")
        assert new.run.fence == old.run.fence + 1
        with pytest.raises(psycopg.errors.IdleInTransactionSessionTimeout):
            await holder.execute("SELECT 1")  # the holder, woken: its transaction is gone
    finally:
        await pool.putconn(holder)


async def _blobs_of_thread(url: str) -> int:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM checkpoint_blobs WHERE thread_id = %s", (THREAD,)
        )
        row = await cur.fetchone()
        assert row is not None
        return int(row[0])


_BLOB = """INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
           VALUES (%s, '', 'c', %s, 'empty', NULL)"""


async def _write_then_fail(conn: Any) -> None:
    async with conn.cursor() as cur, fenced_transaction(cur):
        await cur.execute(_BLOB, (THREAD, "1"))
        raise RuntimeError("the node failed")


async def test_a_fenced_transaction_that_fails_commits_nothing_and_leaves_none_open(
    store: RunStore, store_url: str
) -> None:
    """BEGIN, the check, the statements and COMMIT go in one pipeline; whatever fails
    (the block, or the check after a takeover), nothing is committed and the
    connection is out of any transaction."""
    claim = await _claimed_on_postgres(store, store_url)
    async with open_checkpointer(store_url, encryption=False):  # creates the saver's tables
        pass
    idle = psycopg.pq.TransactionStatus.IDLE
    async with await psycopg.AsyncConnection.connect(store_url, autocommit=True) as conn:
        with guarding(held_guard(claim)):
            with pytest.raises(RuntimeError, match="the node failed"):
                await _write_then_fail(conn)
            assert conn.pgconn.transaction_status == idle
            assert await _blobs_of_thread(store_url) == 0
            async with conn.cursor() as cur, fenced_transaction(cur):  # the holder writes
                await cur.execute(_BLOB, (THREAD, "2"))
            assert conn.pgconn.transaction_status == idle
            assert await _blobs_of_thread(store_url) == 1
        await take_over(store, "w2")
        with guarding(held_guard(claim)):
            with pytest.raises(LeaseLostError):
                async with fence_errors(), conn.cursor() as cur, fenced_transaction(cur):
                    await cur.execute(_BLOB, (THREAD, "3"))
            assert conn.pgconn.transaction_status == idle
        assert await _blobs_of_thread(store_url) == 1
        await conn.execute("SELECT 1")  # the connection is usable


async def test_a_one_sync_transaction_refuses_a_connection_that_is_not_autocommit(
    store_url: str,
) -> None:
    """psycopg would send BEGIN (and a Sync) first: the statements would not be one transaction."""
    if not store_url.startswith("postgres"):
        pytest.skip("pipelines are PostgreSQL's")
    async with await psycopg.AsyncConnection.connect(store_url, autocommit=False) as conn:
        with pytest.raises(ValueError, match="autocommit"):
            async with conn.cursor() as cur, queued_transaction(cur):
                await cur.execute("SELECT 1")
