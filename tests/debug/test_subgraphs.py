"""A subgraph's recorded steps in a timeline: joined to the root checkpoint of their parent task."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph

from tether import open_checkpointer
from tether.debug import DebugError, timeline
from tether.steps import durable_tool, read_steps


class _State(TypedDict):
    log: Annotated[list[int], operator.add]


def _build(calls: list[int]) -> Any:
    async def lookup(x: int) -> int:
        """Look a number up (counted)."""
        calls.append(x)
        return x * 10

    tool = durable_tool(lookup)

    async def inner(state: _State) -> dict[str, Any]:
        return {"log": [await tool.ainvoke({"x": 1})]}

    async def root(state: _State) -> dict[str, Any]:
        return {"log": [await tool.ainvoke({"x": 2})]}

    sub = StateGraph(_State).add_node("inner", inner)
    sub = sub.add_edge(START, "inner").add_edge("inner", END).compile()

    def build(saver: BaseCheckpointSaver[Any]) -> Any:
        graph = StateGraph(_State).add_node("root", root).add_node("outer", sub)
        graph = graph.add_edge(START, "root").add_edge("root", "outer").add_edge("outer", END)
        return graph.compile(checkpointer=saver)

    return build


async def test_subgraph_steps_are_joined_to_their_parent_task() -> None:
    calls: list[int] = []
    build = _build(calls)
    async with open_checkpointer("memory://") as saver:
        await build(saver).ainvoke({"log": []}, {"configurable": {"thread_id": "t"}})
        tl = await timeline(saver, "t", graph=build)
        root, inner = tl.entries
        assert (root.node, root.namespace, inner.node, inner.namespace) == (
            "root",
            "",
            "inner",
            "outer",
        )
        outer = next(c for c in tl.checkpoints if [t.name for t in c.tasks] == ["outer"])
        assert inner.checkpoint_id == outer.checkpoint_id
        assert "outer/inner" in str(tl)
        assert tl.state(inner.step)["log"] == tl.state()["log"]  # the state after the subgraph

        # A fork at the subgraph's step starts before its parent task: the root step is
        # copied (and replayed), the subgraph runs again.
        fork = await tl.fork(inner.step)
        assert [s.node for s in await read_steps(saver, fork.thread_id)] == ["root"]
        fork = await fork.run()
        assert fork.state()["log"] == tl.state()["log"]
        assert calls == [2, 1, 1]
        # A fork after the subgraph ran keeps its steps too (with their checkpoint).
        later = await tl.fork(tl.checkpoints[-1].checkpoint_id)
        assert [(e.node, e.namespace) for e in later.entries] == [("root", ""), ("inner", "outer")]
        assert later.entries[1].checkpoint_id == outer.checkpoint_id

        # Not yet: replaying a super-step whose subgraph records calls (see docs/debug.md).
        replayed = await tl.replay(check=False)
        assert replayed.divergence is not None
        assert replayed.divergence.nodes == ("outer",)
        assert "no recorded result of tool 'lookup'" in replayed.divergence.reason

        with pytest.raises(DebugError, match="step 1 ran in subgraph 'outer'"):
            await tl.what_if(inner.step, 99)
        assert calls == [2, 1, 1]
