"""tether.boundaries: the guard a worker lends the layers below, and how a run stops.

The guard here is a real :class:`RunGuard` (it records what it is asked and, for
the ordering tests, writes to the crash harness's trace file); the graphs are
real LangGraph graphs over a real SQLite checkpointer.
"""

from __future__ import annotations

import asyncio
import operator
import pickle
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.errors import GraphBubbleUp
from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy

from tether import TetherError, open_checkpointer
from tether._crashpoints import CRASH_AT_ENV, CRASH_TRACE_ENV
from tether._loops import LoopThread, wait_on_loop
from tether.boundaries import (
    Fence,
    LeaseLostError,
    RunCancelledError,
    RunGuard,
    RunHandedBackError,
    RunStopped,
    RunTimedOutError,
    StepTimeoutError,
    boundary,
    current_guard,
    guarding,
    note,
)


class RecordingGuard:
    """A run guard that records each call, optionally into the crash trace file too."""

    def __init__(self, trace: Path | None = None, stop: BaseException | None = None) -> None:
        self.fence = Fence("run-1", "thread-1", 7)
        self.tenant = ""
        self.same_database = False
        self.calls: list[tuple[Any, ...]] = []
        self.trace = trace
        self.stop = stop
        self.verified = 0

    def _trace(self, line: str) -> None:
        if self.trace is not None:
            with self.trace.open("a", encoding="utf-8") as out:
                out.write(line + "\n")

    def check(self, boundary: str) -> None:
        self.calls.append(("check", boundary))
        self._trace(f"guard.check {boundary}")
        if self.stop is not None:
            raise self.stop

    def note(self, kind: str, detail: Mapping[str, Any]) -> None:
        self.calls.append(("note", kind, dict(detail)))
        self._trace(f"guard.note {kind}")

    async def verify(self) -> None:
        self.verified += 1


@pytest.fixture
def trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The crash harness's trace file: every crash point reached is appended to it."""
    path = tmp_path / "trace"
    monkeypatch.delenv(CRASH_AT_ENV, raising=False)
    monkeypatch.setenv(CRASH_TRACE_ENV, str(path))
    return path


def traced(path: Path) -> list[str]:
    """The trace's lines, crash points without their per-process counters."""
    if not path.exists():
        return []
    return [
        line if line.startswith("guard.") else line.rpartition(":")[0]
        for line in path.read_text().splitlines()
    ]


# -- boundary() and note() -----------------------------------------------------------------
def test_the_guard_checks_then_notes_then_the_crash_point_is_reached(trace: Path) -> None:
    guard = RecordingGuard(trace)
    with guarding(guard):
        boundary("tool.before", {"tool": "refund"})
        boundary("tool.after")
    assert guard.calls == [
        ("check", "tool.before"),
        ("note", "tool.before", {"tool": "refund"}),
        ("check", "tool.after"),
    ]
    assert traced(trace) == [
        "guard.check tool.before",
        "guard.note tool.before",
        "tool.before",
        "guard.check tool.after",
        "tool.after",
    ]


def test_without_a_guard_a_boundary_is_only_the_crash_point(trace: Path) -> None:
    assert current_guard() is None
    boundary("model.before", {"model": "m"})
    boundary("model.after")
    note("model.replayed", {"key": "k"})  # nothing to tell, and no crash point
    assert traced(trace) == ["model.before", "model.after"]


def test_a_stopped_run_raises_before_the_note_and_the_crash_point(trace: Path) -> None:
    guard = RecordingGuard(trace, stop=RunCancelledError("interrupt", "superseded"))
    with guarding(guard), pytest.raises(RunCancelledError, match="superseded"):
        boundary("tool.before", {"tool": "refund"})
    assert guard.calls == [("check", "tool.before")]
    assert traced(trace) == ["guard.check tool.before"]


def test_note_tells_the_guard_and_reaches_no_crash_point(trace: Path) -> None:
    guard = RecordingGuard(trace)
    with guarding(guard):
        note("tool.replayed", {"key": "k1"})
    assert guard.calls == [("note", "tool.replayed", {"key": "k1"})]
    assert traced(trace) == ["guard.note tool.replayed"]


def test_guarding_sets_and_restores_the_guard() -> None:
    outer, inner = RecordingGuard(), RecordingGuard()
    assert current_guard() is None
    with guarding(outer):
        assert current_guard() is outer
        with guarding(inner):
            assert current_guard() is inner
        assert current_guard() is outer
    assert current_guard() is None
    with pytest.raises(RuntimeError, match="boom"), guarding(outer):
        raise RuntimeError("boom")
    assert current_guard() is None


def test_the_recording_guard_is_a_run_guard() -> None:
    assert isinstance(RecordingGuard(), RunGuard)


def test_guarding_refuses_what_is_not_a_guard() -> None:
    class Half:
        fence = Fence("r", "t", 1)

        def check(self, boundary: str) -> None: ...

    with (
        pytest.raises(TypeError, match="Half has no tenant, same_database, note, verify"),
        guarding(Half()),  # type: ignore[arg-type]
    ):
        pass
    assert current_guard() is None


# -- the guard reaches tasks, executor threads and the store's loop -------------------------
async def test_the_guard_reaches_asyncio_tasks() -> None:
    guard = RecordingGuard()

    async def step(name: str) -> RunGuard | None:
        await asyncio.sleep(0)
        boundary(name)
        return current_guard()

    with guarding(guard):
        seen = await asyncio.gather(step("a"), asyncio.create_task(step("b")))
    assert seen == [guard, guard]
    assert sorted(guard.calls) == [("check", "a"), ("check", "b")]
    assert await asyncio.create_task(step("c")) is None  # a task started outside: no guard
    assert ("check", "c") not in guard.calls


class Log(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def _fan_out_graph(checkpointer: Any, threads: list[int]) -> Any:
    """Two sync nodes in one superstep, each passing a boundary, both recording their thread."""

    def node(name: str) -> Callable[[Log], Log]:
        def run(state: Log) -> Log:
            threads.append(threading.get_ident())
            boundary(f"{name}.before", {"node": name})
            return {"log": [name]}

        return run

    graph = StateGraph(Log)
    graph.add_node("a", node("a"))
    graph.add_node("b", node("b"))
    graph.add_edge(START, "a")
    graph.add_edge(START, "b")
    graph.add_edge("a", END)
    graph.add_edge("b", END)
    return graph.compile(checkpointer=checkpointer)


async def test_the_guard_reaches_sync_nodes_that_langgraph_runs_in_executors(
    tmp_path: Path,
) -> None:
    guard, threads = RecordingGuard(), []
    async with open_checkpointer(f"sqlite:///{tmp_path / 'g.db'}") as saver:
        graph = _fan_out_graph(saver, threads)
        with guarding(guard):
            out = await graph.ainvoke({"log": []}, {"configurable": {"thread_id": "t"}})
    assert sorted(out["log"]) == ["a", "b"]
    assert threading.get_ident() not in threads  # the nodes ran in executor threads
    assert sorted(guard.calls) == [
        ("check", "a.before"),
        ("check", "b.before"),
        ("note", "a.before", {"node": "a"}),
        ("note", "b.before", {"node": "b"}),
    ]


def test_the_guard_reaches_parallel_sync_nodes_of_a_sync_invoke(tmp_path: Path) -> None:
    from tether import open_checkpointer_sync

    guard, threads = RecordingGuard(), []
    with open_checkpointer_sync(f"sqlite:///{tmp_path / 'g.db'}") as saver:
        graph = _fan_out_graph(saver, threads)
        with guarding(guard):
            graph.invoke({"log": []}, {"configurable": {"thread_id": "t"}})
    assert len(threads) == 2
    assert sorted(c[1] for c in guard.calls if c[0] == "check") == ["a.before", "b.before"]


def test_the_guard_reaches_a_coroutine_run_on_the_stores_loop() -> None:
    # The record store's sync calls hand their coroutine to the saver's loop this way.
    guard, loop = RecordingGuard(), LoopThread("test-boundaries")

    async def on_the_loop() -> RunGuard | None:
        note("store.call", {"on": threading.current_thread().name})
        return current_guard()

    try:
        with guarding(guard):
            seen = wait_on_loop(on_the_loop(), loop.loop, deadlock_message="unused")
        assert seen is guard
        assert guard.calls == [("note", "store.call", {"on": "test-boundaries"})]
    finally:
        loop.close()


# -- how LangGraph treats a stopped run ----------------------------------------------------
def _failing_graph(checkpointer: Any, exc: Exception, calls: list[str], *, sync: bool) -> Any:
    """START -> work, where ``work`` raises ``exc`` under a RetryPolicy that retries anything."""

    def work(state: Log) -> Log:
        calls.append("work")
        raise exc

    async def awork(state: Log) -> Log:
        calls.append("work")
        raise exc

    policy = RetryPolicy(max_attempts=3, initial_interval=0.0, jitter=False, retry_on=Exception)
    graph = StateGraph(Log)
    graph.add_node("work", work if sync else awork, retry_policy=policy)
    graph.add_edge(START, "work")
    graph.add_edge("work", END)
    return graph.compile(checkpointer=checkpointer)


async def _pending_channels(saver: Any, thread_id: str) -> list[str]:
    found = await saver.aget_tuple({"configurable": {"thread_id": thread_id}})
    assert found is not None
    return [channel for _, channel, _ in found.pending_writes or []]


@pytest.mark.parametrize("sync", [True, False], ids=["sync-node", "async-node"])
@pytest.mark.parametrize(
    "stopped",
    [
        LeaseLostError(),
        RunCancelledError("rollback", "by the operator"),
        RunTimedOutError(),
        RunHandedBackError(),
    ],
    ids=lambda e: type(e).__name__,
)
async def test_a_stopped_run_is_neither_retried_nor_recorded_as_an_error(
    tmp_path: Path, stopped: RunStopped, sync: bool
) -> None:
    calls: list[str] = []
    async with open_checkpointer(f"sqlite:///{tmp_path / 'g.db'}") as saver:
        graph = _failing_graph(saver, stopped, calls, sync=sync)
        with pytest.raises(type(stopped)):
            await graph.ainvoke({"log": []}, {"configurable": {"thread_id": "t"}})
        assert calls == ["work"]
        assert "__error__" not in await _pending_channels(saver, "t")


@pytest.mark.parametrize("sync", [True, False], ids=["sync-node", "async-node"])
async def test_a_step_timeout_is_retried_and_recorded_as_an_error(
    tmp_path: Path, sync: bool
) -> None:
    calls: list[str] = []
    async with open_checkpointer(f"sqlite:///{tmp_path / 'g.db'}") as saver:
        graph = _failing_graph(saver, StepTimeoutError(2.5, "tool.before"), calls, sync=sync)
        with pytest.raises(StepTimeoutError, match=r"step timeout of 2\.5 s"):
            await graph.ainvoke({"log": []}, {"configurable": {"thread_id": "t"}})
        assert calls == ["work"] * 3
        assert "__error__" in await _pending_channels(saver, "t")


# -- the exceptions ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "exc",
    [
        LeaseLostError(),
        RunCancelledError("interrupt", "superseded by run 2"),
        RunCancelledError("rollback"),
        RunTimedOutError(),
        RunHandedBackError(),
        StepTimeoutError(1.5, "model.before"),
    ],
    ids=repr,
)
def test_the_exceptions_survive_pickling(exc: Exception) -> None:
    copy = pickle.loads(pickle.dumps(exc))
    assert type(copy) is type(exc)
    assert str(copy) == str(exc)
    assert vars(copy) == vars(exc)


def test_the_family() -> None:
    for cls in (LeaseLostError, RunCancelledError, RunTimedOutError, RunHandedBackError):
        assert issubclass(cls, RunStopped)
        assert issubclass(cls, GraphBubbleUp)
        assert not issubclass(cls, TetherError)  # `except TetherError` must not swallow a stop
    assert issubclass(StepTimeoutError, TetherError)
    assert not issubclass(StepTimeoutError, GraphBubbleUp)
    cancelled = RunCancelledError("interrupt", "superseded by run 2")
    assert (cancelled.action, cancelled.reason) == ("interrupt", "superseded by run 2")
    assert str(cancelled) == "run cancelled (interrupt): superseded by run 2"
    assert str(RunCancelledError("rollback")) == "run cancelled (rollback)"
    assert "lost its claim" in str(LeaseLostError())
    assert str(LeaseLostError("TL001: fence moved")) == "TL001: fence moved"
    timeout = StepTimeoutError(1.5, "model.before")
    assert (timeout.seconds, timeout.boundary) == (1.5, "model.before")
    assert "'model.before'" in str(timeout)


def test_a_cancel_names_a_known_action() -> None:
    with pytest.raises(ValueError, match="'interrupt' or 'rollback', got 'abort'"):
        RunCancelledError("abort", "x")  # type: ignore[arg-type]
