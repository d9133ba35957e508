"""The bookkeeping of record writes in flight (``tether._in_flight``), on its own event loop.

Which saver write waits for which record write, which raises a failure, and
which forgets it: the rules the savers and the step layer rely on.
"""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest

from tests.steps.test_in_flight import _in_flight_for
from tether import _in_flight


class WriteFailed(Exception):
    pass


async def _fails() -> None:
    await asyncio.sleep(0)
    raise WriteFailed("the record was not written")


def _thread() -> str:
    return f"bookkeeping-{uuid.uuid4().hex}"


async def test_a_task_waits_only_for_its_own_writes() -> None:
    thread, gate = _thread(), asyncio.Event()
    landed: list[str] = []

    async def write(name: str, wait: bool) -> None:
        if wait:
            await gate.wait()
        landed.append(name)

    _in_flight.start(thread, "", "slow", write("slow", True))
    _in_flight.start(thread, "", "quick", write("quick", False))
    await _in_flight.settle_task(thread, "quick")
    assert landed == ["quick"]
    checkpoint = asyncio.create_task(_in_flight.settle_thread(thread, ""))
    await asyncio.sleep(0.01)
    assert not checkpoint.done()  # a checkpoint waits for every write of its thread
    gate.set()
    await checkpoint
    assert landed == ["quick", "slow"]
    assert _in_flight_for(thread) == 0


async def test_a_failure_is_raised_by_every_write_until_a_checkpoint_raised_it() -> None:
    thread = _thread()
    _in_flight.start(thread, "", "t1", _fails())
    for _ in range(2):  # the task's writes, however often they are tried
        with pytest.raises(WriteFailed):
            await _in_flight.settle_task(thread, "t1")
    await _in_flight.settle_task(thread, "other")  # another task's writes are not refused
    with pytest.raises(WriteFailed):
        await _in_flight.settle_thread(thread, "")
    await _in_flight.settle_thread(thread, "")  # forgotten once the checkpoint raised it
    await _in_flight.settle_task(thread, "t1")
    assert _in_flight_for(thread) == 0


async def test_writes_of_only_an_error_or_an_interrupt_forget_the_failure() -> None:
    thread = _thread()
    config = {"configurable": {"thread_id": thread}}
    _in_flight.start(thread, "", "t1", _fails())
    with pytest.raises(WriteFailed):
        await _in_flight.before_task_writes(config, [("messages", "answer")], "t1")
    with pytest.raises(WriteFailed):  # no writes at all: the failure stays
        await _in_flight.before_task_writes(config, [], "t1")
    with pytest.raises(WriteFailed):
        await _in_flight.before_task_writes(config, [("__error__", "boom")], "t1")
    await _in_flight.before_task_writes(config, [("messages", "answer")], "t1")
    assert _in_flight_for(thread) == 0


async def test_a_subgraph_checkpoint_forgets_its_own_failures_not_its_parents() -> None:
    thread, child = _thread(), "agent:1"
    _in_flight.start(thread, "", "parent-task", _fails())
    _in_flight.start(thread, child, "child-task", _fails())
    with pytest.raises(WriteFailed):
        await _in_flight.settle_thread(thread, child)
    with pytest.raises(WriteFailed):  # the parent's failure is still there
        await _in_flight.settle_task(thread, "parent-task")
    await _in_flight.settle_task(thread, "child-task")  # the child's is forgotten
    with pytest.raises(WriteFailed):
        await _in_flight.before_checkpoint({"configurable": {"thread_id": thread}})
    await _in_flight.settle_thread(thread, "")
    assert _in_flight_for(thread) == 0


async def test_the_root_checkpoint_forgets_a_subgraph_failure_its_graph_never_raised() -> None:
    thread = _thread()
    _in_flight.start(thread, "agent:1|inner:2", "deep", _fails())
    with pytest.raises(WriteFailed):
        await _in_flight.settle_thread(thread, "")
    await _in_flight.settle_thread(thread, "")
    assert _in_flight_for(thread) == 0


def test_a_write_started_on_another_loop_is_awaited_on_its_own() -> None:
    thread = _thread()
    other = asyncio.new_event_loop()
    landed: list[str] = []

    async def write() -> None:
        await asyncio.sleep(0.01)
        landed.append("landed")

    async def begin() -> None:
        _in_flight.start(thread, "", "t1", write())

    runner = threading.Thread(target=other.run_forever, daemon=True)
    runner.start()
    try:
        asyncio.run_coroutine_threadsafe(begin(), other).result(5)
        asyncio.run(_in_flight.settle_thread(thread, ""))
        assert landed == ["landed"]
    finally:
        other.call_soon_threadsafe(other.stop)
        runner.join(5)
        other.close()
    assert _in_flight_for(thread) == 0
