"""A transaction left idle by a stopped process is aborted by the server, releasing its locks.

A worker SIGSTOPped (or paused in a debugger, or cut off) inside a transaction
would otherwise hold its locks until it wakes, and every other process waiting
on them (a worker taking over its runs) would wait too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.backends import Backend, fresh_backend
from tether.checkpointing import innermost
from tether.checkpointing._postgres import _SETUP_LOCK, IDLE_TRANSACTION_TIMEOUT_MS


@pytest.fixture
def postgres_backend(servers: dict[str, str], tmp_path: Path) -> Iterator[Backend]:
    with fresh_backend("postgres", servers, tmp_path) as backend:
        yield backend


async def test_every_pooled_connection_has_the_idle_transaction_timeout(
    postgres_backend: Backend,
) -> None:
    async with postgres_backend.open() as saver:
        pool: Any = saver.conn  # type: ignore[attr-defined]
        async with pool.connection() as conn:
            row = await (await conn.execute("SHOW idle_in_transaction_session_timeout")).fetchone()
    assert row is not None
    assert row["idle_in_transaction_session_timeout"] == f"{IDLE_TRANSACTION_TIMEOUT_MS // 1000}s"


async def test_a_lock_held_by_an_idle_transaction_is_released(postgres_backend: Backend) -> None:
    async with postgres_backend.open() as saver:
        pool: Any = saver.conn  # type: ignore[attr-defined]
        async with pool.connection() as holder:
            await holder.execute("BEGIN")
            await holder.execute("SELECT pg_advisory_xact_lock(4242)")
            # The holder now sits idle, as a stopped process would.
            async with await psycopg.AsyncConnection.connect(
                postgres_backend.url, autocommit=True
            ) as waiter:
                took = asyncio.get_running_loop().time()
                await asyncio.wait_for(
                    waiter.execute("SELECT pg_advisory_xact_lock(4242)"),
                    timeout=IDLE_TRANSACTION_TIMEOUT_MS / 1000 + 10,
                )
                waited = asyncio.get_running_loop().time() - took
            assert waited >= IDLE_TRANSACTION_TIMEOUT_MS / 1000 - 1
            with pytest.raises(psycopg.errors.IdleInTransactionSessionTimeout):
                await holder.execute("SELECT 1")


async def test_a_held_setup_lock_does_not_stop_opening_a_migrated_database(
    postgres_backend: Backend,
) -> None:
    async with postgres_backend.open():
        pass  # migrated
    async with await psycopg.AsyncConnection.connect(postgres_backend.url, autocommit=True) as held:
        # A process stopped while opening the database holds the setup lock, idle.
        await held.execute("SELECT pg_advisory_lock(%s)", (_SETUP_LOCK,))
        async with asyncio.timeout(30), postgres_backend.open() as saver:
            assert await innermost(saver).migrated()  # type: ignore[attr-defined]
