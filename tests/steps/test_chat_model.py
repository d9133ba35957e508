"""recorded(chat_model) is a BaseChatModel: create_agent and middleware treat it as the model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain.agents.middleware import LLMToolSelectorMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langchain_core.runnables import RunnableBinding, RunnableLambda
from langgraph.types import Command, interrupt

from tests.backends import Backend
from tests.steps.agent_child import (
    VERDICT,
    ScriptedStructuredModel,
    Verdict,
    lookup_order,
    read_modes,
    read_pids,
    structured_agent,
)
from tests.steps.conftest import ROOT
from tests.steps.graphs import State, one_node
from tests.steps.scripted import CountingScriptedModel, count_calls, reply
from tether import open_checkpointer, open_checkpointer_sync
from tether.steps import RecordedChatModel, RecordedModel, read_steps, recorded

CONFIG: Any = {"configurable": {"thread_id": "t1"}}


def test_a_recorded_chat_model_is_a_chat_model_that_looks_like_the_wrapped_one(
    tmp_path: Path,
) -> None:
    inner = ScriptedStructuredModel(
        model_name="gpt-4o-mini",
        calls_file=str(tmp_path / "calls"),
        profile={"max_input_tokens": 9},
        custom_get_token_ids=lambda text: [len(word) for word in text.split()],
    )
    model = recorded(inner, model_id="m1")
    assert isinstance(model, BaseChatModel)
    assert isinstance(model, RecordedChatModel)
    assert model.wrapped is inner
    assert model.recorder.model_id == "m1"
    assert recorded(model) is model
    # What langchain reads to pick strategies, trace and count tokens is the wrapped model's.
    assert model.model_name == "gpt-4o-mini"
    assert model.profile == {"max_input_tokens": 9}
    assert model._llm_type == "scripted-structured"
    assert model._identifying_params == {"model_name": "gpt-4o-mini"}
    assert model._get_ls_params() == inner._get_ls_params()
    assert model.get_num_tokens("a bb ccc") == 3
    assert model.get_token_ids("a bb ccc") == [1, 2, 3]
    assert repr(model) == f"recorded({inner!r})"


def test_a_runnable_that_is_not_a_chat_model_stays_a_recorded_runnable() -> None:
    model = recorded(RunnableLambda(lambda text: text.upper()))
    assert isinstance(model, RecordedModel)
    assert not isinstance(model, BaseChatModel)
    assert model.invoke("ok") == "OK"


STRATEGY_MODELS: dict[str, dict[str, Any]] = {
    # profile says so: ProviderStrategy
    "profile": {"profile": {"structured_output": True}},
    # no profile, but a model name langchain knows: ProviderStrategy
    "name": {"model_name": "gpt-4o"},
    # neither: ToolStrategy
    "plain": {},
}


@pytest.mark.parametrize("kind", STRATEGY_MODELS)
async def test_create_agent_picks_the_same_structured_output_strategy(
    kind: str, tmp_path: Path
) -> None:
    modes: dict[str, list[str]] = {}
    for variant in ("bare", "recorded"):
        calls = tmp_path / f"{variant}.calls"
        inner = ScriptedStructuredModel(calls_file=str(calls), **STRATEGY_MODELS[kind])
        model: BaseChatModel = recorded(inner) if variant == "recorded" else inner
        async with open_checkpointer("memory://") as saver:
            result = await structured_agent(model, saver).ainvoke(
                {"messages": [HumanMessage("refund A1?")]}, CONFIG
            )
            steps = await read_steps(saver, "t1")
        assert result["structured_response"] == VERDICT
        modes[variant] = read_modes(calls)
        if variant == "recorded":
            assert [s.kind for s in steps if s.kind == "model"] == ["model", "model"]
    assert modes["recorded"] == modes["bare"]
    assert modes["bare"] == (["tool", "tool"] if kind == "plain" else ["provider", "provider"])


async def test_middleware_that_takes_a_model_records_its_calls(tmp_path: Path) -> None:
    choice = {"name": "ToolSelectionResponse", "args": {"tools": ["lookup_order"]}}
    selector = recorded(
        CountingScriptedModel(replies=[reply("", [choice])], calls_file=str(tmp_path / "sel")),
        model_id="selector",
    )
    model = recorded(ScriptedStructuredModel(calls_file=str(tmp_path / "calls")))
    middleware = [LLMToolSelectorMiddleware(model=selector, max_tools=1)]
    async with open_checkpointer("memory://") as saver:
        agent = structured_agent(model, saver, middleware)
        result = await agent.ainvoke({"messages": [HumanMessage("refund A1?")]}, CONFIG)
        steps = await read_steps(saver, "t1")
    assert result["structured_response"] == VERDICT
    # One selection per model turn, each a recorded step of its own.
    assert count_calls(tmp_path / "sel") == 2
    assert [s.model_id for s in steps if s.kind == "model"].count("selector") == 2


async def test_bind_tools_and_structured_output_record_and_replay(
    backend: Backend, tmp_path: Path
) -> None:
    calls = tmp_path / "calls"
    model = recorded(
        CountingScriptedModel(
            replies=[reply("", [{"name": "Verdict", "args": VERDICT.model_dump()}])],
            calls_file=str(calls),
        )
    )
    bound = model.bind_tools([lookup_order], tool_choice="any")
    judge = model.with_structured_output(Verdict)
    assert isinstance(bound, RunnableBinding)
    assert bound.bound is model
    assert bound.kwargs["tool_choice"] == "any"
    seen: list[Any] = []

    async def node(state: State) -> dict[str, Any]:
        answer = await bound.ainvoke(state["messages"])
        verdict = await judge.ainvoke(state["messages"])
        seen.append((answer.tool_calls[0]["args"], verdict))
        interrupt("ok?")
        return {"messages": [answer]}

    async with backend.open() as saver:
        graph = one_node(node, saver)
        await graph.ainvoke({"messages": [HumanMessage("hi")]}, CONFIG)
        await graph.ainvoke(Command(resume="yes"), CONFIG)
        steps = await read_steps(saver, "t1")
    assert seen == [(VERDICT.model_dump(), VERDICT)] * 2
    assert count_calls(calls) == 2  # one per recorded call, none on the replay
    assert [s.output for s in steps if s.kind == "model"][1] == VERDICT


def test_stream_replays_a_recorded_answer_as_chunks(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    model = recorded(CountingScriptedModel(replies=[reply("one two three")], calls_file=str(calls)))
    streamed: list[list[AIMessageChunk]] = []

    def node(state: State) -> dict[str, Any]:
        chunks = list(model.stream(state["messages"], stop=["never"]))
        streamed.append(chunks)
        interrupt("ok?")
        total = chunks[0]
        for chunk in chunks[1:]:
            total = total + chunk
        return {"messages": [AIMessage(str(total.content))]}

    with open_checkpointer_sync("memory://") as saver:
        graph = one_node(node, saver)
        graph.invoke({"messages": [HumanMessage("hi")]}, CONFIG)
        result = graph.invoke(Command(resume="yes"), CONFIG)
    first, replayed = streamed
    assert len(first) > 1
    assert "".join(str(c.content) for c in first) == "one two three"
    assert [c.content for c in replayed] == ["one two three"]
    assert all(isinstance(c, AIMessageChunk) for c in replayed)
    assert result["messages"][-1].content == "one two three"
    assert count_calls(calls) == 1


def test_tokens_stream_live_to_messages_mode_while_the_node_waits_for_the_record(
    tmp_path: Path,
) -> None:
    # stream() inside a node yields the answer once it is recorded; the wrapped
    # model's callbacks still hand each token to stream_mode="messages" as it comes.
    calls = tmp_path / "calls"
    model = recorded(CountingScriptedModel(replies=[reply("one two three")], calls_file=str(calls)))
    received: list[list[str]] = []

    def node(state: State) -> dict[str, Any]:
        chunks = list(model.stream(state["messages"]))
        received.append([str(c.content) for c in chunks])
        total = chunks[0]
        for chunk in chunks[1:]:
            total = total + chunk
        return {"messages": [AIMessage(str(total.content))]}

    with open_checkpointer_sync("memory://") as saver:
        events = one_node(node, saver).stream(
            {"messages": [HumanMessage("hi")]}, CONFIG, stream_mode="messages"
        )
        tokens = [str(message.content) for message, _ in events]
    assert tokens[:3] == ["one ", "two ", "three"]
    (chunks,) = received  # the node received the live chunks too, once recorded
    assert chunks[:3] == ["one ", "two ", "three"]
    assert "".join(chunks) == "one two three"
    assert count_calls(calls) == 1


@pytest.mark.slow
def test_a_kill_after_the_answer_is_recorded_resumes_the_agent_without_asking_again(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    def run(crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_CRASH")}
        if crash_at:
            env["TETHER_CRASH_AT"] = crash_at
        env["PYTHONPATH"] = str(ROOT)
        args = [sqlite_backend.url, json.dumps(sqlite_backend.options), "t1", str(tmp_path)]
        return subprocess.run(
            [sys.executable, "-m", "tests.steps.agent_child", *args],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    crashed = run(crash_at="model.after:1")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-3000:]
    assert read_modes(tmp_path / "model_calls") == ["provider"]

    resumed = run()
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert json.loads(resumed.stdout.strip().splitlines()[-1]) == {"verdict": VERDICT.model_dump()}
    # The first answer was replayed: the resumed process asked only for the verdict.
    assert read_modes(tmp_path / "model_calls") == ["provider", "provider"]
    first, second = read_pids(tmp_path / "model_calls")
    assert first != second
