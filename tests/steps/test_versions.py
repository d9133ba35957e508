"""Version pins: a resumed run on other versions is refused or migrated, never silent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from tests.backends import Backend
from tests.steps.graphs import State, ask_then_pause, one_node
from tests.steps.scripted import CountingScriptedModel, reply
from tether.steps import VersionMismatchError, graph_fingerprint, pin_versions, read_steps, recorded

CONFIG: Any = {"configurable": {"thread_id": "t1"}}


def model(tmp_path: Path) -> Any:
    return recorded(
        CountingScriptedModel(replies=[reply("ok")], calls_file=str(tmp_path / "calls"))
    )


def test_fingerprint_follows_nodes_edges_and_state(tmp_path: Path) -> None:
    node: Any = ask_then_pause(model(tmp_path))
    base = graph_fingerprint(one_node(node, None))
    assert base == graph_fingerprint(one_node(node, None))
    assert base != graph_fingerprint(one_node(node, None, name="other"))
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    builder.add_node("think", node)
    builder.add_node("extra", node)
    builder.add_edge(START, "think")
    builder.add_edge("think", "extra")
    builder.add_edge("extra", END)
    assert base != graph_fingerprint(builder.compile())


def test_policy_is_checked() -> None:
    with pytest.raises(ValueError, match="policy must be 'pinned' or 'migrate'"):
        pin_versions(one_node(lambda s: s, None), policy="drift")  # type: ignore[arg-type]


async def test_pinned_run_refuses_a_changed_model_and_prompt(
    backend: Backend, tmp_path: Path
) -> None:
    node = ask_then_pause(model(tmp_path))
    async with backend.open() as saver:
        started = pin_versions(
            one_node(node, saver), model_id="m1", prompt_version="p1", tool_versions={"refund": "1"}
        )
        await started.ainvoke({"messages": [HumanMessage("hi")]}, CONFIG)
        changed = pin_versions(
            one_node(node, saver), model_id="m2", prompt_version="p2", tool_versions={"refund": "1"}
        )
        with pytest.raises(VersionMismatchError) as info:
            await changed.ainvoke(Command(resume="yes"), CONFIG)
        assert set(info.value.changes) == {"model_id", "prompt_version"}
        assert "model_id: 'm1' -> 'm2'" in str(info.value)
        assert "policy='migrate'" in str(info.value)
        # The original versions still resume.
        result = await started.ainvoke(Command(resume="yes"), CONFIG)
    assert result["messages"][-1].content == "ok"


async def test_migrate_continues_and_records_a_version_change(
    backend: Backend, tmp_path: Path
) -> None:
    node = ask_then_pause(model(tmp_path))
    async with backend.open() as saver:
        first = pin_versions(one_node(node, saver), policy="migrate", tool_versions={"refund": "1"})
        await first.ainvoke({"messages": [HumanMessage("hi")]}, CONFIG)
        second = pin_versions(
            one_node(node, saver), policy="migrate", tool_versions={"refund": "2"}
        )
        result = await second.ainvoke(Command(resume="yes"), CONFIG)
        steps = await read_steps(saver, "t1")
    assert result["messages"][-1].content == "ok"
    assert [s.kind for s in steps] == ["model", "version-change"]
    change = steps[1].detail["changes"]
    assert change == {"tool_versions": {"from": {"refund": "1"}, "to": {"refund": "2"}}}
    assert steps[0].graph_version == graph_fingerprint(first)


def _plain_then_pause(effects: Path, *, sync: bool) -> Any:
    """A node that records nothing: an outside effect (a line in a file), then a pause."""

    def act(state: State) -> dict[str, Any]:
        with effects.open("a") as out:
            out.write("acted\n")
        interrupt("approve?")
        return {"messages": [AIMessage("done")]}

    async def aact(state: State) -> dict[str, Any]:
        return act(state)

    return act if sync else aact


@pytest.mark.parametrize("sync", [False, True], ids=["async-node", "sync-node"])
async def test_pins_are_checked_before_a_node_that_records_nothing(
    backend: Backend, tmp_path: Path, sync: bool
) -> None:
    effects = tmp_path / "effects"
    node = _plain_then_pause(effects, sync=sync)
    async with backend.open() as saver:
        started = pin_versions(one_node(node, saver), model_id="m1")
        await started.ainvoke({"messages": [HumanMessage("hi")]}, CONFIG)
        changed = pin_versions(one_node(node, saver), model_id="m2")
        with pytest.raises(VersionMismatchError, match="model_id: 'm1' -> 'm2'"):
            await changed.ainvoke(Command(resume="yes"), CONFIG)
        # Refused before the node ran again: its effect happened once, in the first run.
        assert effects.read_text().splitlines() == ["acted"]
        result = await started.ainvoke(Command(resume="yes"), CONFIG)
    assert result["messages"][-1].content == "done"
