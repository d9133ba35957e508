"""bind_tools and with_structured_output keep working, recorded and replayed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableBinding
from langchain_core.tools import tool
from langgraph.types import Command, interrupt
from pydantic import BaseModel

from tests.backends import Backend
from tests.steps.graphs import State, one_node
from tests.steps.scripted import CountingScriptedModel, count_calls, reply
from tether.steps import RecordedChatModel, RecordedModel, read_steps, recorded

CONFIG: Any = {"configurable": {"thread_id": "t1"}}


class Verdict(BaseModel):
    """A refund decision."""

    approve: bool
    reason: str


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return order


async def test_bind_tools_returns_a_recorded_model(backend: Backend, tmp_path: Path) -> None:
    base = recorded(
        CountingScriptedModel(
            replies=[reply("", [{"name": "lookup", "args": {"order": "A1"}}])],
            calls_file=str(tmp_path / "calls"),
        ),
        model_id="m1",
    )
    bound = base.bind_tools([lookup])
    # A chat model's tools are bound to the recorded chat model, so the record wraps the call.
    assert isinstance(bound, RunnableBinding)
    assert isinstance(bound.bound, RecordedChatModel)
    assert bound.bound.recorder.model_id == "m1"
    assert bound.kwargs["tools"][0]["function"]["name"] == "lookup"

    async def node(state: State) -> dict[str, Any]:
        answer = await bound.ainvoke(state["messages"])
        interrupt("ok?")
        return {"messages": [answer]}

    async with backend.open() as saver:
        graph = one_node(node, saver)
        await graph.ainvoke({"messages": [HumanMessage("hi")]}, CONFIG)
        result = await graph.ainvoke(Command(resume="yes"), CONFIG)
    assert result["messages"][-1].tool_calls[0]["args"] == {"order": "A1"}
    assert count_calls(tmp_path / "calls") == 1


async def test_structured_output_is_recorded_and_rebuilt(backend: Backend, tmp_path: Path) -> None:
    model = recorded(
        CountingScriptedModel(
            replies=[reply("", [{"name": "Verdict", "args": {"approve": True, "reason": "dup"}}])],
            calls_file=str(tmp_path / "calls"),
        )
    )
    judge = model.with_structured_output(Verdict)
    assert isinstance(judge, RecordedModel)
    verdicts: list[Verdict] = []

    async def node(state: State) -> dict[str, Any]:
        verdict = await judge.ainvoke(state["messages"])
        verdicts.append(verdict)
        interrupt("ok?")
        return {"messages": [HumanMessage(verdict.reason)]}

    async with backend.open() as saver:
        graph = one_node(node, saver)
        await graph.ainvoke({"messages": [HumanMessage("hi")]}, CONFIG)
        await graph.ainvoke(Command(resume="yes"), CONFIG)
        steps = await read_steps(saver, "t1")
    assert verdicts == [Verdict(approve=True, reason="dup")] * 2
    assert all(isinstance(v, Verdict) for v in verdicts)
    assert count_calls(tmp_path / "calls") == 1
    assert steps[0].output == Verdict(approve=True, reason="dup")


def test_other_attributes_come_from_the_wrapped_model(tmp_path: Path) -> None:
    inner = CountingScriptedModel(
        replies=[reply("x")], calls_file=str(tmp_path / "calls"), tokens_per_call=7
    )
    model = recorded(inner)
    assert model.tokens_per_call == 7
    assert recorded(model) is model
    assert repr(model).startswith("recorded(")
