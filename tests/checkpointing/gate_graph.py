"""A small graph that stops at a human gate; used by the behaviour tests and their child process.

Run as a script it resumes a paused thread in a fresh OS process::

    python -m tests.checkpointing.gate_graph URL OPTIONS_JSON THREAD_ID RESUME_VALUE
"""

from __future__ import annotations

import json
import operator
import sys
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, interrupt


class GateState(TypedDict, total=False):
    items: Annotated[list[str], operator.add]
    decision: str


def propose(state: GateState) -> GateState:
    return {"items": [f"proposal-{len(state.get('items', []))}"]}


def gate(state: GateState) -> GateState:
    decision = interrupt({"question": "approve?", "items": state["items"]})
    return {"decision": str(decision)}


def finish(state: GateState) -> GateState:
    return {"items": [f"done:{state['decision']}"]}


def build(checkpointer: BaseCheckpointSaver[Any]) -> CompiledStateGraph[Any, Any, Any, Any]:
    graph = StateGraph(GateState)
    graph.add_node("propose", propose)
    graph.add_node("gate", gate)
    graph.add_node("finish", finish)
    graph.add_edge(START, "propose")
    graph.add_edge("propose", "gate")
    graph.add_edge("gate", "finish")
    graph.add_edge("finish", END)
    return graph.compile(checkpointer=checkpointer)


def _resume_in_this_process(url: str, options: dict[str, Any], thread_id: str, value: str) -> None:
    from tether import open_checkpointer_sync

    with open_checkpointer_sync(url, **options) as saver:
        result = build(saver).invoke(
            Command(resume=value), {"configurable": {"thread_id": thread_id}}
        )
    print(json.dumps(result))


if __name__ == "__main__":
    url, options, thread_id, value = sys.argv[1:5]
    _resume_in_this_process(url, json.loads(options), thread_id, value)
