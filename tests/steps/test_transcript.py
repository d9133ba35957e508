"""Long runs: the transcript channel stores each message once; the context stays bounded."""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.graph import END, START, StateGraph

from tests.backends import Backend
from tether.steps import ContextBuilder, transcript_channel


def conversation(turns: int, size: int = 400) -> list[BaseMessage]:
    messages: list[BaseMessage] = [SystemMessage("you are a pager"), HumanMessage("read")]
    for i in range(turns):
        messages.append(
            AIMessage(
                "",
                id=f"ai{i}",
                tool_calls=[
                    {"name": "fetch", "args": {"page": i}, "id": f"c{i}", "type": "tool_call"}
                ],
            )
        )
        messages.append(ToolMessage("x" * size, tool_call_id=f"c{i}", id=f"tool{i}"))
    return messages


def names(summary: str, messages: list[BaseMessage]) -> str:
    """A summarizer function: lists what it folded."""
    return (summary + " " + ",".join(str(m.id) for m in messages)).strip()


def test_short_conversation_is_left_alone() -> None:
    messages = conversation(2)
    window = ContextBuilder(max_tokens=10_000, summarizer=names).build(messages)
    assert window.messages == messages
    assert window.removals == []
    assert window.update == {}


def test_long_conversation_becomes_summary_plus_recent() -> None:
    messages = conversation(20)
    builder = ContextBuilder(max_tokens=1_000, summarizer=names, keep_recent_tokens=400)
    window = builder.build(messages, summary="earlier")
    system, head, *recent = window.messages
    assert system == messages[0]
    assert isinstance(head, SystemMessage)
    assert str(head.content).endswith(window.summary)
    assert window.summary.startswith("earlier ")
    assert not isinstance(recent[0], ToolMessage)  # never starts on an orphaned tool result
    assert recent == messages[-len(recent) :]
    folded = messages[1 : len(messages) - len(recent)]
    assert [r.id for r in window.removals] == [m.id for m in folded if m.id]
    assert all(isinstance(r, RemoveMessage) for r in window.removals)
    assert window.update == {"summary": window.summary}
    assert builder.token_counter(window.messages) <= 1_000


def test_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="max_tokens must be positive"):
        ContextBuilder(max_tokens=0, summarizer=names)
    with pytest.raises(ValueError, match="keep_recent_tokens must be between"):
        ContextBuilder(max_tokens=100, summarizer=names, keep_recent_tokens=100)


class PagerState(TypedDict):
    messages: Annotated[list[AnyMessage], transcript_channel(snapshot_every=4)]
    summary: str


def counted(summary: str, messages: list[BaseMessage]) -> str:
    """A summarizer function with a bounded summary, as a real one has."""
    before = int(summary.split(maxsplit=1)[0]) if summary else 0
    return f"{before + len(messages)} messages folded"


async def _run_pager(backend: Backend, pages: int) -> tuple[dict[str, Any], list[int]]:
    context = ContextBuilder(max_tokens=600, summarizer=counted)
    seen_lengths: list[int] = []

    async def agent(state: PagerState) -> dict[str, Any]:
        window = await context.abuild(state["messages"], state.get("summary", ""))
        seen_lengths.append(len(window.messages))
        answer = AIMessage(
            "",
            tool_calls=[
                {"name": "fetch", "args": {}, "id": f"c{len(seen_lengths)}", "type": "tool_call"}
            ],
        )
        return {"messages": [*window.removals, answer], **window.update}

    def tools(state: PagerState) -> dict[str, Any]:
        call = state["messages"][-1]
        assert isinstance(call, AIMessage)
        return {"messages": [ToolMessage("y" * 300, tool_call_id=call.tool_calls[0]["id"])]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(PagerState)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "tools")
    builder.add_conditional_edges(
        "tools", lambda s: END if len(seen_lengths) >= pages else "agent", ["agent", END]
    )
    async with backend.open() as saver:
        graph = builder.compile(checkpointer=saver)
        config: Any = {"configurable": {"thread_id": "t1"}, "recursion_limit": 10 * pages}
        result = await graph.ainvoke({"messages": [HumanMessage("read")]}, config)
    return result, seen_lengths


async def test_state_stays_bounded_over_a_long_run(backend: Backend) -> None:
    result, lengths = await _run_pager(backend, pages=40)
    assert result["summary"].endswith("messages folded")  # older messages were folded
    assert len(result["messages"]) < 20
    assert max(lengths) < 20


async def _stored_bytes(path: str) -> int:
    import aiosqlite

    async with aiosqlite.connect(path) as conn:
        rows = list(
            await conn.execute_fetchall(
                "SELECT (SELECT SUM(LENGTH(checkpoint)) FROM checkpoints)"
                " + (SELECT SUM(LENGTH(value)) FROM writes)"
            )
        )
    return int(rows[0][0])


async def test_storage_grows_linearly_not_quadratically(tmp_path: Any) -> None:
    sizes = {}
    for pages in (20, 40):
        db = tmp_path / f"p{pages}.db"
        await _run_pager(Backend("sqlite", f"sqlite:///{db}"), pages=pages)
        sizes[pages] = await _stored_bytes(str(db))
    # Twice the steps: about twice the bytes (the default channel would store ~4x).
    assert sizes[40] < 2.3 * sizes[20]
