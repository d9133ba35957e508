"""A step whose input canonical JSON cannot write is refused before anything runs.

Its hash would be the key a replay looks the recorded result up by; a hash of
``repr`` text may differ in the process that replays, so the step would run
again. The call is refused instead, naming the type and where it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from tests.backends import Backend
from tests.steps.graphs import State, one_node
from tests.steps.scripted import CountingScriptedModel, count_calls, reply
from tether._canonical import CanonicalJSONError
from tether.steps import durable_tool, read_steps, recorded

CONFIG: Any = {"configurable": {"thread_id": "t1"}}


class Customer:
    def __init__(self, name: str) -> None:
        self.name = name


async def test_a_durable_tool_refuses_arguments_it_cannot_hash(sqlite_backend: Backend) -> None:
    ran: list[str] = []

    @durable_tool
    def refund(order: str, customer: Any) -> str:
        """Refund an order to a customer."""
        ran.append(order)
        return "refunded"

    async def node(state: State) -> dict[str, Any]:
        result = await refund.ainvoke({"order": "A1", "customer": Customer("bob")})
        return {"messages": [HumanMessage(result)]}

    async with sqlite_backend.open() as saver:
        graph = one_node(node, saver)
        with pytest.raises(CanonicalJSONError) as info:
            await graph.ainvoke({"messages": [HumanMessage("go")]}, CONFIG)
        steps = await read_steps(saver, "t1")
    assert (info.value.type_name, info.value.path) == (f"{__name__}.Customer", "$.customer")
    assert ran == []
    assert steps == []


async def test_a_recorded_model_refuses_a_conversation_it_cannot_hash(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    model = recorded(CountingScriptedModel(replies=[reply("ok")], calls_file=str(tmp_path / "c")))
    call = {"name": "refund", "args": {"to": {"bob", "eve"}}, "id": "c1", "type": "tool_call"}

    async def node(state: State) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    async with sqlite_backend.open() as saver:
        graph = one_node(node, saver)
        asked = [HumanMessage("go"), AIMessage("", tool_calls=[call])]
        with pytest.raises(CanonicalJSONError, match=r"^message 1 of the hashed conversation"):
            await graph.ainvoke({"messages": asked}, CONFIG)
    assert count_calls(tmp_path / "c") == 0
