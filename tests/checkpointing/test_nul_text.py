"""Text holding NUL characters is stored and read back exactly, on every backend.

PostgreSQL's ``jsonb`` cannot hold U+0000, and upstream's saver keeps plain text
channels inside a ``jsonb`` column, so a state with a NUL in a top-level text
channel (a pasted document, a tool's raw output) failed the whole write.
"""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph

from tests.backends import Backend

TEXT = "before\x00after"


class State(TypedDict, total=False):
    text: str
    notes: Annotated[list[str], operator.add]


def _echo(state: State) -> State:
    return {"text": state["text"] + "\x00!", "notes": [state["text"]]}


async def test_nul_in_text_channels_round_trips(backend: Backend) -> None:
    builder = StateGraph(State)
    builder.add_node("echo", _echo)
    builder.add_edge(START, "echo")
    builder.add_edge("echo", END)
    config = {"configurable": {"thread_id": "nul-text"}}
    async with backend.open() as saver:
        graph = builder.compile(checkpointer=saver)
        out = await graph.ainvoke({"text": TEXT}, config)
        assert out == {"text": TEXT + "\x00!", "notes": [TEXT]}
        state = await graph.aget_state(config)
        assert state.values == {"text": TEXT + "\x00!", "notes": [TEXT]}
        history = [s.values.get("text") async for s in graph.aget_state_history(config)]
        assert TEXT in history
        assert TEXT + "\x00!" in history
        # A later plain value replaces the blob-stored one.
        await graph.aupdate_state(config, {"text": "plain"})
        assert (await graph.aget_state(config)).values["text"] == "plain"
