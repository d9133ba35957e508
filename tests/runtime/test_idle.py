"""A suspended run costs a worker nothing: 1,000 runs waiting on a person, one process.

A run that stops at an interrupt ends its task and hands its lease back, so a
worker's threads and memory after 1,000 suspended runs are those it had after
one. The worker is first warmed up with the same load: until then its
connection pools and the event loop's thread pool (LangGraph's checkpointers
serialize every checkpoint on it) are still growing to their working size,
from 2 threads to 7 on PostgreSQL, whatever the runs are.
Measured from ``/proc/PID/status`` of a real ``tether worker`` process; the
bounds are on memory and threads, never on time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import pytest

from tests.runtime.workers import Workers
from tether.runtime.api import Runtime
from tether.runtime.models import RunStatus

RUNS = 1000
WARM_UP = 100
BATCH = 50
CONCURRENCY = 16
# How much the worker's resident memory may grow between 1 and 1,000 suspended
# runs (measured: about 3.4% on both stores, some 3 kB per run executed).
RSS_SLACK = 0.05


async def _batched(items: Iterable[Any], call: Callable[[Any], Awaitable[Any]]) -> None:
    """``call`` on every item, ``BATCH`` at a time."""
    pending = list(items)
    for start in range(0, len(pending), BATCH):
        await asyncio.gather(*(call(item) for item in pending[start : start + BATCH]))


async def _until_count(runtime: Runtime, status: RunStatus, count: int, within: float) -> None:
    """Wait until ``count`` runs are ``status`` (failing early if any run failed)."""
    end = asyncio.get_running_loop().time() + within
    while True:
        found = await runtime.list(status=status, limit=count + 1)
        if len(found) >= count:
            return
        failed = await runtime.list(status="error", limit=5)
        assert not failed, failed
        assert asyncio.get_running_loop().time() < end, f"{len(found)}/{count} runs are {status}"
        await asyncio.sleep(0.2)


@pytest.mark.slow
async def test_a_thousand_suspended_runs_hold_no_thread_and_little_memory_then_all_resume(
    runtime: Runtime, workers: Workers
) -> None:
    workers.start(1, concurrency=CONCURRENCY)
    # Warm the worker up with the same load first (runs created in batches, suspended,
    # resumed): its connection pools and the event loop's thread pool grow to their
    # working size once, whatever the runs.
    warm: list[str] = []

    async def create_warm(i: int) -> None:
        run = await runtime.create("ask_once", thread_id=f"warm-{i}", input={"n": i})
        warm.append(run.run_id)

    await _batched(range(WARM_UP), create_warm)
    await _until_count(runtime, "interrupted", WARM_UP, within=120)
    await _batched(warm, lambda run_id: runtime.resume(run_id, {"resume": "yes"}))
    await _until_count(runtime, "success", WARM_UP, within=120)
    first = await runtime.create("ask_once", thread_id="idle-0", input={"n": 0})
    assert (await runtime.wait(first.run_id, timeout=60)).status == "interrupted"
    rss_one, threads_one = workers.rss_kb(0), workers.threads(0)

    runs = [first.run_id]

    async def create(i: int) -> None:
        run = await runtime.create("ask_once", thread_id=f"idle-{i}", input={"n": i})
        runs.append(run.run_id)

    await _batched(range(1, RUNS), create)
    await _until_count(runtime, "interrupted", RUNS, within=120)
    rss_all, threads_all = workers.rss_kb(0), workers.threads(0)
    held = await runtime.list(status="running", limit=10)
    assert held == []

    assert threads_all == threads_one, (threads_one, threads_all)
    assert rss_all <= rss_one * (1 + RSS_SLACK), (
        f"RSS {rss_one} kB with 1 suspended run, {rss_all} kB with {RUNS}"
    )

    await _batched(runs, lambda run_id: runtime.resume(run_id, {"resume": "yes"}))
    await _until_count(runtime, "success", WARM_UP + RUNS, within=120)
    assert await runtime.list(status="interrupted", limit=10) == []
    assert workers.procs[0].poll() is None, workers.log(0)
