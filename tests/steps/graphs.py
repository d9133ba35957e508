"""Small graphs for the in-process steps tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AnyMessage
from langgraph.graph import END, START, StateGraph, add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import interrupt


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def one_node(
    node: Callable[..., Any], checkpointer: Any, name: str = "think"
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """START -> ``node`` -> END."""
    builder = StateGraph(State)
    builder.add_node(name, node)
    builder.add_edge(START, name)
    builder.add_edge(name, END)
    return builder.compile(checkpointer=checkpointer)


def ask_then_pause(model: Any) -> Callable[[State], Any]:
    """An async node: a recorded call, then a pause for a person, then the answer."""

    async def node(state: State) -> dict[str, Any]:
        answer = await model.ainvoke(state["messages"])
        interrupt("approve?")
        return {"messages": [answer]}

    return node
