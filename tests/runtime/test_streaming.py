"""``EventMapper``: a real LangGraph run, streamed as the LangGraph Agent Server streams it.

The graph is small and deterministic: ``agent`` asks a scripted chat model
(a whole reply), then the ``review`` subgraph writes a custom event, stops at
an ``interrupt``, and, once resumed, streams a reply token by token from a fake
chat model. Each test runs it twice, as the worker would: the first run ends at
the interrupt, the second resumes it. Event names are compared with the
subgraph's task id left out (``values|review``), since task ids are new per run.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, NotRequired, TypedDict

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_stream_writer
from langgraph.errors import GraphRecursionError
from langgraph.graph import START, StateGraph, add_messages
from langgraph.types import Command, Send, interrupt

from tether.graphs._scripted import ScriptedChatModel, ScriptRule, on_first_turn
from tether.runtime.errors import InvalidRunRequestError
from tether.runtime.streaming import (
    Event,
    EventMapper,
    error_event,
    langgraph_modes,
    metadata_event,
    stream_modes,
    to_json,
)

REPLY = "Let me check order 7"
FINAL = "Refund approved and sent"


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    approved: NotRequired[bool]


def build() -> Any:
    """``agent`` → ``review`` (subgraph: ``ask`` interrupts, ``conclude`` streams tokens)."""
    scripted = ScriptedChatModel(
        rules=[ScriptRule("check", on_first_turn, lambda _m: AIMessage(content=REPLY))]
    )
    streaming = GenericFakeChatModel(messages=iter([AIMessage(content=FINAL, id="final-1")]))

    async def agent(state: State) -> dict[str, Any]:
        return {"messages": [await scripted.ainvoke(state["messages"])]}

    def ask(state: State) -> dict[str, Any]:
        get_stream_writer()({"step": "asking"})
        return {"approved": interrupt({"question": "approve the refund?"}) == "yes"}

    async def conclude(state: State) -> dict[str, Any]:
        return {"messages": [await streaming.ainvoke(state["messages"])]}

    review = (
        StateGraph(State)
        .add_node("ask", ask)
        .add_node("conclude", conclude)
        .add_edge(START, "ask")
        .add_edge("ask", "conclude")
        .compile()
    )
    return (
        StateGraph(State)
        .add_node("agent", agent)
        .add_node("review", review)
        .add_edge(START, "agent")
        .add_edge("agent", "review")
        .compile(checkpointer=InMemorySaver())
    )


async def stream(graph: Any, payload: Any, mapper: EventMapper) -> list[Event]:
    """One run, as the worker streams it: every chunk through the mapper."""
    config = {"configurable": {"thread_id": "t1"}}
    events: list[Event] = []
    modes = langgraph_modes(mapper.requested)
    async for ns, mode, chunk in graph.astream(payload, config, stream_mode=modes, subgraphs=True):
        events += mapper.map(ns, mode, chunk)
    return events


async def run_modes(
    modes: Sequence[str], subgraphs: bool, node_events: bool = False
) -> tuple[list[Event], list[Event], EventMapper]:
    """The first run's events, the resumed run's events, and the first run's mapper."""
    graph = build()
    mapper = EventMapper(modes, subgraphs=subgraphs, node_events=node_events)
    first = await stream(graph, {"messages": [HumanMessage("refund order 7", id="h1")]}, mapper)
    again = EventMapper(modes, subgraphs=subgraphs, node_events=node_events)
    second = await stream(graph, Command(resume="yes"), again)
    return first, second, mapper


def names(events: list[Event]) -> list[str]:
    """Event names with task ids left out: ``values|review:1f0…`` → ``values|review``."""
    return [re.sub(r":[0-9a-f-]{36}", "", name) for name, _ in events]


def data(events: list[Event], name: str) -> list[Any]:
    """The payloads of the events called ``name`` (task ids left out)."""
    return [d for n, (_, d) in zip(names(events), events, strict=True) if n == name]


def interrupt_of(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """``__interrupt__`` entries, id and value only."""
    return [{"id": i["id"], "value": i["value"]} for i in payload["__interrupt__"]]


QUESTION = {"question": "approve the refund?"}


async def test_values_only_carries_the_interrupt_once() -> None:
    first, second, mapper = await run_modes(["values"], subgraphs=False)
    [pending] = mapper.interrupts
    assert names(first) == ["values", "values", "values"]
    assert [len(v["messages"]) for v in data(first, "values")] == [1, 2, 2]
    # LangGraph puts the interrupt in the values stream; the updates chunk is not sent again.
    assert [interrupt_of(v) for v in data(first, "values") if "__interrupt__" in v] == [
        [{"id": pending["id"], "value": QUESTION}]
    ]
    assert names(second) == ["values", "values"]
    final = data(second, "values")[-1]
    assert final["approved"] is True
    assert [m["content"] for m in final["messages"]] == ["refund order 7", REPLY, FINAL]


async def test_updates_with_subgraphs_are_named_by_namespace() -> None:
    first, second, mapper = await run_modes(["updates"], subgraphs=True)
    [pending] = mapper.interrupts
    assert names(first) == ["updates", "updates|review", "updates"]
    assert data(first, "updates")[0]["agent"]["messages"][0]["content"] == REPLY
    expected = [{"id": pending["id"], "value": QUESTION}]
    assert interrupt_of(data(first, "updates|review")[0]) == expected
    assert interrupt_of(data(first, "updates")[1]) == expected
    assert names(second) == ["updates|review", "updates|review", "updates"]
    assert data(second, "updates|review")[0] == {"ask": {"approved": True}}
    # The subgraph's namespace is `<node>:<task id>`, as LangGraph names it.
    assert re.fullmatch(r"updates\|review:[0-9a-f-]{36}", first[1][0])


async def test_messages_stream_partial_then_complete() -> None:
    first, second, _ = await run_modes(["messages"], subgraphs=True)
    assert names(first) == ["messages/metadata", "messages/complete"]
    [[reply]] = data(first, "messages/complete")
    assert (reply["type"], reply["content"]) == ("ai", REPLY)
    [metadata] = data(first, "messages/metadata")
    assert list(metadata) == [reply["id"]]
    assert metadata[reply["id"]]["metadata"]["langgraph_node"] == "agent"

    # Tokens from the subgraph's model: the whole message so far, each time.
    assert names(second) == ["messages/metadata"] + ["messages/partial"] * 7
    partial = [d[0] for d in data(second, "messages/partial")]
    assert {(m["id"], m["type"]) for m in partial} == {("final-1", "ai")}
    assert [m["content"] for m in partial] == [
        "Refund", "Refund ", "Refund approved", "Refund approved ",
        "Refund approved and", "Refund approved and ", FINAL,
    ]  # fmt: skip
    [metadata] = data(second, "messages/metadata")
    assert metadata["final-1"]["metadata"]["langgraph_node"] == "conclude"


async def test_subgraph_messages_without_subgraphs_arrive_whole() -> None:
    first, second, _ = await run_modes(["messages"], subgraphs=False)
    assert names(first) == ["messages/metadata", "messages/complete"]
    # No tokens from inside the subgraph; the message, once the subgraph returns it.
    assert names(second) == ["messages/metadata", "messages/complete"]
    [[message]] = data(second, "messages/complete")
    assert (message["id"], message["type"], message["content"]) == ("final-1", "ai", FINAL)


async def test_messages_tuple() -> None:
    first, second, _ = await run_modes(["messages-tuple"], subgraphs=True)
    assert names(first) == ["messages"]
    [[message, metadata]] = data(first, "messages")
    assert (message["type"], message["content"]) == ("ai", REPLY)
    assert metadata["langgraph_node"] == "agent"
    assert names(second) == ["messages|review"] * 7
    chunks = [d[0] for d in data(second, "messages|review")]
    assert {c["type"] for c in chunks} == {"AIMessageChunk"}
    assert "".join(c["content"] for c in chunks) == FINAL

    _, second, _ = await run_modes(["messages-tuple"], subgraphs=False)
    assert names(second) == ["messages"]
    [[whole, _meta]] = data(second, "messages")
    assert (whole["type"], whole["content"]) == ("ai", FINAL)


async def test_custom_and_tasks() -> None:
    first, _, _ = await run_modes(["custom", "tasks"], subgraphs=True)
    assert names(first) == [
        "tasks", "tasks", "tasks", "tasks|review", "custom|review", "tasks|review", "tasks",
    ]  # fmt: skip
    assert data(first, "custom|review") == [{"step": "asking"}]
    started, finished = data(first, "tasks|review")
    assert (started["name"], sorted(started)) == ("ask", ["id", "input", "name", "triggers"])
    assert finished["interrupts"][0]["value"] == QUESTION

    first, _, _ = await run_modes(["custom", "tasks"], subgraphs=False)
    assert names(first) == ["tasks"] * 4  # the subgraph's custom event stays inside


async def test_debug_checkpoints_get_the_server_fields() -> None:
    first, _, _ = await run_modes(["debug"], subgraphs=False)
    debug = data(first, "debug")
    assert [d["type"] for d in debug] == [
        "checkpoint", "checkpoint", "task", "task_result", "checkpoint", "task", "task_result",
    ]  # fmt: skip
    checkpoints = [d["payload"] for d in debug if d["type"] == "checkpoint"]
    for payload in checkpoints:
        configurable = payload["config"]["configurable"]
        assert payload["checkpoint"] == {
            "checkpoint_id": configurable["checkpoint_id"],
            "thread_id": "t1",
            "checkpoint_ns": "",
        }
    assert checkpoints[0]["parent_checkpoint"] is None
    assert checkpoints[1]["parent_checkpoint"] == checkpoints[0]["checkpoint"]


async def test_checkpoints() -> None:
    first, _, _ = await run_modes(["checkpoints"], subgraphs=True)
    assert names(first) == ["checkpoints"] * 3 + ["checkpoints|review"] * 2
    for payload in data(first, "checkpoints"):
        assert sorted(payload) == ["config", "metadata", "next", "parent_config", "tasks", "values"]
    assert data(first, "checkpoints")[-1]["next"] == ["review"]


ALLOWED = {
    ("values",): {"values"},
    ("updates",): {"updates"},
    ("messages",): {"messages/metadata", "messages/partial", "messages/complete"},
    ("messages-tuple",): {"messages"},
    ("custom",): {"custom"},
    ("values", "custom", "debug"): {"values", "custom", "debug"},
}


async def test_only_the_requested_modes_are_emitted() -> None:
    for modes, allowed in ALLOWED.items():
        first, second, _ = await run_modes(modes, subgraphs=True)
        base = {name.split("|")[0] for name in names(first + second)}
        assert base == allowed, modes


async def test_node_events_and_interrupts_for_the_worker() -> None:
    first, second, mapper = await run_modes(["values"], subgraphs=False, node_events=True)
    [pending] = mapper.interrupts
    nodes = [(n, d["node"], d["ns"]) for n, d in first if n.startswith("node.")]
    [review_ns] = {ns[0] for _, _, ns in nodes if ns}
    assert nodes == [
        ("node.started", "agent", []),
        ("node.finished", "agent", []),
        ("node.started", "review", []),
        ("node.started", "ask", [review_ns]),
        ("node.finished", "ask", [review_ns]),
        ("node.finished", "review", []),
    ]
    started, finished = (d for n, d in first if n.startswith("node.") and d["node"] == "ask")
    assert sorted(started) == ["node", "ns", "task_id", "triggers"]  # no inputs
    assert sorted(finished) == ["interrupts", "node", "ns", "task_id"]  # no results
    assert finished["interrupts"] == [pending["id"]]
    # Seen at two levels, kept once, with the namespace it was raised in.
    assert pending == {"id": pending["id"], "ns": [review_ns], "value": QUESTION}
    assert names(first).count("values") == 3  # the server's events are still there
    assert [d["node"] for n, d in second if n == "node.finished"] == ["ask", "conclude", "review"]


async def test_every_payload_is_plain_json() -> None:
    every = ["values", "updates", "messages", "custom", "debug", "tasks", "checkpoints"]
    first, second, _ = await run_modes(every, subgraphs=True, node_events=True)
    for name, payload in first + second:
        assert json.loads(json.dumps(payload)) == payload, name


@pytest.mark.parametrize(
    ("requested", "asked"),
    [
        (["values"], ["checkpoints", "tasks", "updates", "values"]),
        ("updates", ["checkpoints", "tasks", "updates"]),
        (["messages-tuple"], ["checkpoints", "messages", "tasks", "updates"]),
        (["messages", "messages-tuple"], ["checkpoints", "messages", "tasks", "updates"]),
        (["custom", "debug"], ["checkpoints", "custom", "debug", "tasks", "updates"]),
        (["tasks", "tasks"], ["checkpoints", "tasks", "updates"]),
        ([], ["checkpoints", "tasks", "updates"]),
        (["events", "values"], ["checkpoints", "tasks", "updates", "values"]),
    ],
)  # fmt: skip
def test_modes_asked_of_langgraph(requested: list[str] | str, asked: list[str]) -> None:
    assert langgraph_modes(requested) == asked


@pytest.mark.parametrize(
    ("requested", "message"),
    [
        (["values", "value"], r"'value' is not a stream mode; use one of checkpoints, custom"),
        (["tools"], r"stream_mode 'tools' is only served on the v2 routes"),
    ],
)  # fmt: skip
def test_bad_stream_modes(requested: list[str] | str, message: str) -> None:
    with pytest.raises(InvalidRunRequestError, match=message):
        EventMapper(requested)
    with pytest.raises(InvalidRunRequestError, match=message):
        langgraph_modes(requested)


def test_stream_modes_keeps_order_and_drops_repeats() -> None:
    assert stream_modes(["updates", "values", "updates"]) == ("updates", "values")
    assert stream_modes("values") == ("values",)


def test_metadata_and_error_events() -> None:
    run_id = uuid.UUID("0194a6c1-8c1f-7000-8000-000000000001")
    assert metadata_event(run_id, 2) == ("metadata", {"run_id": str(run_id), "attempt": 2})
    assert error_event(ValueError("amount must be positive")) == (
        "error",
        {"error": "ValueError", "message": "amount must be positive"},
    )
    assert error_event(GraphRecursionError("limit 25"))[1]["message"] == "limit 25"
    # Not on the server's allow-list: the type is shown, the message is not.
    assert error_event(OSError("/secret/path")) == (
        "error",
        {"error": "OSError", "message": "An internal error occurred"},
    )


@dataclass
class Point:
    x: int


class Opaque:
    pass


def test_to_json_matches_the_server_serialiser() -> None:
    value = {
        "id": uuid.UUID("0194a6c1-8c1f-7000-8000-000000000001"),
        "tags": {"a"},
        "whole": Decimal("3"),
        "fraction": Decimal("1.50"),
        "wait": timedelta(minutes=1, seconds=30),
        "at": datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC),
        "blob": b"\x00\x01",
        "path": Path("/tmp/x"),
        "nul": "a\x00b",
        "surrogate": "bad\ud800",
        "send": Send("tools", {"order": 7}),
        "point": Point(1),
        "opaque": Opaque(),
        "message": HumanMessage("hi", id="h1"),
        7: "int key",
    }
    assert to_json(value) == {
        "id": "0194a6c1-8c1f-7000-8000-000000000001",
        "tags": ["a"],
        "whole": 3,
        "fraction": 1.5,
        "wait": 90.0,
        "at": "2025-01-02T03:04:05+00:00",
        "blob": "AAE=",
        "path": "/tmp/x",
        "nul": "a\ufffdb",
        "surrogate": "bad?",
        "send": {"node": "tools", "args": {"order": 7}},
        "point": {"x": 1},
        "opaque": None,
        "message": {
            "content": "hi",
            "additional_kwargs": {},
            "response_metadata": {},
            "type": "human",
            "name": None,
            "id": "h1",
        },
        "7": "int key",
    }
