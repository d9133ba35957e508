"""Recorded model calls inside graph nodes: replay, non-determinism, sync nodes, streams."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langgraph.types import Command

from tests.backends import Backend
from tests.steps.graphs import State, ask_then_pause, one_node
from tests.steps.scripted import CountingScriptedModel, count_calls, reply
from tether import open_checkpointer_sync
from tether.steps import NonDeterminismError, read_steps, read_steps_sync, recorded

CONFIG: Any = {"configurable": {"thread_id": "t1"}}


def scripted(tmp_path: Path, *replies: dict[str, Any]) -> CountingScriptedModel:
    return CountingScriptedModel(
        replies=list(replies) or [reply("hello there")], calls_file=str(tmp_path / "calls")
    )


async def test_rerun_node_replays_instead_of_asking_again(backend: Backend, tmp_path: Path) -> None:
    model = recorded(scripted(tmp_path))
    async with backend.open() as saver:
        graph = one_node(ask_then_pause(model), saver)
        await graph.ainvoke({"messages": [HumanMessage("hi")]}, CONFIG)
        assert count_calls(tmp_path / "calls") == 1
        # Resuming re-runs the node from its start; the model call is replayed.
        result = await graph.ainvoke(Command(resume="yes"), CONFIG)
        assert count_calls(tmp_path / "calls") == 1
        answer = result["messages"][-1]
        assert isinstance(answer, AIMessage)
        assert answer.content == "hello there"
        assert answer.id == "scripted-0"
        assert answer.usage_metadata == {"input_tokens": 5, "output_tokens": 5, "total_tokens": 10}
        assert len(await read_steps(saver, "t1")) == 1


async def test_replay_keeps_tool_calls_intact(backend: Backend, tmp_path: Path) -> None:
    model = recorded(scripted(tmp_path, reply("", [{"name": "refund", "args": {"o": "A1"}}])))
    async with backend.open() as saver:
        graph = one_node(ask_then_pause(model), saver)
        first = await graph.ainvoke({"messages": [HumanMessage("hi")]}, CONFIG)
        assert "__interrupt__" in first
        result = await graph.ainvoke(Command(resume="yes"), CONFIG)
        assert result["messages"][-1].tool_calls == [
            {"name": "refund", "args": {"o": "A1"}, "id": "call_0_0", "type": "tool_call"}
        ]
        assert count_calls(tmp_path / "calls") == 1


async def test_changed_input_on_replay_raises_non_determinism(
    backend: Backend, tmp_path: Path
) -> None:
    model = recorded(scripted(tmp_path))
    prompt = {"text": "first question"}

    async def node(state: State) -> dict[str, Any]:
        from langgraph.types import interrupt

        answer = await model.ainvoke([HumanMessage(prompt["text"])])
        interrupt("approve?")
        return {"messages": [answer]}

    async with backend.open() as saver:
        graph = one_node(node, saver)
        await graph.ainvoke({"messages": [HumanMessage("hi")]}, CONFIG)
        prompt["text"] = "a different question"
        with pytest.raises(NonDeterminismError) as info:
            await graph.ainvoke(Command(resume="yes"), CONFIG)
    error = info.value
    assert "model.0" in error.step
    assert error.recorded_hash != error.current_hash
    assert error.recorded_hash in str(error)
    assert error.current_hash in str(error)
    assert count_calls(tmp_path / "calls") == 1


def test_sync_node_in_worker_thread_records_and_replays(backend: Backend, tmp_path: Path) -> None:
    model = recorded(scripted(tmp_path))

    def node(state: State) -> dict[str, Any]:
        from langgraph.types import interrupt

        answer = model.invoke(state["messages"])
        interrupt("approve?")
        return {"messages": [answer]}

    with open_checkpointer_sync(backend.url, **backend.options) as saver:
        graph = one_node(node, saver)
        graph.invoke({"messages": [HumanMessage("hi")]}, CONFIG)
        result = graph.invoke(Command(resume="ok"), CONFIG)
        steps = read_steps_sync(saver, "t1")
    assert result["messages"][-1].content == "hello there"
    assert count_calls(tmp_path / "calls") == 1
    assert [s.kind for s in steps] == ["model"]


async def test_astream_replays_the_recorded_message_as_chunks(
    backend: Backend, tmp_path: Path
) -> None:
    model = recorded(
        scripted(tmp_path, reply("three word answer", [{"name": "refund", "args": {"o": "A1"}}]))
    )
    seen: list[list[AIMessageChunk]] = []

    async def node(state: State) -> dict[str, Any]:
        from langgraph.types import interrupt

        chunks = [c async for c in model.astream(state["messages"])]
        seen.append(chunks)
        interrupt("approve?")
        total = chunks[0]
        for chunk in chunks[1:]:
            total = total + chunk
        return {"messages": [AIMessage(content=total.content, tool_calls=total.tool_calls)]}

    async with backend.open() as saver:
        graph = one_node(node, saver)
        await graph.ainvoke({"messages": [HumanMessage("hi")]}, CONFIG)
        result = await graph.ainvoke(Command(resume="ok"), CONFIG)
        steps = await read_steps(saver, "t1")
    live, replayed = seen
    assert len([c for c in live if c.content]) == 3  # the scripted model streams word by word
    assert all(isinstance(c, AIMessageChunk) for c in replayed)
    assert count_calls(tmp_path / "calls") == 1
    assert result["messages"][-1].content == "three word answer"
    assert result["messages"][-1].tool_calls[0]["args"] == {"o": "A1"}
    recorded_answer = steps[0].output
    assert recorded_answer.content == "three word answer"
    assert recorded_answer.usage_metadata["total_tokens"] == 10


def test_stream_replays_in_a_sync_node(tmp_path: Path) -> None:
    model = recorded(scripted(tmp_path))

    def node(state: State) -> dict[str, Any]:
        from langgraph.types import interrupt

        text = "".join(str(c.content) for c in model.stream(state["messages"]))
        interrupt("approve?")
        return {"messages": [AIMessage(text)]}

    with open_checkpointer_sync("memory://") as saver:
        graph = one_node(node, saver)
        graph.invoke({"messages": [HumanMessage("hi")]}, CONFIG)
        result = graph.invoke(Command(resume="ok"), CONFIG)
    assert result["messages"][-1].content == "hello there"
    assert count_calls(tmp_path / "calls") == 1


async def test_two_calls_in_one_node_are_two_steps(backend: Backend, tmp_path: Path) -> None:
    model = recorded(scripted(tmp_path, reply("one"), reply("two")))

    async def node(state: State) -> dict[str, Any]:
        first = await model.ainvoke(state["messages"])
        second = await model.ainvoke([*state["messages"], first])
        return {"messages": [first, second]}

    async with backend.open() as saver:
        result = await one_node(node, saver).ainvoke({"messages": [HumanMessage("hi")]}, CONFIG)
        steps = await read_steps(saver, "t1")
    assert [m.content for m in result["messages"][1:]] == ["one", "two"]
    assert [s.output.content for s in steps] == ["one", "two"]
    assert str(steps[0].key).endswith("model.0")
    assert str(steps[1].key).endswith("model.1")


async def test_outside_a_graph_the_model_is_just_called(tmp_path: Path) -> None:
    model = recorded(scripted(tmp_path))
    assert (await model.ainvoke([HumanMessage("hi")])).content == "hello there"
    assert model.invoke([HumanMessage("hi")]).content == "hello there"
    assert count_calls(tmp_path / "calls") == 2


def test_recorded_refuses_what_is_not_a_runnable() -> None:
    with pytest.raises(TypeError, match="wraps a LangChain chat model or Runnable"):
        recorded("gpt-4o")  # type: ignore[call-overload]


async def test_a_retried_node_replays_calls_its_failed_attempt_recorded(
    backend: Backend, tmp_path: Path
) -> None:
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import RetryPolicy

    model = recorded(scripted(tmp_path))
    attempts: list[int] = []

    async def node(state: State) -> dict[str, Any]:
        answer = await model.ainvoke(state["messages"])
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionError("flaky downstream service")
        return {"messages": [answer]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    builder.add_node("think", node, retry_policy=RetryPolicy(max_attempts=2, initial_interval=0))
    builder.add_edge(START, "think")
    builder.add_edge("think", END)
    async with backend.open() as saver:
        result = await builder.compile(checkpointer=saver).ainvoke(
            {"messages": [HumanMessage("hi")]}, CONFIG
        )
        steps = await read_steps(saver, "t1")
    assert len(attempts) == 2
    assert result["messages"][-1].content == "hello there"
    assert count_calls(tmp_path / "calls") == 1  # the retry replayed the first attempt's call
    assert [(s.kind, s.attempt) for s in steps] == [("model", 1)]
