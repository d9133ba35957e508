"""Every call a recorded model makes in a graph node is recorded and charged, or refused.

The legacy ``generate``/``agenerate`` path would reach the model unrecorded and
uncharged, and ``astream_events`` yields the wrapped model's own events, which
a replayed call does not produce; inside a graph node both are refused with an
error naming what to call instead, before the model is asked. Outside a graph
both work as the wrapped model's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.output_parsers import StrOutputParser
from langgraph.graph import END, START, StateGraph

from tests.backends import Backend
from tests.steps.graphs import State
from tests.steps.scripted import CountingScriptedModel, count_calls, reply
from tether.steps import Budget, BudgetExceededError, StepsError, read_steps, recorded, with_budget

CONFIG: Any = {"configurable": {"thread_id": "t1"}}


def _model(tmp_path: Path) -> Any:
    replies = [reply(f"turn {i}") for i in range(3)]
    return recorded(CountingScriptedModel(replies=replies, calls_file=str(tmp_path / "calls")))


_text = StrOutputParser()


def _graph(saver: Any, agent: Any, turns: int = 1) -> Any:
    def more(state: State) -> str:
        return "agent" if sum(m.type == "ai" for m in state["messages"]) < turns else END

    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", more, ["agent", END])
    return builder.compile(checkpointer=saver)


@pytest.mark.parametrize("call", ["agenerate", "generate", "astream_events", "bound_events"])
async def test_unrecordable_calls_are_refused_inside_a_node(
    backend: Backend, tmp_path: Path, call: str
) -> None:
    model = _model(tmp_path)

    async def agent(state: State) -> dict[str, Any]:
        messages = state["messages"]
        if call == "agenerate":
            result = await model.agenerate([messages])
        elif call == "generate":
            result = model.generate([messages])
        else:
            # A chain is recorded as a RecordedModel rather than a RecordedChatModel.
            target = model if call == "astream_events" else recorded(model.wrapped | _text)
            async for _ in target.astream_events(messages, version="v2"):
                pass
        return {"messages": [result.generations[0][0].message]}

    expected = r"astream_events\(\) on a recorded model" if "events" in call else r"generate\(\)"
    async with backend.open() as saver:
        with pytest.raises(StepsError, match=expected):
            await _graph(saver, agent).ainvoke({"messages": [HumanMessage("go")]}, CONFIG)
        steps = await read_steps(saver, "t1")
    assert count_calls(tmp_path / "calls") == 0
    assert steps == []


async def test_a_stream_is_charged_to_the_budget_like_an_invoke(
    backend: Backend, tmp_path: Path
) -> None:
    model = _model(tmp_path)

    async def agent(state: State) -> dict[str, Any]:
        chunks = [chunk async for chunk in model.astream(state["messages"])]
        return {"messages": [chunks[0]]}

    async with backend.open() as saver:
        budget = Budget(max_tokens=15, on_exceed="stop")
        graph = with_budget(_graph(saver, agent, turns=3), budget)
        with pytest.raises(BudgetExceededError) as stopped:
            await graph.ainvoke({"messages": [HumanMessage("go")]}, CONFIG)
        steps = await read_steps(saver, "t1")
    # 10 tokens a call: the second starts at 10 < 15, the third would start at 20.
    assert stopped.value.spent["tokens"] == 20
    assert count_calls(tmp_path / "calls") == 2
    assert [s.kind for s in steps] == ["model", "model", "budget"]


async def test_outside_a_graph_generate_and_astream_events_are_the_models(
    tmp_path: Path,
) -> None:
    model = _model(tmp_path)
    result = await model.agenerate([[HumanMessage("hi")]])
    events = [e["event"] async for e in model.astream_events([HumanMessage("hi")], version="v2")]
    assert result.generations[0][0].message.content == "turn 0"
    assert "on_chat_model_end" in events
    assert count_calls(tmp_path / "calls") == 2
