"""Each multitask strategy on a busy thread, with a real worker executing both runs.

The first run ticks ``loop_n`` 0.1 s at a time; the second is created while the
first is running, with one of LangGraph's four strategies.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.runtime.stored import thread_values
from tests.runtime.workers import Workers
from tether import open_checkpointer
from tether.runtime import Run, Runtime, ThreadBusyError

LOOP = {"TETHER_LOOP_N": "20"}


async def _running(runtime: Runtime, thread_id: str, input: dict[str, Any]) -> Run:
    """A ``loop_n`` run on ``thread_id`` that has finished at least one step."""
    run = await runtime.create("loop_n", thread_id=thread_id, input=input)
    async for event in runtime.follow(run.run_id):
        if event.kind == "node.finished":
            return await runtime.get(run.run_id)
    raise AssertionError(f"run {run.run_id} ended before finishing a step")


async def test_reject_refuses_the_new_run_and_leaves_the_running_one_alone(
    runtime: Runtime, workers: Workers
) -> None:
    workers.start(1, extra_env=LOOP)
    first = await _running(runtime, "mt-reject", {"n": 0})
    with pytest.raises(ThreadBusyError, match="already running a task"):
        await runtime.create("loop_n", thread_id="mt-reject", multitask_strategy="reject")
    assert [r.run_id for r in await runtime.list(thread_id="mt-reject")] == [first.run_id]
    assert (await runtime.wait(first.run_id, timeout=60)).status == "success"


async def test_interrupt_stops_the_running_run_and_the_new_one_continues_its_state(
    runtime: Runtime, workers: Workers, runtime_url: str
) -> None:
    workers.start(1, extra_env=LOOP)
    first = await _running(runtime, "mt-int", {"n": 0})
    second = await runtime.create(
        "loop_n", thread_id="mt-int", input={"trace": ["second"]}, multitask_strategy="interrupt"
    )
    stopped = await runtime.wait(first.run_id, timeout=60)
    assert stopped.status == "cancelled"
    assert stopped.cancel_action == "interrupt"
    assert (await runtime.wait(second.run_id, timeout=60)).status == "success"
    trace = (await thread_values(runtime_url, "mt-int"))["trace"]
    # The first run's ticks stay, then the second run's input, then its ticks to 20.
    cut = trace.index("second")
    assert 1 <= cut < 20
    assert trace[:cut] == [f"tick{i}" for i in range(cut)]
    assert trace[cut + 1 :] == [f"tick{i}" for i in range(cut, 20)]


async def test_rollback_removes_the_running_run_s_checkpoints_before_the_new_one_runs(
    runtime: Runtime, workers: Workers, runtime_url: str
) -> None:
    workers.start(1, extra_env=LOOP)
    first = await _running(runtime, "mt-rb", {"n": 0, "trace": ["first"]})
    second = await runtime.create(
        "loop_n",
        thread_id="mt-rb",
        input={"n": 15, "trace": ["second"]},
        multitask_strategy="rollback",
    )
    stopped = await runtime.wait(first.run_id, timeout=60)
    assert stopped.status == "cancelled"
    assert stopped.cancel_action == "rollback"
    assert (await runtime.wait(second.run_id, timeout=60)).status == "success"
    # Nothing of the first run is left in the thread's state or history.
    assert (await thread_values(runtime_url, "mt-rb"))["trace"] == ["second"] + [
        f"tick{i}" for i in range(15, 20)
    ]
    async with open_checkpointer(runtime_url) as saver:
        writers = {
            c.metadata.get("run_id")
            async for c in saver.alist({"configurable": {"thread_id": "mt-rb"}})
        }
    assert writers == {second.run_id}


async def test_enqueue_runs_the_new_run_after_the_running_one_ends(
    runtime: Runtime, workers: Workers, runtime_url: str
) -> None:
    workers.start(1, concurrency=4, extra_env=LOOP)
    first = await _running(runtime, "mt-enq", {"n": 10})
    second = await runtime.create(
        "loop_n",
        thread_id="mt-enq",
        input={"n": 17, "trace": ["second"]},
        multitask_strategy="enqueue",
    )
    assert second.status == "pending"
    done_first = await runtime.wait(first.run_id, timeout=60)
    done_second = await runtime.wait(second.run_id, timeout=60)
    assert (done_first.status, done_second.status) == ("success", "success")
    assert done_first.ended_at is not None
    assert done_second.started_at is not None
    assert done_second.started_at >= done_first.ended_at
    trace = (await thread_values(runtime_url, "mt-enq"))["trace"]
    assert trace == [f"tick{i}" for i in range(10, 20)] + ["second", "tick17", "tick18", "tick19"]
