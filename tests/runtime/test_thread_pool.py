"""Sync nodes calling a durable tool, more at once than the event loop's thread pool has.

LangGraph runs a sync node on the event loop's default thread pool (at most
``min(32, CPUs + 4)`` threads). A durable tool called there hands its work to
the worker's loop and waits for it. On PostgreSQL the runs then never finish
(SQLite was fine) until tether's PostgreSQL saver stopped waiting for a pool
thread while holding its lock: upstream ``AsyncPostgresSaver`` serialized
checkpoints there (``asyncio.to_thread``) inside the lock every other saver call
and every durable tool's wait queued behind.
"""

from __future__ import annotations

import os

import pytest

from tests.runtime.workers import Workers
from tether.runtime.api import Runtime


@pytest.mark.slow
async def test_more_runs_in_sync_durable_tools_than_pool_threads_all_finish(
    runtime: Runtime, workers: Workers
) -> None:
    # The worker runs on this machine: its pool's cap is the one computed here.
    runs = min(32, (os.cpu_count() or 1) + 4) + 2
    (workers.workdir / "release").touch()  # slow_effect's charge does not wait
    workers.start(1, concurrency=runs)
    created = [
        await runtime.create("slow_effect", thread_id=f"pool-{i}", input={"n": i})
        for i in range(runs)
    ]
    for run in created:
        assert (await runtime.wait(run.run_id, timeout=60)).status == "success"
