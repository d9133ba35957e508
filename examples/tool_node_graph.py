"""Make a hand-built ``StateGraph`` with a ``ToolNode`` durable by changing three lines.

The graph below is the classic agent loop written by hand: an ``agent`` node
that asks the model, LangGraph's prebuilt ``ToolNode`` that runs the tools it
asked for, and ``tools_condition`` between them. Making it durable takes the
same three changes as for ``create_agent``, marked ``# tether (1/3)`` to
``(3/3)``: a ``recorded`` model, ``durable_tool`` tools, and a checkpointer from
``open_checkpointer``. The graph itself does not change.

It runs, crashes and resumes exactly like ``adopt_create_agent.py`` (see
``examples/README.md``):

    python examples/tool_node_graph.py --crash
    python examples/tool_node_graph.py
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from support_desk import (
    CHECKPOINTS_URL,
    crash_if_asked,
    refund_order,
    run_ticket,
    scripted_support_model,
)

from tether import durable_tool, open_checkpointer, recorded


def build_graph(
    model: Runnable[Any, Any], tools: Sequence[BaseTool], checkpointer: BaseCheckpointSaver[Any]
) -> CompiledStateGraph[Any]:
    """The agent loop: ``agent`` asks the model, ``tools`` runs the calls it made."""
    bound = model.bind_tools(tools)  # type: ignore[attr-defined]  # chat models have it

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)


async def main() -> None:
    model = recorded(scripted_support_model())  # tether (1/3)
    tools = [durable_tool(refund_order)]  # tether (2/3)
    async with open_checkpointer(CHECKPOINTS_URL) as saver:  # tether (3/3)
        agent = build_graph(model, tools, saver)
        await run_ticket(agent, saver)


if __name__ == "__main__":
    crash_if_asked(sys.argv)
    asyncio.run(main())
