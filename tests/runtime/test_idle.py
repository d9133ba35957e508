"""A suspended run costs a worker nothing: 1,000 runs waiting on a person, one process.

A run that stops at an interrupt ends its task and hands its lease back, so a
worker's threads and memory after 1,000 suspended runs are those it had after
200. The worker is first brought to its steady size, as a busy worker is:
its thread pool grown to its cap (it grows with the load, whatever the runs
are: from 2 threads to 7 on PostgreSQL), and its connection pools and
allocator by the first 200 suspended runs (measured: +2.4 to +5.9 MB from 1
run to 200, then a slope of 3 to 5 kB a run, which is the allocator's, not
held objects: tracemalloc in a worker found at most 0.8 kB a run of Python objects).
Measured from ``/proc/PID/status`` of a real ``tether worker`` process; the
bounds are on memory and threads, never on time.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import pytest

from tests.runtime.workers import Workers
from tether.runtime.api import Runtime
from tether.runtime.models import RunStatus

RUNS = 1000
WARM_RUNS = 200
BATCH = 50
CONCURRENCY = 16
# How much the worker's resident memory may grow between 200 and 1,000 suspended
# runs: 10 kB a run (measured: 2.6 MB on PostgreSQL, 3.7 MB on SQLite, of some
# 115 MB; a run's state kept in memory would be far more).
RSS_SLACK_KB = 8 * 1024


async def _batched(items: Iterable[Any], call: Callable[[Any], Awaitable[Any]]) -> None:
    """``call`` on every item, ``BATCH`` at a time."""
    pending = list(items)
    for start in range(0, len(pending), BATCH):
        await asyncio.gather(*(call(item) for item in pending[start : start + BATCH]))


async def _until_count(runtime: Runtime, status: RunStatus, count: int, within: float) -> None:
    """Wait until ``count`` runs are ``status``; fail if any run failed, or if no run
    reached it for ``within`` seconds (a stall, not a slow machine)."""
    loop = asyncio.get_running_loop()
    seen, progressed = -1, loop.time()
    while True:
        found = await runtime.list(status=status, limit=count + 1)
        if len(found) >= count:
            return
        failed = await runtime.list(status="error", limit=5)
        assert not failed, failed
        if len(found) > seen:
            seen, progressed = len(found), loop.time()
        stalled = loop.time() - progressed
        assert stalled < within, f"{len(found)}/{count} runs are {status}; none for {within} s"
        await asyncio.sleep(0.2)


async def _fill_the_thread_pool(runtime: Runtime, workers: Workers) -> None:
    """Grow the worker's thread pool to its cap, as a busy worker's is.

    The event loop's default thread pool starts its threads on demand, up to
    ``min(32, CPUs + 4)``, and keeps them: LangGraph runs sync nodes there and
    its checkpointers serialize every checkpoint there, so how many a worker has
    depends on how many such calls overlapped so far. Each run of ``hold``
    blocks a pool thread until ``release`` exists: once as many as the cap (or
    the worker's concurrency) block at once, the pool has every thread it will
    ever have.
    """
    warm = [
        (await runtime.create("hold", thread_id=f"warm-{i}", input={"n": i})).run_id
        for i in range(CONCURRENCY)
    ]
    # The worker runs on this machine: its pool's cap is the one computed here.
    want = min(32, (os.cpu_count() or 1) + 4, CONCURRENCY)
    holding = workers.workdir / "holding"
    end = asyncio.get_running_loop().time() + 120
    while not holding.exists() or len(holding.read_text().splitlines()) < want:
        assert asyncio.get_running_loop().time() < end, "the runs never held the pool's threads"
        await asyncio.sleep(0.1)
    (workers.workdir / "release").touch()
    for run_id in warm:
        assert (await runtime.wait(run_id, timeout=60)).status == "success"


@pytest.mark.slow
async def test_a_thousand_suspended_runs_hold_no_thread_and_little_memory_then_all_resume(
    runtime: Runtime, workers: Workers
) -> None:
    workers.start(1, concurrency=CONCURRENCY)
    await _fill_the_thread_pool(runtime, workers)
    runs: list[str] = []

    async def create(i: int) -> None:
        run = await runtime.create("ask_once", thread_id=f"idle-{i}", input={"n": i})
        runs.append(run.run_id)

    await _batched(range(WARM_RUNS), create)
    await _until_count(runtime, "interrupted", WARM_RUNS, within=60)
    rss_warm, threads_warm = workers.rss_kb(0), workers.threads(0)

    await _batched(range(WARM_RUNS, RUNS), create)
    await _until_count(runtime, "interrupted", RUNS, within=60)
    rss_all, threads_all = workers.rss_kb(0), workers.threads(0)
    held = await runtime.list(status="running", limit=10)
    assert held == []

    assert threads_all == threads_warm, (threads_warm, threads_all)
    assert rss_all - rss_warm <= RSS_SLACK_KB, (
        f"RSS {rss_warm} kB with {WARM_RUNS} suspended runs, {rss_all} kB with {RUNS}"
    )

    await _batched(runs, lambda run_id: runtime.resume(run_id, {"resume": "yes"}))
    await _until_count(runtime, "success", CONCURRENCY + RUNS, within=60)
    assert await runtime.list(status="interrupted", limit=10) == []
    assert workers.procs[0].poll() is None, workers.log(0)
