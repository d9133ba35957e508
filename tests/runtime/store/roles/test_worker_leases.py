"""A worker role holding run A's lease reaches nothing of run B (``tether workers grant``).

PostgreSQL only. Run B is either queued or running (claimed by another worker
of the same role, so its fence is live): A's holder can neither read B's
lease secret, run row, thread row or events, nor write any of them, nor reach
B's checkpoints by naming B's fence; its own claim's secret opens only A.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from tests.runtime.roles import role_url
from tests.runtime.store.actions import claim_one, create
from tether import open_checkpointer
from tether.runtime.errors import FenceLostError
from tether.runtime.store import Claim, Hold, Outcome, RunStore, open_run_store
from tether.store import store_for

A, B = "thread-a", "thread-b"


@pytest.fixture(params=["queued", "running"])
async def two_runs(
    request: Any, store: RunStore, worker: RunStore, admin_url: str
) -> AsyncIterator[tuple[Claim, str, Claim | None]]:
    """(A's claim, B's run id, B's claim if B is running); B's thread has a record."""
    async with open_checkpointer(admin_url, encryption=False) as saver:
        await store_for(saver).insert("scoped", "b-1", {"v": 1}, thread_id=B)
    await create(store, A)
    claim_a = await claim_one(worker, "wa")
    run_b = await create(store, B)
    claim_b = await claim_one(worker, "wb") if request.param == "running" else None
    yield claim_a, run_b.run_id, claim_b
    await worker.finish(claim_a.hold, Outcome("success", "idle"))
    if claim_b is not None:
        await worker.finish(claim_b.hold, Outcome("success", "idle"))


def _scope(claim: Claim) -> str:
    return f"{claim.run.run_id}:{claim.run.fence}:{claim.secret}"


async def _connect(admin_url: str, role: str, claim: Claim) -> psycopg.AsyncConnection[Any]:
    """The role's connection, its session scoped to ``claim`` (A's lease)."""
    conn = await psycopg.AsyncConnection.connect(role_url(admin_url, role), autocommit=True)
    await conn.execute("SELECT set_config('tether.run_scope', %s, false)", (_scope(claim),))
    return conn


async def _rows(conn: psycopg.AsyncConnection[Any], sql: str, *params: Any) -> list[Any]:
    cur = await conn.execute(sql, params)
    return await cur.fetchall()


async def test_the_role_reads_no_lease_secret_and_no_run_row_of_another_run(
    two_runs: tuple[Claim, str, Claim | None], admin_url: str, role: str
) -> None:
    claim_a, run_b, _ = two_runs
    async with await _connect(admin_url, role, claim_a) as conn:
        # B's run row (and so its fence), B's thread row, B's events: invisible or refused.
        assert await _rows(conn, "SELECT fence FROM tether_runs WHERE run_id = %s", run_b) == []
        assert await _rows(conn, "SELECT * FROM tether_threads WHERE thread_id = %s", B) == []
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await conn.execute("SELECT * FROM tether_run_events WHERE run_id = %s", (run_b,))
        # What it sees is its own run and thread only.
        runs = await _rows(conn, "SELECT run_id FROM tether_runs")
        assert runs == [(claim_a.run.run_id,)]
        assert await _rows(conn, "SELECT thread_id FROM tether_threads") == [(A,)]
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await conn.execute("SELECT * FROM tether_leases")
        # Without a scope, the run store's rows are refused outright.
        await conn.execute("RESET tether.run_scope")
        with pytest.raises(psycopg.Error, match="names no run"):
            await conn.execute("SELECT * FROM tether_runs")


async def test_the_role_writes_no_row_of_another_run(
    two_runs: tuple[Claim, str, Claim | None], store: RunStore, admin_url: str, role: str
) -> None:
    claim_a, run_b, _ = two_runs
    before = await store.get_run(run_b)
    async with await _connect(admin_url, role, claim_a) as conn:
        for statement, params in (
            ("UPDATE tether_runs SET status = 'cancelled' WHERE run_id = %s", (run_b,)),
            ("UPDATE tether_runs SET worker_id = 'me' WHERE run_id = %s", (run_b,)),
            ("UPDATE tether_threads SET status = 'error' WHERE thread_id = %s", (B,)),
        ):
            cur = await conn.execute(statement, params)
            assert cur.rowcount == 0, statement
        for statement, params in (
            ("UPDATE tether_runs SET fence = fence + 1 WHERE run_id = %s", (run_b,)),
            ("DELETE FROM tether_runs WHERE run_id = %s", (run_b,)),
            ("DELETE FROM tether_threads WHERE thread_id = %s", (B,)),
            ("INSERT INTO tether_threads (thread_id) VALUES ('mine')", ()),
            ("UPDATE tether_runs SET thread_id = %s", (B,)),  # moving its own run onto B
            ("UPDATE tether_leases SET fence = 0", ()),
            ("DELETE FROM tether_run_events WHERE run_id = %s", (run_b,)),
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                await conn.execute(statement, params)
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="outside this"):
            await conn.execute(
                "INSERT INTO tether_run_events (run_id, seq, kind, data) "
                "VALUES (%s, 99, 'x', '{}')",
                (run_b,),
            )
    after = await store.get_run(run_b)
    assert (after.status, after.fence, after.worker_id) == (
        before.status,
        before.fence,
        before.worker_id,
    )


async def test_b_s_fence_without_b_s_secret_opens_nothing_of_b(
    two_runs: tuple[Claim, str, Claim | None], store: RunStore, admin_url: str, role: str
) -> None:
    claim_a, run_b, claim_b = two_runs
    fence_b = (await store.get_run(run_b)).fence  # what the role could read before
    async with await psycopg.AsyncConnection.connect(
        role_url(admin_url, role), autocommit=True
    ) as conn:
        for scope in (f"{run_b}:{fence_b}", f"{run_b}:{fence_b}:{claim_a.secret}"):
            await conn.execute("SELECT set_config('tether.run_scope', %s, false)", (scope,))
            with pytest.raises(psycopg.Error, match=r"malformed|no longer holds"):
                await conn.execute("SELECT * FROM tether_records WHERE thread_id = %s", (B,))
            with pytest.raises(psycopg.Error, match=r"malformed|no longer holds"):
                await conn.execute("SELECT * FROM tether_runs WHERE run_id = %s", (run_b,))
        for secret in ("", claim_a.secret, "0" * 64):
            with pytest.raises(psycopg.Error, match="no longer holds") as refused:
                await conn.execute(
                    "SELECT tether_assert_lease(%s, %s, %s)", (run_b, fence_b, secret)
                )
            assert refused.value.sqlstate == "TL001"
            valid = "SELECT tether_lease_valid(%s, %s, %s)"
            assert await _rows(conn, valid, run_b, fence_b, secret) == [(False,)]
        if claim_b is not None:  # B's own secret does open B: the test above is not vacuous
            scope_b = _scope(claim_b)
            await conn.execute("SELECT set_config('tether.run_scope', %s, false)", (scope_b,))
            records = await _rows(conn, "SELECT * FROM tether_records WHERE thread_id = %s", B)
            assert len(records) == 1


async def test_the_store_s_worker_plane_refuses_a_hold_with_a_wrong_secret(
    store: RunStore, worker: RunStore
) -> None:
    await create(store, A)
    claim_a = await claim_one(worker, "wa")
    run_b = (await create(store, B)).run_id
    claim_b = await claim_one(worker, "wb")
    forged = claim_b.hold._replace(secret=claim_a.secret, worker_id=claim_a.hold.worker_id)
    for call in (
        lambda h: worker.finish(h, Outcome("error", "error")),
        lambda h: worker.release(h, reason="stolen"),
        lambda h: worker.append_events(h, []),
    ):
        with pytest.raises(FenceLostError):
            await call(forged)
    assert (await store.get_run(run_b)).status == "running"
    # A heartbeat renews only the leases whose secrets this store holds.
    held = await worker.heartbeat("wb", lease=30.0)
    assert [h.run_id for h in held] == [run_b]
    assert await worker.verify(run_b, claim_b.run.fence)
    assert not await worker.verify(run_b, claim_b.run.fence + 1)
    for claim in (claim_a, claim_b):
        await worker.finish(claim.hold, Outcome("success", "idle"))


async def test_a_fresh_role_store_heartbeats_nothing_it_did_not_claim(
    two_runs: tuple[Claim, str, Claim | None], admin_url: str, role: str
) -> None:
    claim_a, _, _ = two_runs
    async with open_run_store(role_url(admin_url, role)) as other:
        assert await other.heartbeat("wa", lease=30.0) == []
        assert not await other.verify(claim_a.run.run_id, claim_a.run.fence)


async def test_the_administrator_s_path_is_unchanged(store: RunStore, admin_url: str) -> None:
    assert getattr(store, "scoped", None) is False
    await create(store, A)
    claim = await claim_one(store)
    assert claim.secret == ""
    assert claim.hold == Hold(claim.run.run_id, A, "w1", claim.run.fence)
    assert [h.run_id for h in await store.heartbeat("w1", lease=30.0)] == [claim.run.run_id]
    assert await store.verify(claim.run.run_id, claim.run.fence)
    await store.finish(claim.hold, Outcome("success", "idle"))
