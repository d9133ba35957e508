"""The step log: fields, order, reading mid-run, append-only, encryption, all backends."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.types import Command, interrupt

from tests.backends import Backend
from tests.steps.graphs import State, one_node
from tests.steps.scripted import CountingScriptedModel, reply
from tether.checkpointing.encryption import KeyRing
from tether.steps import Price, Step, append_step, durable_tool, read_steps, recorded
from tether.store import store_for

CONFIG: Any = {"configurable": {"thread_id": "t1"}}


def agent_node(tmp_path: Path, steps_seen: list[list[Step]]) -> Any:
    model = recorded(
        CountingScriptedModel(
            replies=[reply("plan"), reply("final")], calls_file=str(tmp_path / "calls")
        ),
        model_id="scripted-1",
        prompt_version="p7",
        price=Price(1.0, 2.0),
    )

    @durable_tool(version="v3")
    def lookup(order: str) -> dict[str, Any]:
        """Look an order up."""
        return {"order": order, "status": "shipped"}

    async def node(state: State) -> dict[str, Any]:
        plan = await model.ainvoke(state["messages"])
        found = await lookup.ainvoke({"order": "A1"})
        saver = __import__("langgraph.config", fromlist=["get_config"]).get_config()[
            "configurable"
        ]["__pregel_checkpointer"]
        steps_seen.append(await read_steps(saver, "t1"))  # mid-run, from inside the node
        interrupt("continue?")
        final = await model.ainvoke([*state["messages"], plan, HumanMessage(str(found))])
        return {"messages": [plan, final]}

    return node


async def test_steps_carry_every_field(backend: Backend, tmp_path: Path) -> None:
    seen: list[list[Step]] = []
    before = time.time()
    async with backend.open() as saver:
        graph = one_node(agent_node(tmp_path, seen), saver, name="agent")
        await graph.ainvoke({"messages": [HumanMessage("hi")]}, CONFIG)
        await graph.ainvoke(Command(resume="yes"), CONFIG)
        steps = await read_steps(saver, "t1")
    assert [len(s) for s in seen] == [2, 2]  # read while in flight; the re-run replayed
    assert [(s.index, s.kind, s.name) for s in steps] == [
        (0, "model", "scripted-1"),
        (1, "tool", "lookup"),
        (2, "model", "scripted-1"),
    ]
    model_step, tool_step, _ = steps
    assert model_step.node == "agent"
    assert model_step.task_id
    assert len(model_step.input_hash) == 64
    assert model_step.output.content == "plan"
    assert model_step.model_id == "scripted-1"
    assert model_step.prompt_version == "p7"
    assert model_step.usage == {"input_tokens": 5, "output_tokens": 5, "total_tokens": 10}
    assert model_step.cost_usd == pytest.approx((5 * 1.0 + 5 * 2.0) / 1_000_000)
    assert before <= model_step.started_at <= model_step.ended_at
    assert model_step.duration_ms == pytest.approx(
        (model_step.ended_at - model_step.started_at) * 1000, abs=0.01
    )
    assert model_step.attempt == 1
    host, _, pid = model_step.worker_id.rpartition(":")
    assert host
    assert int(pid) > 0
    assert tool_step.output == {"order": "A1", "status": "shipped"}
    assert tool_step.tool_schema_version == "v3"
    assert tool_step.task_id == model_step.task_id


async def test_append_step_for_other_packages(backend: Backend) -> None:
    async with backend.open() as saver:
        first = await append_step(
            saver, "t1", "approval", name="refund", output={"decision": "approve", "by": "ann"}
        )
        second = await append_step(
            saver, "t1", "approval", name="refund", output={"decision": "reject", "by": "bob"}
        )
        steps = await read_steps(saver, "t1")
        with pytest.raises(ValueError, match="step kind 'note' is not one of"):
            await append_step(saver, "t1", "note", name="x")  # type: ignore[arg-type]
    assert (first, second) == (0, 1)
    assert [s.output["by"] for s in steps] == ["ann", "bob"]
    assert steps[0].kind == "approval"


async def test_the_log_is_append_only(backend: Backend, tmp_path: Path) -> None:
    seen: list[list[Step]] = []
    async with backend.open() as saver:
        graph = one_node(agent_node(tmp_path, seen), saver, name="agent")
        await graph.ainvoke({"messages": [HumanMessage("hi")]}, CONFIG)
        before = await read_steps(saver, "t1")
        await graph.ainvoke(Command(resume="yes"), CONFIG)
        after = await read_steps(saver, "t1")
    # The re-run replays the first two steps; it neither rewrites nor repeats them.
    assert after[: len(before)] == before
    assert len(after) == len(before) + 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        after[0].output = "edited"  # type: ignore[misc]
    step_methods = {n for n in dir(store_for(saver)) if "step" in n and not n.startswith("_")}
    # Only appends and reads (``step_threads`` lists the threads that have a log).
    assert step_methods == {
        "append_step",
        "put_with_step",
        "steps",
        "indexed_steps",
        "step_threads",
    }


async def test_log_is_encrypted_at_rest_and_readable(backend: Backend, tmp_path: Path) -> None:
    ring = KeyRing.from_spec(KeyRing.generate_spec("k1"))
    seen: list[list[Step]] = []
    async with backend.open(encryption=ring) as saver:
        graph = one_node(agent_node(tmp_path, seen), saver, name="agent")
        await graph.ainvoke({"messages": [HumanMessage("hi")]}, CONFIG)
        steps = await read_steps(saver, "t1")
        store = store_for(saver)
        assert store.encrypted
        raw_steps = await store.driver.steps("t1")
        raw_records = await store.driver.list("tool", "t1")
    assert steps[1].output == {"order": "A1", "status": "shipped"}
    assert all(payload.startswith("enc1:") for _, payload in raw_steps)
    assert "shipped" not in raw_records[0].payload
