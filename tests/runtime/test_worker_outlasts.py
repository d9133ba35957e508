"""A worker outlasts store errors that pass on their own, instead of exiting.

SQLite: another process keeps the file's one write lock past the busy timeout
(a long transaction, or a process descheduled inside its commit on a loaded
host). PostgreSQL: the server drops every connection (a restart, a failover,
``pg_terminate_backend``). Either way the worker logs, waits and carries on.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3

import psycopg
import pytest

from tests.backends import drop_postgres_connections, sqlite_write_lock
from tests.runtime.stored import thread_values
from tests.runtime.workers import Workers
from tests.tcp_proxy import proxied
from tether.runtime.api import Runtime
from tether.runtime.store.transient import is_transient

pytestmark = pytest.mark.slow


async def _finishes(url: str) -> None:
    async with Runtime(url) as fresh:
        run = await fresh.create("three_node", thread_id="t-after", input={"trace": []})
        assert (await fresh.wait(run.run_id, timeout=60)).status == "success"


@pytest.mark.parametrize("runtime_url", ["sqlite"], indirect=True)
async def test_a_worker_waits_out_the_sqlite_write_lock_at_start_and_while_claiming(
    runtime: Runtime, workers: Workers, runtime_url: str
) -> None:
    await runtime.checkpointer()  # the checkpoint tables exist before the lock is taken
    with sqlite_write_lock(runtime_url):
        (index,) = workers.start(1)
        await asyncio.to_thread(workers.wait_log, index, "registration failed, retrying", 60)
    await asyncio.to_thread(workers.wait_ready, [index])
    with sqlite_write_lock(runtime_url):
        await asyncio.to_thread(workers.wait_log, index, "claim failed, retrying", 60)
        assert workers.procs[index].poll() is None
    await _finishes(runtime_url)
    log = workers.log(index)
    assert "database is locked" in log
    assert workers.procs[index].poll() is None, log


@pytest.mark.parametrize("runtime_url", ["postgres"], indirect=True)
async def test_a_worker_outlasts_postgresql_dropping_every_connection(
    runtime: Runtime, workers: Workers, runtime_url: str
) -> None:
    (index,) = workers.start(1)
    await asyncio.to_thread(workers.wait_ready, [index])
    assert drop_postgres_connections(runtime_url) >= 1
    await asyncio.to_thread(workers.wait_log, index, "claim failed, retrying", 60)
    await _finishes(runtime_url)
    assert workers.procs[index].poll() is None, workers.log(index)


def test_only_errors_that_pass_on_their_own_are_transient() -> None:
    assert is_transient(sqlite3.OperationalError("database is locked"))
    assert is_transient(psycopg.OperationalError("the connection is lost"))
    assert not is_transient(sqlite3.OperationalError("no such table: tether_runs"))
    assert not is_transient(sqlite3.IntegrityError("UNIQUE constraint failed"))
    assert not is_transient(psycopg.errors.UndefinedTable("relation does not exist"))
    assert not is_transient(ValueError("database is locked"))


@pytest.mark.parametrize("runtime_url", ["sqlite"], indirect=True)
async def test_a_run_that_meets_a_transient_store_error_runs_again_from_its_checkpoint(
    runtime: Runtime, workers: Workers, runtime_url: str
) -> None:
    (workers.workdir / "blips").write_text("1")
    workers.start(1)
    run = await runtime.create("blips", thread_id="t-blip", input={"trace": []})
    done = await runtime.wait(run.run_id, timeout=60)
    assert done.status == "success", done
    # (More than one retry only if a loaded machine also cost a lease.)
    assert done.attempt >= 2
    events = await runtime.events(run.run_id)
    assert [e.kind for e in events].count("run.released") >= 1
    errors = [e.data for e in events if e.kind == "error"]
    assert any(data.get("error") == "OperationalError" for data in errors), errors
    # "a" ran once: the second attempt went on from the checkpoint after it.
    assert (await thread_values(runtime_url, "t-blip"))["trace"] == ["a", "blip"]


@pytest.mark.parametrize("runtime_url", ["sqlite"], indirect=True)
async def test_a_run_whose_store_errors_do_not_pass_fails_after_its_attempts(
    runtime: Runtime, workers: Workers
) -> None:
    (workers.workdir / "blips").write_text("100")
    workers.start(1)
    run = await runtime.create("blips", thread_id="t-blips", input={"trace": []})
    done = await runtime.wait(run.run_id, timeout=60)
    assert done.status == "error", done
    # The last attempt ends with the error itself, not with "max attempts exceeded"
    # (which only a lease lost on a loaded machine, taken over, would spend first).
    assert done.error is not None
    started = [e.data for e in await runtime.events(run.run_id) if e.kind == "run.started"]
    if not any("took_over_from" in data for data in started):
        assert done.error["error"] == "OperationalError", done.error
        assert done.attempt == 3
    met = 100 - int((workers.workdir / "blips").read_text())
    assert 2 <= met <= 3, met  # an attempt each, three at most (one may go to a lost lease)


@pytest.mark.parametrize("runtime_url", ["postgres"], indirect=True)
async def test_a_worker_whose_database_is_gone_still_stops_on_sigterm(
    runtime: Runtime, workers: Workers, runtime_url: str
) -> None:
    with proxied(runtime_url) as proxy:
        gone = Workers(proxy.url(runtime_url), workers.workdir)
        try:
            (index,) = gone.start(1)
            await asyncio.to_thread(gone.wait_ready, [index])
            proxy.cut()
            await asyncio.to_thread(gone.wait_log, index, "claim failed, retrying", 60)
            gone.signal(index, signal.SIGTERM)
            # Each call in flight gets a second, the scheduler's tick the shutdown grace
            # (10 s here); nothing waits out the pool's 30 s connection timeout.
            code = await asyncio.to_thread(gone.procs[index].wait, 40)
        finally:
            gone.stop_all()
    assert code == 0, gone.log(index)
