"""Which nodes LangGraph times itself, how a sync step is timed at its boundaries, and the
refusals of a step timeout that is not a positive number of seconds.

Real LangGraph graphs, run in process; the guard is the worker's own RunContext.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy, TimeoutPolicy

from tests.runtime.workers import PROJECT
from tether.boundaries import Fence, RunTimedOutError, StepTimeoutError, boundary, guarding
from tether.runtime import Worker
from tether.runtime._timeouts import deadline_watchdog, with_step_timeout
from tether.runtime.context import RunContext


class State(TypedDict, total=False):
    seen: list[str]


def _ctx(step_timeout: float | None) -> RunContext:
    async def verifier(fence: Fence) -> bool:
        return True

    return RunContext(
        fence=Fence("run-1", "t", 1),
        tenant="",
        worker_id="w",
        lease=3600.0,
        margin=0.0,
        confirmed_at=time.monotonic(),
        same_database=False,
        verifier=verifier,
        step_timeout=step_timeout,
    )


async def _quick(state: State) -> State:
    return {}


def _sync(state: State) -> State:
    return {}


def test_only_async_nodes_without_a_timeout_of_their_own_get_the_step_timeout() -> None:
    inner = StateGraph(State)
    inner.add_node("inner", _quick)
    inner.add_edge(START, "inner")
    inner.add_edge("inner", END)
    graph = StateGraph(State)
    graph.add_node("fast", _quick)
    graph.add_node("own", _quick, timeout=TimeoutPolicy(run_timeout=60))
    graph.add_node("sync", _sync)
    graph.add_node("sub", inner.compile())
    for a, b in [(START, "fast"), ("fast", "own"), ("own", "sync"), ("sync", "sub")]:
        graph.add_edge(a, b)
    graph.add_edge("sub", END)
    compiled = graph.compile()

    timed, names = with_step_timeout(compiled, 2.5)
    timeouts = {name: node.timeout for name, node in timed.nodes.items()}
    assert timeouts["fast"] == TimeoutPolicy(run_timeout=2.5)
    assert timeouts["own"] == TimeoutPolicy(run_timeout=60)  # its own stands
    assert timeouts["sync"] is None  # LangGraph cannot cancel it: timed at boundaries
    assert timeouts["sub"] is None  # a subgraph is many steps, not one
    assert timeouts["__start__"] is None
    assert names == {"fast", "own"}
    assert all(node.timeout is None for n, node in compiled.nodes.items() if n != "own")


def _slow_sync_graph(boundary_name: str, retried: bool) -> Any:
    attempts: list[float] = []

    def slow(state: State) -> State:
        attempts.append(time.monotonic())
        if len(attempts) == 1:
            time.sleep(0.3)
        boundary(boundary_name)
        return {"seen": [f"attempt {len(attempts)}"]}

    graph = StateGraph(State)
    retry = RetryPolicy(max_attempts=2, initial_interval=0.0, jitter=False) if retried else None
    graph.add_node("slow", slow, retry_policy=retry)
    graph.add_edge(START, "slow")
    graph.add_edge("slow", END)
    return graph.compile()


@pytest.mark.parametrize("where", ["model.before", "tool.before", "tool.claim"])
async def test_a_sync_step_past_its_timeout_stops_at_a_boundary_before_the_call(
    where: str,
) -> None:
    ctx = _ctx(step_timeout=0.1)
    with guarding(ctx), pytest.raises(StepTimeoutError, match=repr(where)):
        await _slow_sync_graph(where, retried=False).ainvoke({})
    [event] = [e for e in ctx.events.take() if e.kind == "step.timeout"]
    assert event.data["node"] == "slow"
    assert event.data["attempt"] == 1
    assert event.data["seconds"] == 0.1
    assert event.data["boundary"] == where


async def test_the_retry_of_a_timed_out_sync_step_gets_its_own_time() -> None:
    ctx = _ctx(step_timeout=0.1)
    with guarding(ctx):
        out = await _slow_sync_graph("model.before", retried=True).ainvoke({})
    assert out["seen"] == ["attempt 2"]
    assert [e.kind for e in ctx.events.take()] == ["step.timeout"]


async def test_boundaries_that_stop_nothing_do_not_time_a_step() -> None:
    ctx = _ctx(step_timeout=0.1)
    with guarding(ctx):
        out = await _slow_sync_graph("model.after", retried=False).ainvoke({})
    assert out["seen"] == ["attempt 1"]
    assert len(ctx.events) == 0


async def test_without_a_step_timeout_a_slow_step_goes_on() -> None:
    ctx = _ctx(step_timeout=None)
    with guarding(ctx):
        out = await _slow_sync_graph("tool.before", retried=False).ainvoke({})
    assert out["seen"] == ["attempt 1"]


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan")])
def test_a_worker_refuses_a_step_timeout_that_is_not_positive(bad: float) -> None:
    with pytest.raises(ValueError, match="step_timeout must be more than 0 seconds"):
        Worker("sqlite:///unused.db", PROJECT, step_timeout=bad)


@pytest.mark.parametrize("bad", ["0", "-2", "soon"])
def test_tether_worker_refuses_a_step_timeout_that_is_not_positive(
    bad: str, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tether",
            "worker",
            "--url",
            url,
            "--config",
            str(PROJECT),
            "--step-timeout",
            bad,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert f"--step-timeout: must be a number of seconds above 0, not '{bad}'" in done.stderr


async def test_the_watchdog_cancels_a_block_that_outlives_the_deadline() -> None:
    ctx = _ctx(step_timeout=None)
    ctx.deadline = time.monotonic()
    with pytest.raises(RunTimedOutError, match=r"reached no boundary within 0\.2 s"):
        async with deadline_watchdog(ctx, grace=0.2):
            await asyncio.sleep(1000)
    assert ctx.stopped_at == "watchdog"


async def test_the_watchdog_leaves_the_graph_s_own_timeout_errors_alone() -> None:
    ctx = _ctx(step_timeout=None)
    ctx.deadline = time.monotonic() + 3600
    with pytest.raises(TimeoutError, match="the payments API"):
        async with deadline_watchdog(ctx):
            raise TimeoutError("the payments API did not answer")
    assert ctx.stopped_at is None
