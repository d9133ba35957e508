"""SIGTERM: a worker stops claiming, hands its run back at the next step, and exits;
another worker finishes the run from where it was, repeating no step."""

from __future__ import annotations

import asyncio
import signal

from tests.runtime.stored import thread_values
from tests.runtime.workers import Workers
from tether.runtime import Runtime


async def test_sigterm_hands_the_run_back_and_another_worker_finishes_it(
    runtime: Runtime, workers: Workers, runtime_url: str
) -> None:
    env = {"TETHER_LOOP_N": "20"}
    workers.start(1, extra_env=env)
    run = await runtime.create("loop_n", thread_id="term-1", input={"n": 0})
    async for event in runtime.follow(run.run_id):
        if event.kind == "node.finished":
            break
    workers.signal(0, signal.SIGTERM)
    # The worker exits on its own, well within its grace period.
    code = await asyncio.to_thread(workers.procs[0].wait, 30)
    assert code == 0
    handed = await runtime.get(run.run_id)
    assert handed.status == "pending", handed
    assert handed.worker_id is None
    kinds = [e.kind for e in await runtime.events(run.run_id)]
    assert kinds[-1] == "run.released"

    workers.start(1, extra_env=env)
    done = await runtime.wait(run.run_id, timeout=60)
    assert done.status == "success"
    assert done.fence == 2
    # Every tick ran once: the second worker continued from the handed-back checkpoint.
    assert (await thread_values(runtime_url, "term-1"))["trace"] == [f"tick{i}" for i in range(20)]
    workers_seen = {e.worker_id for e in await runtime.events(run.run_id) if e.worker_id}
    assert workers_seen == {"w0", "w1"}
