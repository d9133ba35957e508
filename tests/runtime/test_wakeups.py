"""Who is woken, and how often: waiters by a run's end, claimers by a claimable run.

A ``runs.wait`` used to read the run again on every ``events`` signal, and a
run appends a batch of events every few milliseconds; a worker claimed again
right after each claim, and again after each run it finished, though nothing
new was claimable. Each read or claim was a round trip to the database for
nothing. These tests count the reads and claims, and take the timers out of
play (a wait's fallback poll is set to an hour), so a wait that returns was
woken by the run's end.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.backends import fresh_postgres_database
from tests.runtime.workers import PROJECT
from tether.runtime import Run, Runtime, Worker, execution
from tether.runtime import api as runtime_api
from tether.runtime.project import Project
from tether.runtime.store.base import NewEvent

EVENTS = 10


@pytest.fixture
def postgres_url(servers: dict[str, str]) -> Iterator[str]:
    with fresh_postgres_database(servers["postgres"]) as url:
        yield url


async def _until(check: Any) -> None:
    """Yield to the loop until ``check()`` holds (bounded: never hangs)."""
    for _ in range(3000):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("never happened")


async def test_a_wait_is_woken_by_the_run_s_end_and_reads_nothing_per_event(
    runtime: Runtime, runtime_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runtime_api, "WAIT_POLL", 3600.0)  # no timer ends this wait
    run = await runtime.create("three_node", thread_id="waited", input={"trace": []})
    reads = 0
    get = runtime.get

    async def counted(run_id: str) -> Run:
        nonlocal reads
        reads += 1
        return await get(run_id)

    monkeypatch.setattr(runtime, "get", counted)
    waiting = asyncio.create_task(runtime.wait(run.run_id))
    try:
        await _until(lambda: reads == 1)
        async with runtime.notifier.subscribe("events", run.run_id) as seen:
            for i in range(EVENTS):
                await runtime.store.add_events(run.run_id, [NewEvent("note", {"i": i})])
                assert await seen.wait(30), "the event's signal never came"
                await asyncio.sleep(0)  # the waiter runs, if it was woken
        assert not waiting.done()
        if runtime_url.startswith("postgresql"):  # SQLite wakes everyone on every commit
            assert reads == 1, f"{reads - 1} reads for {EVENTS} events"
        await runtime.cancel(run.run_id)  # no worker: a pending run ends at once
        done = await asyncio.wait_for(waiting, 30)
    finally:
        waiting.cancel()
    assert done.status == "cancelled"


async def test_a_worker_claims_once_per_signalled_run(postgres_url: str) -> None:
    runs = 5
    async with Runtime(postgres_url, graphs=Project.load(PROJECT).graph_ids) as runtime:
        worker = Worker(postgres_url, PROJECT, concurrency=4, lease=60.0)  # timed claims: 15 s
        serving = asyncio.create_task(worker.run())
        try:
            for i in range(runs):
                run = await runtime.create("three_node", thread_id=f"t-{i}", input={"trace": []})
                assert (await runtime.wait(run.run_id, timeout=60)).status == "success"
        finally:
            worker.stop(grace=False)
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(serving, 30)
    assert worker.claimed == runs
    # one claim at start, one per created run (a timed claim if the test is slow);
    # it was three per run: the claim again after a claim, the one after each finish
    assert worker.claim_queries <= runs + 2, worker.claim_queries


async def test_a_finished_run_wakes_claimers_for_the_run_queued_behind_it(
    postgres_url: str,
) -> None:
    """The thread a run frees is signalled when a run waits for it (no timed claim
    plays a part: the worker's lease is long)."""
    async with Runtime(postgres_url, graphs=Project.load(PROJECT).graph_ids) as runtime:
        first = await runtime.create("three_node", thread_id="shared", input={"trace": []})
        second = await runtime.create(
            "three_node", thread_id="shared", input={"trace": []}, multitask_strategy="enqueue"
        )
        worker = Worker(postgres_url, PROJECT, concurrency=4, lease=600.0)
        serving = asyncio.create_task(worker.run())  # claims the first; the second waits
        try:
            for run in (first, second):
                assert (await runtime.wait(run.run_id, timeout=60)).status == "success"
        finally:
            worker.stop(grace=False)
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(serving, 30)
    assert worker.claimed == 2


async def test_a_run_s_first_event_is_written_at_once_not_at_the_flush_interval(
    runtime: Runtime,
    runtime_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ``metadata`` event (a stream's first frame) is written when the run starts,
    not a flush interval later: with the interval an hour, it is there while the run
    still blocks in its node."""
    monkeypatch.setattr(execution, "_FLUSH_EVERY", 3600.0)
    monkeypatch.setenv("TETHER_TEST_WORKDIR", str(tmp_path))
    worker = Worker(runtime_url, PROJECT, concurrency=2, lease=2.0)
    serving = asyncio.create_task(worker.run())
    try:
        run = await runtime.create("hold", thread_id="first", input={"n": 0})
        seen = await runtime.events(run.run_id, kinds=["metadata"], wait=30)
        assert [e.kind for e in seen] == ["metadata"]
        assert (await runtime.get(run.run_id)).status == "running"
        (tmp_path / "release").touch()
        assert (await runtime.wait(run.run_id, timeout=60)).status == "success"
    finally:
        (tmp_path / "release").touch()
        worker.stop(grace=False)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(serving, 30)
