"""A process stopped while it sets a PostgreSQL database up does not hold everyone up forever.

tether sets its tables up under advisory locks. A stopped holder (SIGSTOP, a
paused debugger) looks to the server like a session idle inside its
transaction: these tests play that holder with a connection of their own that
takes a lock the way tether does and then sends nothing more.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest

import tether._pg_setup
from tests.backends import fresh_postgres_database
from tether import open_checkpointer
from tether.checkpointing import _postgres as checkpoint_setup
from tether.runtime import migrations
from tether.runtime.store import open_run_store
from tether.server.apikeys import open_key_store
from tether.store import _postgres as record_setup
from tether.store import store_for


@pytest.fixture
def url(servers: dict[str, str]) -> Iterator[str]:
    with fresh_postgres_database(servers["postgres"]) as fresh:
        yield fresh


@asynccontextmanager
async def stopped_holder(url: str, lock_sql: str, params: tuple[Any, ...]) -> AsyncIterator[Any]:
    """A session that took a setup lock as tether does, then went quiet in its transaction."""
    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    try:
        await conn.execute("BEGIN")
        await tether._pg_setup.lock_for_setup(conn.execute, lock_sql, params)
        yield conn
    finally:
        await conn.close()


async def _runtime(url: str) -> None:
    async with open_run_store(url) as store:
        await store.setup()
        assert await store.schema_version() == migrations.LATEST


async def _records(url: str) -> None:
    async with open_checkpointer(url) as saver:
        store = store_for(saver)
        assert await store.get("model", "nothing") is None


async def _api_keys(url: str) -> None:
    async with open_key_store(url):
        pass


SETUPS: dict[str, tuple[str, tuple[Any, ...], Callable[[str], Awaitable[None]]]] = {
    "run store migrations": (migrations._PG_LOCK, (), _runtime),
    "record store": (record_setup._SETUP_LOCK_SQL, (record_setup._SETUP_LOCK,), _records),
    "api keys": (
        "SELECT pg_advisory_xact_lock(hashtextextended('tether.api_keys', 0))",
        (),
        _api_keys,
    ),
}


@pytest.mark.parametrize("which", SETUPS)
async def test_a_setup_goes_on_when_the_lock_holder_is_stopped(
    url: str, which: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock_sql, params, set_up = SETUPS[which]
    monkeypatch.setattr(tether._pg_setup, "SETUP_IDLE_TIMEOUT_MS", 1000)
    async with stopped_holder(url, lock_sql, params) as holder:
        # Without the holder's idle timeout this waits for ever.
        await asyncio.wait_for(set_up(url), 30)
        # The server ended the stopped holder's session; its transaction is gone.
        with pytest.raises(psycopg.errors.IdleInTransactionSessionTimeout):
            await holder.execute("SELECT 1")


async def test_a_live_holder_is_waited_for(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The timeout ends only idle holders: one that finishes its setup is waited for."""
    monkeypatch.setattr(tether._pg_setup, "SETUP_IDLE_TIMEOUT_MS", 1000)
    async with stopped_holder(url, migrations._PG_LOCK, ()) as holder:
        waiting = asyncio.create_task(_runtime(url))
        for _ in range(8):  # busy for 2 s, longer than the idle timeout, never idle 1 s
            await holder.execute("SELECT pg_sleep(0.25)")
        assert not waiting.done()
        await holder.execute("COMMIT")
        await asyncio.wait_for(waiting, 30)
        await holder.execute("SELECT 1")  # still connected: it was never ended


async def test_a_checkpoint_setup_waiting_on_a_holder_names_it(
    url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The checkpoint setup lock is a session lock: the waiter names its holder and the way out."""
    monkeypatch.setattr(checkpoint_setup, "_SETUP_WAIT_WARNING", 0.2)
    holder = await psycopg.AsyncConnection.connect(url, autocommit=True)
    try:
        await holder.execute("SELECT pg_advisory_lock(%s)", (checkpoint_setup._SETUP_LOCK,))
        caplog.set_level(logging.WARNING, logger=checkpoint_setup.__name__)

        async def open_it() -> None:
            async with open_checkpointer(url):
                pass

        opening = asyncio.create_task(open_it())
        for _ in range(100):
            if any("holds tether's setup lock" in r.getMessage() for r in caplog.records):
                break
            await asyncio.sleep(0.05)
        assert not opening.done()
        message = next(r.getMessage() for r in caplog.records if "setup lock" in r.getMessage())
        assert f"backend {holder.info.backend_pid} " in message
        assert f"pg_terminate_backend({holder.info.backend_pid})" in message
    finally:
        await holder.close()  # the lock goes with the session
    await asyncio.wait_for(opening, 30)


_PUT_STEP = (
    "tether_put_step_v2(text,text,text,text,double precision,text,boolean,integer,text,text)"
)


async def test_a_record_store_set_up_meanwhile_is_not_altered_under_its_writers(url: str) -> None:
    """A setup that waited for another process's asks again under the lock: it finds the
    schema done and alters nothing, so it takes no lock its writers hold (a deadlock
    killed a run's step write this way)."""
    await _records(url)  # the schema exists
    function = next(sql for sql in record_setup._SCHEMA if "FUNCTION tether_put_step_v2" in sql)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as admin:
        await admin.execute(f"DROP FUNCTION {_PUT_STEP}")  # incomplete: a setup is due
    writer = await psycopg.AsyncConnection.connect(url, autocommit=True)
    async with stopped_holder(
        url, record_setup._SETUP_LOCK_SQL, (record_setup._SETUP_LOCK,)
    ) as holder:
        await holder.execute(function)  # another process sets it up...
        waiting = asyncio.create_task(_records(url))  # ...while this one waits for its lock
        await asyncio.sleep(0.5)
        assert not waiting.done()
        # A worker's step write holds its row lock on tether_records meanwhile.
        await writer.execute("BEGIN")
        await writer.execute(
            "INSERT INTO tether_records (kind, key, thread_id, value, created_at) "
            "VALUES ('model', 'k', 't', '{}', 0)"
        )
        await holder.execute("COMMIT")
        try:
            await asyncio.wait_for(waiting, 10)
        finally:
            await writer.close()
