"""Temporary threads of stateless runs: deleted with their checkpoints once their runs
stopped (``Runtime.delete_temporary_threads``, and the scheduler's cleanup)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.runtime.workers import Workers
from tether import open_checkpointer
from tether.runtime import RunNotFoundError, Scheduler, ThreadNotFoundError, temporary
from tether.runtime.api import Runtime


async def _checkpoints(url: str, thread_id: str) -> int:
    async with open_checkpointer(url) as saver:
        return len([c async for c in saver.alist({"configurable": {"thread_id": thread_id}})])


async def test_a_stopped_temporary_thread_is_deleted_with_its_checkpoints(
    runtime: Runtime, workers: Workers, runtime_url: str
) -> None:
    temporary = await runtime.create("three_node", input={"trace": []})
    kept = await runtime.create("three_node", input={"trace": []}, on_completion="keep")
    stateful = await runtime.create("three_node", thread_id="t-kept", input={"trace": []})
    workers.start(1)
    for run in (temporary, kept, stateful):
        assert (await runtime.wait(run.run_id, timeout=60)).status == "success"
    assert (await runtime.get_thread(temporary.thread_id)).temporary
    assert await _checkpoints(runtime_url, temporary.thread_id) > 0
    # Within the grace period the thread stays, so its result can still be read.
    assert await runtime.delete_temporary_threads(grace=3600) == []
    assert await runtime.delete_temporary_threads(grace=0) == [temporary.thread_id]
    with pytest.raises(ThreadNotFoundError):
        await runtime.get_thread(temporary.thread_id)
    with pytest.raises(RunNotFoundError):
        await runtime.get(temporary.run_id)
    assert await _checkpoints(runtime_url, temporary.thread_id) == 0
    for run in (kept, stateful):
        assert (await runtime.get_thread(run.thread_id)).values["trace"] == ["a", "b", "c"]
        assert await _checkpoints(runtime_url, run.thread_id) > 0
    assert await runtime.delete_temporary_threads(grace=0) == []


async def test_delete_thread_deletes_rows_and_checkpoints(
    runtime: Runtime, workers: Workers, runtime_url: str
) -> None:
    run = await runtime.create("three_node", thread_id="t-gone", input={"trace": []})
    workers.start(1)
    await runtime.wait(run.run_id, timeout=60)
    await runtime.delete_thread("t-gone")
    with pytest.raises(ThreadNotFoundError):
        await runtime.get_thread("t-gone")
    assert await _checkpoints(runtime_url, "t-gone") == 0
    with pytest.raises(ThreadNotFoundError):
        await runtime.delete_thread("t-gone")


async def test_the_schedulers_cleanup_deletes_them_after_the_grace(
    runtime: Runtime, workers: Workers, runtime_url: str
) -> None:
    run = await runtime.create("three_node", input={"trace": []})
    workers.start(1, extra_args=["--no-scheduler"])
    await runtime.wait(run.run_id, timeout=60)
    scheduler = Scheduler(runtime)
    now = datetime.now(UTC)
    assert (await scheduler.tick(now)).temporary_threads_removed == []
    later = now + timedelta(seconds=temporary.GRACE + 1)
    assert (await scheduler.tick(later)).temporary_threads_removed == [run.thread_id]
    with pytest.raises(ThreadNotFoundError):
        await runtime.get_thread(run.thread_id)
    assert await _checkpoints(runtime_url, run.thread_id) == 0
