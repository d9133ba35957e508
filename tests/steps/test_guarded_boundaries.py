"""What the recording layer tells a run's guard, and how a stop before an effect leaves things.

Real LangGraph graphs over a real SQLite checkpointer; the guard is a plain
:class:`tether.boundaries.RunGuard` that records what it is asked and can stop
the run at one boundary, as a worker's guard does on a cancel.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langchain_core.runnables import RunnableLambda
from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy

from tether import open_checkpointer
from tether.boundaries import Fence, RunCancelledError, guarding
from tether.steps import durable_tool, recorded

CONFIG: Any = {"configurable": {"thread_id": "t-guard"}}


class Guard:
    """A run guard that records its notes and raises ``stop`` at boundary ``stop_at``."""

    def __init__(self, stop_at: str | None = None, stop: BaseException | None = None) -> None:
        self.fence = Fence("run-1", "t-guard", 1)
        self.tenant = ""
        self.same_database = False
        self.checked: list[str] = []
        self.notes: list[tuple[str, dict[str, Any]]] = []
        self.stop_at, self.stop = stop_at, stop

    def check(self, boundary: str) -> None:
        self.checked.append(boundary)
        if boundary == self.stop_at and self.stop is not None:
            raise self.stop

    def note(self, kind: str, detail: Mapping[str, Any]) -> None:
        self.notes.append((kind, dict(detail)))

    async def verify(self) -> None:
        return None


class State(TypedDict, total=False):
    answer: str


class World:
    """The outside world: a SQLite file of the shipments the tool made."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE IF NOT EXISTS shipped (item TEXT)")

    def ship(self, item: str) -> None:
        with sqlite3.connect(self.path) as db:
            db.execute("INSERT INTO shipped VALUES (?)", (item,))

    def count(self) -> int:
        with sqlite3.connect(self.path) as db:
            return int(db.execute("SELECT count(*) FROM shipped").fetchone()[0])


def _ship_tool(world: World) -> Any:
    @durable_tool(name="ship")
    def ship(item: str) -> str:
        """Ship an item (no idempotency key: the call is claimed before the effect)."""
        world.ship(item)
        return f"shipped {item}"

    return ship


def _graph(saver: Any, world: World, *, fail_first: bool = False) -> Any:
    model = recorded(RunnableLambda(lambda text: f"echo {text}"), model_id="echo")
    ship = _ship_tool(world)
    attempts = {"n": 0}

    async def work(state: State) -> State:
        attempts["n"] += 1
        said = await model.ainvoke("private words")
        await ship.ainvoke({"item": "parcel-for-dana"})
        if fail_first and attempts["n"] == 1:
            raise RuntimeError("flaky, after its steps")
        return {"answer": str(said)}

    graph = StateGraph(State)
    retry = RetryPolicy(max_attempts=2, initial_interval=0.0, jitter=False, retry_on=RuntimeError)
    graph.add_node("work", work, retry_policy=retry)
    graph.add_edge(START, "work")
    graph.add_edge("work", END)
    return graph.compile(checkpointer=saver)


async def test_the_guard_hears_of_each_model_step_tool_effect_and_replay(tmp_path: Path) -> None:
    guard, world = Guard(), World(tmp_path / "world.db")
    async with open_checkpointer(f"sqlite:///{tmp_path / 'c.db'}") as saver:
        with guarding(guard):
            out = await _graph(saver, world, fail_first=True).ainvoke({}, CONFIG)
    assert out["answer"] == "echo private words"
    assert world.count() == 1
    kinds = [kind for kind, _ in guard.notes]
    # The first attempt recorded both steps; the retry replayed them.
    assert kinds == ["model.after", "tool.after", "model.replayed", "tool.replayed"]
    model_step, tool_effect, model_replay, tool_replay = (d for _, d in guard.notes)
    assert model_step["model_id"] == "echo"
    assert model_step["node"] == "work"
    assert model_step["key"].endswith("|model.0")
    assert tool_effect["tool"] == "ship"
    assert tool_effect["how"] == "run"
    assert len(tool_effect["idempotency_key"]) >= 32
    assert isinstance(model_step["step_index"], int)
    assert isinstance(tool_effect["step_index"], int)
    assert model_replay == {k: model_step[k] for k in ("key", "node", "task_id")}
    assert tool_replay == {k: tool_effect[k] for k in ("key", "tool", "idempotency_key")}
    # Small, and free of what the model was asked or the tool was given.
    assert "private words" not in repr(guard.notes)
    assert "parcel-for-dana" not in repr(guard.notes)
    assert guard.checked.count("tool.before") == 1  # a replay has no effect
    assert guard.checked.count("model.before") == 1  # and makes no call


@pytest.mark.parametrize("stop_at", ["tool.claim", "tool.before"])
async def test_a_run_stopped_before_a_tool_s_effect_can_run_the_tool_later(
    tmp_path: Path, stop_at: str
) -> None:
    world = World(tmp_path / "world.db")
    guard = Guard(stop_at, RunCancelledError("interrupt", "enough"))
    async with open_checkpointer(f"sqlite:///{tmp_path / 'c.db'}") as saver:
        with guarding(guard), pytest.raises(RunCancelledError, match="enough"):
            await _graph(saver, world).ainvoke({}, CONFIG)
        assert world.count() == 0
        assert [kind for kind, _ in guard.notes] == ["model.after"]
    # A later run on the thread (a new worker, no stop) runs the tool once: the
    # stopped run left no uncertain claim behind.
    async with open_checkpointer(f"sqlite:///{tmp_path / 'c.db'}") as saver:
        later = Guard()
        with guarding(later):
            out = await _graph(saver, world).ainvoke(None, CONFIG)
    assert out["answer"] == "echo private words"
    assert world.count() == 1
    assert [kind for kind, _ in later.notes] == ["model.replayed", "tool.after"]
