"""Replay after the graph code changed: the first diverging step is reported, nothing is called."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from tether import open_checkpointer
from tether.debug import ReplayDivergenceError, timeline
from tether.graphs import ScriptedChatModel, ScriptRule, read_calls
from tether.steps import recorded


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    note: str


def _answer(messages: list[AnyMessage]) -> AIMessage:
    return AIMessage(f"answer to {len(messages)} messages")


def two_turns(
    calls_file: Path, *, prompt: str = "Summarise.", extra_call: bool = False, note: str = "ok"
) -> Any:
    """``first`` and ``second`` each ask a recorded model; the options are the "code changes"."""
    model = recorded(
        ScriptedChatModel(
            rules=[ScriptRule("any", lambda m: True, _answer)], calls_file=str(calls_file)
        )
    )

    async def first(state: Chat) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])], "note": note}

    async def second(state: Chat) -> dict[str, Any]:
        reply = await model.ainvoke([SystemMessage(prompt), *state["messages"]])
        if extra_call:
            reply = await model.ainvoke([SystemMessage("again"), *state["messages"]])
        return {"messages": [reply]}

    def build(saver: BaseCheckpointSaver[Any]) -> Any:
        graph = StateGraph(Chat)
        graph.add_node("first", first)
        graph.add_node("second", second)
        graph.add_edge(START, "first")
        graph.add_edge("first", "second")
        graph.add_edge("second", END)
        return graph.compile(checkpointer=saver)

    return build


@pytest.fixture
async def recorded_run(tmp_path: Path) -> Any:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    async with open_checkpointer(url) as saver:
        graph = two_turns(tmp_path / "calls.log")(saver)
        await graph.ainvoke(
            {"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "t"}}
        )
        yield saver
    assert len(read_calls(tmp_path / "calls.log")) == 2


async def test_unchanged_graph_replays(recorded_run: Any, tmp_path: Path) -> None:
    tl = await timeline(recorded_run, "t", graph=two_turns(tmp_path / "calls.log"))
    result = await tl.replay()
    assert result.ok
    assert result.supersteps == 2


async def test_a_changed_prompt_diverges_at_its_step(recorded_run: Any, tmp_path: Path) -> None:
    tl = await timeline(
        recorded_run, "t", graph=two_turns(tmp_path / "calls.log", prompt="Be brief.")
    )
    with pytest.raises(ReplayDivergenceError) as caught:
        await tl.replay()
    divergence = caught.value.divergence
    assert divergence.step == 1
    assert tl.entries[1].node == "second"
    assert divergence.nodes == ("second",)
    assert "non-deterministic model call" in divergence.reason
    assert "step 1" in str(caught.value)


async def test_an_extra_call_diverges_without_calling_the_model(
    recorded_run: Any, tmp_path: Path
) -> None:
    tl = await timeline(recorded_run, "t", graph=two_turns(tmp_path / "calls.log", extra_call=True))
    result = await tl.replay(check=False)
    assert result.divergence is not None
    assert result.divergence.nodes == ("second",)
    assert "no recorded model call" in result.divergence.reason
    assert result.supersteps == 1  # the first node still matched


async def test_a_changed_state_is_shown_channel_by_channel(
    recorded_run: Any, tmp_path: Path
) -> None:
    tl = await timeline(recorded_run, "t", graph=two_turns(tmp_path / "calls.log", note="changed"))
    result = await tl.replay(check=False)
    assert result.divergence is not None
    assert result.divergence.step == 0
    assert result.divergence.changes is not None
    assert result.divergence.changes.channels == ["note"]
    assert "- ok" in str(result.divergence)
    assert "+ changed" in str(result.divergence)
