"""A worker role (``tether workers grant``) touches only the thread of a run it holds.

PostgreSQL only: the role's row-level policies admit a checkpoint, record or
step row when the transaction names a run (``tether.run_scope``, set by the
fence check and by the savers' scoped reads) that is running with that fence
right now, and the row belongs to that run's thread.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint

from tests.runtime.roles import role_url
from tests.runtime.store.actions import LEASE, SHORT_LEASE, claim_one, create, held_guard, take_over
from tether import open_checkpointer
from tether.boundaries import LeaseLostError, guarding
from tether.errors import ConfigurationError
from tether.runtime.store import Outcome, RunStore
from tether.runtime.worker_role import WORKER_GROUP, check_role_name, grant_worker_role
from tether.store import store_for

A, B = "thread-a", "thread-b"


def _config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


async def _put(saver: BaseCheckpointSaver[Any], thread_id: str) -> str:
    checkpoint = empty_checkpoint()
    await saver.aput(_config(thread_id), checkpoint, {"source": "loop", "step": 0}, {})
    return str(checkpoint["id"])


@asynccontextmanager
async def _as_role(admin_url: str, role: str) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    async with open_checkpointer(role_url(admin_url, role), encryption=False) as saver:
        yield saver


async def _seed(admin_url: str) -> None:
    """Thread B has a checkpoint, a record and a step, written by the administrator."""
    async with open_checkpointer(admin_url, encryption=False) as saver:
        await _put(saver, B)
        records = store_for(saver)
        await records.insert("scoped", "b-1", {"v": 1}, thread_id=B)
        await records.append_step(B, {"kind": "model"})


async def test_a_worker_role_reads_and_writes_its_own_run_s_thread(
    store: RunStore, worker: RunStore, admin_url: str, role: str
) -> None:
    await create(store, A)
    claim = await claim_one(worker)
    assert len(claim.secret) == 64
    async with _as_role(admin_url, role) as saver:
        assert getattr(saver, "scoped", False) is True
        with guarding(held_guard(claim)):
            assert await saver.aget_tuple(_config(A)) is None
            written = await _put(saver, A)
            item = await saver.aget_tuple(_config(A))
            assert item is not None
            assert item.checkpoint["id"] == written
            await saver.aput_writes(item.config, [("x", 1)], "task-1")
            records = store_for(saver)
            assert await records.insert("scoped", "a-1", {"v": 1}, thread_id=A)
            assert (await records.get("scoped", "a-1")) is not None
            assert await records.append_step(A, {"kind": "model"}) == 0
            assert len(await records.steps(A)) == 1
            assert [c.checkpoint["id"] async for c in saver.alist(_config(A))] == [written]
    await worker.finish(claim.hold, Outcome("success", "idle"))


async def test_a_lease_on_run_a_neither_shows_nor_writes_thread_b(
    store: RunStore, worker: RunStore, admin_url: str, role: str
) -> None:
    await _seed(admin_url)
    await create(store, A)
    claim = await claim_one(worker)
    async with _as_role(admin_url, role) as saver:
        records = store_for(saver)
        with guarding(held_guard(claim)):
            # Reads of another thread see nothing at all.
            assert await saver.aget_tuple(_config(B)) is None
            assert [c async for c in saver.alist(_config(B))] == []
            assert await records.get("scoped", "b-1") is None
            assert await records.list("scoped", thread_id=B) == []
            assert await records.steps(B) == []
            # Writes of another thread are refused, naming the scope.
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="outside this"):
                await _put(saver, B)
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="outside this"):
                await records.insert("scoped", "b-2", {"v": 2}, thread_id=B)
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="outside this"):
                await records.append_step(B, {"kind": "tool"})
            await records.delete_thread(B)  # deletes nothing it cannot see
    async with open_checkpointer(admin_url, encryption=False) as admin:
        assert len([c async for c in admin.alist(_config(B))]) == 1
        assert [r.key for r in await store_for(admin).list("scoped", thread_id=B)] == ["b-1"]
        assert len(await store_for(admin).steps(B)) == 1


async def test_a_stale_lease_opens_nothing(
    store: RunStore, worker: RunStore, admin_url: str, role: str
) -> None:
    await create(store, A)
    old = await claim_one(worker, "w1", lease=SHORT_LEASE)
    async with _as_role(admin_url, role) as saver:
        with guarding(held_guard(old)):
            await _put(saver, A)
            assert await store_for(saver).insert("scoped", "a-1", {"v": 1}, thread_id=A)
        new = await take_over(worker, "w2", lease=LEASE)
        with guarding(held_guard(old)):
            with pytest.raises(LeaseLostError):
                await saver.aget_tuple(_config(A))
            with pytest.raises(LeaseLostError):
                await _put(saver, A)
            with pytest.raises(LeaseLostError):
                await store_for(saver).get("scoped", "a-1")
        with guarding(held_guard(new)):
            assert await saver.aget_tuple(_config(A)) is not None
    await worker.finish(new.hold, Outcome("success", "idle"))


async def test_the_scope_cannot_be_forged_with_set(
    store: RunStore, worker: RunStore, admin_url: str, role: str
) -> None:
    await _seed(admin_url)
    run_a = await create(store, A)
    claim = await claim_one(worker)
    run_b = await create(store, B)
    async with await psycopg.AsyncConnection.connect(
        role_url(admin_url, role), autocommit=True
    ) as conn:
        # No scope at all: refused, with the reason.
        with pytest.raises(psycopg.Error, match="names no run"):
            await conn.execute("SELECT * FROM checkpoints")
        # A scope naming a run that is not running (B is pending) with a guessed fence,
        # even with A's own secret.
        for fence in (0, 1, 2):
            await conn.execute(
                "SELECT set_config('tether.run_scope', %s, false)",
                (f"{run_b.run_id}:{fence}:{claim.secret}",),
            )
            with pytest.raises(psycopg.Error, match="no longer holds") as refused:
                await conn.execute("SELECT * FROM checkpoints WHERE thread_id = %s", (B,))
            assert refused.value.sqlstate == "TL001"
        for garbage in ("garbage", f"{run_a.run_id}:{claim.run.fence}"):  # no secret
            await conn.execute("SELECT set_config('tether.run_scope', %s, false)", (garbage,))
            with pytest.raises(psycopg.Error, match="malformed run scope"):
                await conn.execute("SELECT * FROM tether_records")
        # A's real scope, set by hand, shows A's rows only.
        await conn.execute(
            "SELECT set_config('tether.run_scope', %s, false)",
            (f"{run_a.run_id}:{claim.run.fence}:{claim.secret}",),
        )
        cur = await conn.execute("SELECT DISTINCT thread_id FROM tether_records")
        assert await cur.fetchall() == []
        cur = await conn.execute("SELECT count(*) FROM checkpoints")
        assert await cur.fetchone() == (0,)
        # The role cannot redefine the check, drop the policies or read as the owner.
        for statement in (
            "CREATE OR REPLACE FUNCTION tether_scope_thread() RETURNS text LANGUAGE sql "
            "AS $$ SELECT 'thread-b' $$",
            "ALTER TABLE checkpoints DISABLE ROW LEVEL SECURITY",
            "DROP POLICY tether_scope_select ON checkpoints",
            "SET ROLE postgres",
        ):
            with pytest.raises(psycopg.Error):
                await conn.execute(statement)
    await worker.finish(claim.hold, Outcome("success", "idle"))


async def test_the_grant_is_idempotent_and_others_see_every_row(
    store: RunStore, admin_url: str, role: str
) -> None:
    again = await grant_worker_role(admin_url, role)
    assert again.created is False
    await _seed(admin_url)
    # The administrator (the tables' owner) still reads everything, outside any run.
    async with open_checkpointer(admin_url, encryption=False) as admin:
        assert getattr(admin, "scoped", True) is False
        assert len([c async for c in admin.alist(_config(B))]) == 1


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("Worker", "lowercase"),
        ("1worker", "not starting with a digit"),
        ("w;drop", "lowercase"),
        ("", "1 to 63"),
        ("x" * 64, "1 to 63"),
        ("pg_worker", "reserved"),
        ("public", "reserved"),
        (WORKER_GROUP, "reserved"),
    ],
)
def test_a_bad_role_name_is_refused_with_the_reason(name: str, reason: str) -> None:
    with pytest.raises(ConfigurationError, match=reason):
        check_role_name(name)


@pytest.mark.parametrize(
    ("attribute", "reason"), [("SUPERUSER", "superuser"), ("BYPASSRLS", "BYPASSRLS")]
)
async def test_a_role_that_bypasses_the_policies_is_refused(
    admin_url: str, role: str, attribute: str, reason: str
) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN {attribute}')
    with pytest.raises(ConfigurationError, match=reason):
        await grant_worker_role(admin_url, role)


async def test_the_administrator_itself_is_refused(admin_url: str) -> None:
    with pytest.raises(ConfigurationError, match="reserved"):
        await grant_worker_role(admin_url, "postgres")


async def test_sqlite_and_redis_urls_are_refused(tmp_path: Any) -> None:
    with pytest.raises(ConfigurationError, match="SQLite is a single user"):
        await grant_worker_role(f"sqlite:///{tmp_path / 'x.db'}", "worker")
