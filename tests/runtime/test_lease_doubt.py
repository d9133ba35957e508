"""A run whose lease a worker only *believes* lost is handed back, never left running.

A worker that decides a run's lease is lost drops the run without writing. When
the store still says that worker holds it (the verdict was wrong: a heartbeat
answered before the run's claim was visible to it), the row would stay
``running`` with a lease the worker's own heartbeats keep renewing, and no one
would ever finish it. The worker now hands such a run back (a fenced release,
which writes nothing when another worker really holds it), and it finishes.
"""

from __future__ import annotations

import asyncio
import contextlib

from tests.runtime.workers import PROJECT
from tether.runtime import Runtime, Worker


async def test_a_run_wrongly_believed_lost_is_handed_back_and_finishes(
    runtime: Runtime, runtime_url: str
) -> None:
    worker = Worker(runtime_url, PROJECT, concurrency=2, lease=2.0)
    serving = asyncio.create_task(worker.run())
    try:
        run = await runtime.create("loop_n", thread_id="doubt", input={"n": 0})
        for _ in range(400):
            if run.run_id in worker._held:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the worker never claimed the run")
        worker._held[run.run_id][0].lost = True  # the wrong verdict
        done = await runtime.wait(run.run_id, timeout=60)
        assert done.status == "success", done
        released = [e for e in await runtime.events(run.run_id) if e.kind == "run.released"]
        assert [e.data["reason"] for e in released] == ["lease in doubt"]
        assert done.attempt == 1  # handing back does not spend an attempt
    finally:
        worker.stop(grace=False)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(serving, 30)
