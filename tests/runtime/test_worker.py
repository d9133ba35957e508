"""``tether worker`` processes executing an unchanged langgraph.json project, end to end.

Everything here is real: worker OS processes, the run store and checkpoints on
SQLite or PostgreSQL, kill -9 and SIGSTOP sent by PID.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.store.raw import execute
from tests.runtime.stored import thread_values
from tests.runtime.workers import Workers
from tether import open_checkpointer
from tether._calllog import read_calls
from tether.approvals import get_approval
from tether.graphs._refund_scenario import CALLS_FILE, refund_effects
from tether.runtime.api import Runtime
from tether.store import store_for


async def _stored(url: str, thread_id: str) -> tuple[list[Any], list[Any]]:
    """The thread's checkpoints (id, writer, fence) and step log, as stored."""
    async with open_checkpointer(url) as saver:
        checkpoints = [
            (c.checkpoint["id"], c.metadata.get("tether_worker"), c.metadata.get("tether_fence"))
            async for c in saver.alist({"configurable": {"thread_id": thread_id}})
        ]
        steps = await store_for(saver).steps(thread_id)
    return checkpoints, steps


async def test_a_worker_runs_a_graph_of_the_project_to_success(
    runtime: Runtime, workers: Workers, runtime_url: str
) -> None:
    run = await runtime.create("three_node", thread_id="t-1", input={"trace": []})
    assert run.status == "pending"
    workers.start(1)
    done = await runtime.wait(run.run_id, timeout=60)
    assert done.status == "success", done
    assert (await thread_values(runtime_url, "t-1"))["trace"] == ["a", "b", "c"]
    kinds = [e.kind for e in await runtime.events(run.run_id)]
    assert kinds[0] == "run.created"
    assert kinds[1] == "run.started"
    assert kinds[-1] == "run.finished"
    assert "values" in kinds
    assert "node.started" in kinds
    seqs = [e.seq for e in await runtime.events(run.run_id)]
    assert seqs == list(range(1, len(seqs) + 1))
    thread = await runtime.get_thread("t-1")
    assert thread.status == "idle"


async def test_an_interrupted_run_holds_nothing_and_resumes_on_a_command(
    runtime: Runtime, workers: Workers, runtime_url: str
) -> None:
    workers.start(1)
    run = await runtime.create("pause", thread_id="t-2", input={"n": 1})
    first = await runtime.wait(run.run_id, timeout=60)
    assert first.status == "interrupted"
    assert first.worker_id is None
    assert first.waiting_on
    thread = await runtime.get_thread("t-2")
    assert thread.status == "interrupted"
    resumed = await runtime.resume(run.run_id, {"resume": "yes"})
    assert resumed.status == "pending"
    assert resumed.resumes == 1
    second = await runtime.wait(run.run_id, timeout=60)
    # The graph asks again: this time for a tether approval.
    assert second.status == "interrupted"
    assert [w.approval_id is not None for w in second.waiting_on] == [True]
    assert (await thread_values(runtime_url, "t-2"))["answer"] == "yes"


async def test_a_cancelled_run_stops_between_steps_and_keeps_its_partial_state(
    runtime: Runtime, workers: Workers, runtime_url: str
) -> None:
    workers.start(1, extra_env={"TETHER_LOOP_N": "200"})
    run = await runtime.create("loop_n", thread_id="t-3", input={"n": 0})
    async for event in runtime.follow(run.run_id):
        if event.kind == "node.finished":
            break
    await runtime.cancel(run.run_id, reason="enough")
    done = await runtime.wait(run.run_id, timeout=30)
    assert done.status == "cancelled"
    assert "enough" in (done.ended_reason or "")
    n = (await thread_values(runtime_url, "t-3"))["n"]
    assert 1 <= n < 200


async def test_a_rollback_cancel_removes_the_runs_checkpoints(
    runtime: Runtime, workers: Workers, runtime_url: str
) -> None:
    workers.start(1, extra_env={"TETHER_LOOP_N": "200"})
    run = await runtime.create("loop_n", thread_id="t-4", input={"n": 0})
    async for event in runtime.follow(run.run_id):
        if event.kind == "node.finished":
            break
    await runtime.cancel(run.run_id, action="rollback", reason="undo")
    done = await runtime.wait(run.run_id, timeout=30)
    assert done.status == "cancelled"
    async with open_checkpointer(runtime_url) as saver:
        assert await saver.aget_tuple({"configurable": {"thread_id": "t-4"}}) is None


@pytest.mark.slow
async def test_a_killed_worker_s_run_finishes_on_another_with_no_duplicate_effect(
    runtime: Runtime, workers: Workers, runtime_url: str
) -> None:
    # SIGKILLed by itself right after its first tool effect is recorded: a kill from
    # outside at "the tools node started" raced a run that can finish in a quarter second,
    # and then landed after the end (or after the last model call was recorded).
    (crashing,) = workers.start(1, concurrency=1, extra_env={"TETHER_CRASH_AT": "tool.after:1"})
    run = await runtime.create(
        "refund",
        thread_id="t-kill",
        input={"messages": [{"role": "user", "content": "Order A-1001 arrived broken."}]},
    )
    assert await asyncio.to_thread(workers.procs[crashing].wait, 60) == -signal.SIGKILL
    holder, index = f"w{crashing}", crashing
    workers.start(2, concurrency=1)
    done = await runtime.wait(run.run_id, timeout=60)
    assert done.status == "success", done
    started = [e for e in await runtime.events(run.run_id) if e.kind == "run.started"]
    assert started[-1].data.get("took_over_from") == holder
    effects = refund_effects(workers.workdir / "refund")
    assert effects == {"refunds": 1, "emails": 1}
    # Every answer the killed worker had recorded is replayed, never asked again. (A call
    # it made but had not recorded when it died is asked again, rightly.) Model calls
    # are recorded in the order they are made, as the crash harness counts them.
    killed_pid = workers.pid(index)
    _, steps = await _stored(runtime_url, "t-kill")
    recorded = sum(
        1 for s in steps if s["kind"] == "model" and s["worker_id"].endswith(f":{killed_pid}")
    )
    calls = read_calls(workers.workdir / "refund" / CALLS_FILE)
    answered = {c.input_hash for c in [c for c in calls if c.pid == killed_pid][:recorded]}
    reasked = [c for c in calls if c.pid != killed_pid and c.input_hash in answered]
    assert recorded >= 1
    assert reasked == []
    assert len({c.pid for c in calls}) == 2  # asked by the killed worker, then its successor


@pytest.mark.slow
async def test_a_stopped_worker_whose_lease_was_taken_commits_nothing_after_it_wakes(
    runtime: Runtime, workers: Workers, runtime_url: str
) -> None:
    # Both are up before one is stopped: the other must be there to take over.
    workers.wait_ready(workers.start(2, concurrency=1))
    run = await runtime.create("slow_effect", thread_id="t-stop", input={"n": 7})
    async for event in runtime.follow(run.run_id):
        if event.kind == "node.started" and event.data.get("node") == "charge":
            break
    holder = (await runtime.get(run.run_id)).worker_id
    assert holder is not None
    index = int(holder[1:])
    workers.stop(index)
    # Another worker takes the run over once the lease expires (on PostgreSQL, once the
    # server aborted a fenced write the stopped worker had in flight).
    for _ in range(1200):
        now = await runtime.get(run.run_id)
        if now.worker_id not in (None, holder):
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("nobody took the run over")
    taken_at = (await runtime.events(run.run_id))[-1].seq
    (workers.workdir / "release").touch()
    done = await runtime.wait(run.run_id, timeout=60)
    assert done.status == "success"
    before = await _stored(runtime_url, "t-stop")
    workers.signal(index, signal.SIGCONT)
    await asyncio.sleep(3 * workers.lease)
    # The woken worker finished its tool call (an effect already in flight completes in
    # the outside world) but stored nothing: no checkpoint, no step, no event.
    assert await _stored(runtime_url, "t-stop") == before
    later = [e for e in await runtime.events(run.run_id) if e.seq > taken_at]
    assert all(e.worker_id != holder for e in later), later
    workers.wait_log(index, "lease lost")
    assert workers.procs[index].poll() is None, "the stopped worker died"
    with sqlite3.connect(Path(workers.workdir) / "effects.db") as db:
        keys = {k for (k,) in db.execute("SELECT key FROM effects")}
    assert len(keys) == 1


async def test_a_decision_enqueues_the_resume_and_a_worker_finishes_the_run(
    runtime: Runtime, workers: Workers, runtime_url: str
) -> None:
    workers.start(1)
    run = await runtime.create("pause", thread_id="t-5", input={"n": 2})
    assert (await runtime.wait(run.run_id, timeout=60)).status == "interrupted"
    await runtime.resume(run.run_id, {"resume": "yes"})
    waiting = await runtime.wait(run.run_id, timeout=60)
    assert waiting.status == "interrupted"
    approval_id = waiting.waiting_on[0].approval_id
    assert approval_id is not None
    shown = await get_approval(await runtime.checkpointer(), approval_id)
    result = await runtime.decide(
        "t-5", approval_id, "approve", by="dana", args_sha256=shown.request.args_sha256
    )
    assert result.finished is False  # enqueued, not run here
    done = await runtime.wait(run.run_id, timeout=60)
    assert done.status == "success", done
    assert done.resumes == 2
    assert (await thread_values(runtime_url, "t-5"))["trace"][-1] == "after"
    kinds = [e.kind for e in await runtime.events(run.run_id)]
    assert "approval.decided" in kinds


async def test_a_run_from_a_checkpoint_its_thread_lacks_is_refused_before_it_exists(
    runtime: Runtime, workers: Workers, runtime_url: str
) -> None:
    from tether.runtime import CheckpointNotFoundError, InvalidRunRequestError

    workers.start(1)
    run = await runtime.create("three_node", thread_id="t-fork", input={"trace": []})
    assert (await runtime.wait(run.run_id, timeout=60)).status == "success"
    async with open_checkpointer(runtime_url) as saver:
        ids = [
            c.checkpoint["id"] async for c in saver.alist({"configurable": {"thread_id": "t-fork"}})
        ]
    missing = ids[0][:-4] + ("0000" if not ids[0].endswith("0000") else "1111")
    with pytest.raises(
        CheckpointNotFoundError, match=f"thread 't-fork' has no checkpoint '{missing}'"
    ):
        await runtime.create(
            "three_node", thread_id="t-fork", input={"trace": []}, checkpoint_id=missing
        )
    with pytest.raises(InvalidRunRequestError, match="needs a thread_id"):
        await runtime.create("three_node", input={"trace": []}, checkpoint_id=ids[-1])
    # the checkpoint exists, but on another thread: still not this thread's
    other = await runtime.create("three_node", thread_id="t-other", input={"trace": []})
    assert (await runtime.wait(other.run_id, timeout=60)).status == "success"
    with pytest.raises(CheckpointNotFoundError, match="thread 't-other' has no checkpoint"):
        await runtime.create("three_node", thread_id="t-other", input=None, checkpoint_id=ids[-1])
    assert [r.run_id for r in await runtime.list(thread_id="t-fork")] == [run.run_id]
    assert len(await runtime.list(thread_id="t-other")) == 1
    # an id it has forks, as before
    fork = await runtime.create("three_node", thread_id="t-fork", input=None, checkpoint_id=ids[-2])
    assert (await runtime.wait(fork.run_id, timeout=60)).status == "success"


async def test_a_stored_run_whose_config_is_invalid_fails_and_is_not_left_running(
    runtime: Runtime, workers: Workers, runtime_url: str
) -> None:
    """A row written by a version that checked less (here: edited in the database) is
    refused by the worker as the run's error; it stopped the execution before the graph
    started, and the run stayed ``running`` until its lease ran out, again and again."""
    import json

    run = await runtime.create("three_node", thread_id="t-old", input={"trace": []})
    kwargs = json.dumps({**run.kwargs, "config": {"metadata": 5}})
    execute(
        runtime_url, f"UPDATE tether_runs SET kwargs = '{kwargs}' WHERE run_id = '{run.run_id}'"
    )
    workers.start(1)
    done = await runtime.wait(run.run_id, timeout=60)
    assert done.status == "error", done
    assert done.attempt <= 1, done
    assert "config.metadata must be" in str(done.error), done.error
    after = await runtime.create("three_node", thread_id="t-old", input={"trace": []})
    assert (await runtime.wait(after.run_id, timeout=60)).status == "success"
