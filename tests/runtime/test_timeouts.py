"""Cancels and deadlines stop a running run before its next model call or tool effect;
per-step timeouts stop a slow step, and the graph's RetryPolicy decides what follows.

Real ``tether worker`` processes on SQLite and PostgreSQL; the graphs are in
``project/timeouts.py``, their outside world in the test's work directory.
"""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

from tests.runtime.project.timeouts import SLOW_S
from tests.runtime.workers import Workers
from tether.runtime.api import Runtime
from tether.runtime.models import RunEvent


def _effects(workdir: Path) -> int:
    """How many shipments the graphs' tool made."""
    path = workdir / "effects.db"
    if not path.exists():
        return 0
    with sqlite3.connect(path) as db:
        tables = db.execute("SELECT name FROM sqlite_master WHERE name = 'effects'").fetchall()
        return int(db.execute("SELECT count(*) FROM effects").fetchone()[0]) if tables else 0


async def _events(runtime: Runtime, run_id: str, kind: str) -> list[RunEvent]:
    return [e for e in await runtime.events(run_id) if e.kind == kind]


async def _until_node_started(runtime: Runtime, run_id: str, node: str) -> None:
    async for event in runtime.follow(run_id):
        if event.kind == "node.started" and event.data.get("node") == node:
            return
    raise AssertionError(f"node {node!r} never started")


# -- cancel -----------------------------------------------------------------------------------
async def test_a_cancel_stops_the_run_before_its_tool_effect(
    runtime: Runtime, workers: Workers
) -> None:
    workers.start(1)
    run = await runtime.create("gated_ship", thread_id="c-1", input={"n": 3})
    await _until_node_started(runtime, run.run_id, "work")
    await runtime.cancel(run.run_id, reason="not now")
    await asyncio.to_thread(workers.wait_log, 0, "cancel requested")
    (workers.workdir / "go").touch()  # the node goes on to its tool, which must not run
    done = await runtime.wait(run.run_id, timeout=60)
    assert done.status == "cancelled", done
    assert "not now" in (done.ended_reason or "")
    assert _effects(workers.workdir) == 0
    assert await _events(runtime, run.run_id, "tool.effect") == []


async def test_a_cancel_stops_a_node_that_reaches_no_boundary(
    runtime: Runtime, workers: Workers
) -> None:
    """As LangGraph's server: a cancel does not wait for the running node (an LLM call that
    takes minutes) to reach a boundary; what the node had not written is not kept."""
    workers.start(1)
    run = await runtime.create("stuck", thread_id="c-2", input={"n": 1})
    await _until_node_started(runtime, run.run_id, "work")
    await runtime.cancel(run.run_id, reason="enough")
    done = await runtime.wait(run.run_id, timeout=60)  # the node awaits for 1000 s
    assert done.status == "cancelled", done
    assert "enough" in (done.ended_reason or "")
    assert (await runtime.get_thread("c-2")).status != "busy"
    values = (await runtime.get_thread("c-2")).values or {}
    assert "answer" not in values, values
    assert (await runtime.events(run.run_id))[-1].kind == "run.finished"


# -- the run's deadline -----------------------------------------------------------------------
async def test_a_run_past_its_deadline_stops_at_the_next_step(
    runtime: Runtime, workers: Workers
) -> None:
    workers.start(1, extra_env={"TETHER_LOOP_N": "100000"})
    run = await runtime.create(
        "loop_n", thread_id="d-1", input={"n": 0}, deadline=timedelta(seconds=1)
    )
    done = await runtime.wait(run.run_id, timeout=60)
    assert done.status == "timeout", done
    assert done.ended_reason == "deadline passed"
    [timeout] = await _events(runtime, run.run_id, "timeout")
    assert timeout.data == {"kind": "run", "reason": "deadline passed", "at": "step"}
    thread = await runtime.get_thread("d-1")
    assert thread.status == "error"


async def test_a_node_that_never_returns_still_ends_at_its_deadline(
    runtime: Runtime, workers: Workers
) -> None:
    workers.start(1)
    workers.wait_log(0, "worker w0: graphs")
    run = await runtime.create("stuck", thread_id="d-2", input={}, deadline=timedelta(seconds=4))
    await _until_node_started(runtime, run.run_id, "work")
    # The node awaits forever and reaches no boundary: the watchdog cancels it.
    done = await runtime.wait(run.run_id, timeout=60)
    assert done.status == "timeout", done
    assert done.error is not None
    assert "reached no boundary" in done.error["message"]
    [timeout] = await _events(runtime, run.run_id, "timeout")
    assert timeout.data == {"kind": "run", "reason": "deadline passed", "at": "watchdog"}
    assert (await runtime.events(run.run_id))[-1].kind == "run.finished"


# -- per-step timeouts ------------------------------------------------------------------------
async def test_an_async_step_that_times_out_is_retried_by_its_retry_policy(
    runtime: Runtime, workers: Workers, runtime_url: str
) -> None:
    workers.start(1)
    run = await runtime.create("stuck_once", thread_id="s-1", input={}, step_timeout=0.5)
    done = await runtime.wait(run.run_id, timeout=60)
    assert done.status == "success", done
    assert done.error is None
    [timeout] = await _events(runtime, run.run_id, "step.timeout")
    assert timeout.data["node"] == "work"
    assert timeout.data["seconds"] == 0.5
    assert timeout.data["attempt"] == 1
    values = (await runtime.get_thread("s-1")).values
    assert values is not None
    assert values["answer"] == "attempt 2"


async def test_an_async_step_that_times_out_without_a_retry_policy_fails_the_run(
    runtime: Runtime, workers: Workers
) -> None:
    workers.start(1)
    run = await runtime.create("stuck", thread_id="s-2", input={}, step_timeout=0.5)
    done = await runtime.wait(run.run_id, timeout=60)
    assert done.status == "error", done
    assert done.error is not None
    assert done.error["error"] == "NodeTimeoutError"
    assert [e.data["node"] for e in await _events(runtime, run.run_id, "step.timeout")] == ["work"]
    assert await _events(runtime, run.run_id, "error")


async def test_the_worker_s_step_timeout_applies_to_runs_created_without_one(
    runtime: Runtime, workers: Workers
) -> None:
    workers.start(1, extra_args=["--step-timeout", "0.5"])
    run = await runtime.create("stuck", thread_id="s-3", input={})
    done = await runtime.wait(run.run_id, timeout=60)
    assert done.status == "error", done
    assert done.error is not None
    assert done.error["error"] == "NodeTimeoutError"


async def test_a_slow_sync_step_is_stopped_at_its_next_boundary_before_the_effect(
    runtime: Runtime, workers: Workers
) -> None:
    workers.start(1)
    step_timeout = SLOW_S / 3
    run = await runtime.create("slow_ship", thread_id="s-4", input={}, step_timeout=step_timeout)
    done = await runtime.wait(run.run_id, timeout=60)
    assert done.status == "error", done
    assert done.error is not None
    assert done.error["error"] == "StepTimeoutError"
    assert _effects(workers.workdir) == 0
    [timeout] = await _events(runtime, run.run_id, "step.timeout")
    assert timeout.data["node"] == "work"
    assert timeout.data["seconds"] == step_timeout
    assert timeout.data["boundary"] == "tool.claim"


async def test_a_slow_sync_step_with_a_retry_policy_runs_its_tool_once_on_the_retry(
    runtime: Runtime, workers: Workers
) -> None:
    workers.start(1)
    run = await runtime.create(
        "slow_ship_retried", thread_id="s-5", input={"n": 9}, step_timeout=SLOW_S / 3
    )
    done = await runtime.wait(run.run_id, timeout=60)
    assert done.status == "success", done
    assert _effects(workers.workdir) == 1
    assert len(await _events(runtime, run.run_id, "step.timeout")) == 1
    [effect] = await _events(runtime, run.run_id, "tool.effect")
    assert effect.data["tool"] == "ship"
    assert effect.data["how"] == "run"
    assert effect.data["idempotency_key"]


# -- what the run's events say about its steps ------------------------------------------------
async def test_the_events_show_each_model_step_and_each_tool_effect_with_its_key(
    runtime: Runtime, workers: Workers
) -> None:
    workers.start(1)
    run = await runtime.create(
        "refund",
        thread_id="e-1",
        input={"messages": [{"role": "user", "content": "Order A-1001 arrived broken."}]},
    )
    done = await runtime.wait(run.run_id, timeout=60)
    assert done.status == "success", done
    steps = await _events(runtime, run.run_id, "model.step")
    effects = await _events(runtime, run.run_id, "tool.effect")
    assert steps
    assert effects
    for step in steps:
        assert set(step.data) == {"key", "step_index", "model_id", "usage", "node", "task_id"}
        assert isinstance(step.data["step_index"], int)
    by_tool: dict[str, Any] = {e.data["tool"]: e.data for e in effects}
    assert {"issue_refund", "send_email"} <= set(by_tool)
    for data in by_tool.values():
        assert set(data) == {"key", "tool", "idempotency_key", "step_index", "how"}
        assert data["idempotency_key"]
        assert data["how"] == "run"
    # Nothing of what the customer wrote reaches the events about steps.
    assert "A-1001" not in repr([e.data for e in steps + effects])
    keys = [e.data["key"] for e in steps + effects]
    assert len(keys) == len(set(keys))
