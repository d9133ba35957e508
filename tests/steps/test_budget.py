"""Run budgets: pause for an extension, stop with the partial result, no fresh budget."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from tests.backends import Backend
from tests.steps.graphs import State
from tests.steps.scripted import CountingScriptedModel, count_calls, reply
from tether.steps import Budget, BudgetExceededError, read_steps, recorded, with_budget

CONFIG: Any = {"configurable": {"thread_id": "t1"}}
TURNS = 4  # the agent answers four times; each answer costs 10 tokens


def looping_agent(tmp_path: Path, saver: Any, budget: Budget) -> Any:
    model = recorded(
        CountingScriptedModel(
            replies=[reply(f"turn {i}") for i in range(TURNS)], calls_file=str(tmp_path / "calls")
        )
    )

    async def agent(state: State) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    def more(state: State) -> str:
        return "agent" if sum(m.type == "ai" for m in state["messages"]) < TURNS else END

    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", more, ["agent", END])
    return with_budget(builder.compile(checkpointer=saver), budget)


def test_budget_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="needs max_tokens, max_cost_usd or both"):
        Budget()
    with pytest.raises(ValueError, match="max_tokens must be a positive number"):
        Budget(max_tokens=0)
    with pytest.raises(ValueError, match="on_exceed must be 'pause' or 'stop'"):
        Budget(max_tokens=5, on_exceed="ignore")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs a tether Budget"):
        with_budget(object(), {"max_tokens": 5})  # type: ignore[arg-type]


async def test_pause_asks_a_person_and_resumes_with_the_new_limit(
    backend: Backend, tmp_path: Path
) -> None:
    async with backend.open() as saver:
        graph = looping_agent(tmp_path, saver, Budget(max_tokens=15))
        paused = await graph.ainvoke({"messages": [HumanMessage("go")]}, CONFIG)
        request = paused["__interrupt__"][0].value
        assert request["tether"] == "budget"
        assert request["spent"]["tokens"] == 20
        assert request["limits"]["max_tokens"] == 15
        refused = await graph.ainvoke(Command(resume="more please"), CONFIG)
        again = refused["__interrupt__"][0].value
        assert "resume a budget pause with a dict of new limits" in again["problem"]
        done = await graph.ainvoke(Command(resume={"max_tokens": 100}), CONFIG)
        steps = await read_steps(saver, "t1")
    assert [m.content for m in done["messages"] if m.type == "ai"] == [
        f"turn {i}" for i in range(TURNS)
    ]
    assert count_calls(tmp_path / "calls") == TURNS
    assert [(s.kind, s.name) for s in steps] == [
        ("model", "CountingScriptedModel"),
        ("model", "CountingScriptedModel"),
        ("budget", "exceeded"),
        ("budget", "extended"),
        ("model", "CountingScriptedModel"),
        ("model", "CountingScriptedModel"),
    ]
    assert steps[3].detail["limits"]["max_tokens"] == 100


async def test_stop_ends_the_run_with_its_partial_result(backend: Backend, tmp_path: Path) -> None:
    async with backend.open() as saver:
        graph = looping_agent(tmp_path, saver, Budget(max_tokens=15, on_exceed="stop"))
        with pytest.raises(BudgetExceededError, match="partial result") as info:
            await graph.ainvoke({"messages": [HumanMessage("go")]}, CONFIG)
        state = await graph.aget_state(CONFIG)
        steps = await read_steps(saver, "t1")
    assert info.value.spent["tokens"] == 20
    assert [m.content for m in state.values["messages"] if m.type == "ai"] == ["turn 0", "turn 1"]
    assert [s.kind for s in steps] == ["model", "model", "budget"]
    assert count_calls(tmp_path / "calls") == 2


async def test_a_resume_does_not_get_a_fresh_budget(
    durable_backend: Backend, tmp_path: Path
) -> None:
    budget = Budget(max_tokens=15)
    async with durable_backend.open() as saver:
        graph = looping_agent(tmp_path, saver, budget)
        await graph.ainvoke({"messages": [HumanMessage("go")]}, CONFIG)
    # A new connection and graph (as on another worker) read the spend back.
    async with durable_backend.open() as saver:
        graph = looping_agent(tmp_path, saver, Budget(max_tokens=1000))
        paused = await graph.ainvoke(Command(resume={"max_tokens": 25}), CONFIG)
    request = paused["__interrupt__"][0].value
    assert request["spent"]["tokens"] == 30  # 20 before the pause, 10 after it
    assert request["limits"]["max_tokens"] == 25  # the code's new Budget did not reset it
    assert count_calls(tmp_path / "calls") == 3


async def test_forks_naming_the_same_root_share_one_budget(
    backend: Backend, tmp_path: Path
) -> None:
    async with backend.open() as saver:
        graph = looping_agent(tmp_path, saver, Budget(max_tokens=25, on_exceed="stop"))
        root: Any = {"configurable": {"thread_id": "main", "tether_root_thread_id": "main"}}
        fork: Any = {"configurable": {"thread_id": "fork", "tether_root_thread_id": "main"}}
        with pytest.raises(BudgetExceededError):
            await graph.ainvoke({"messages": [HumanMessage("go")]}, root)
        # The fork starts over, but on the run's budget, which is already spent.
        with pytest.raises(BudgetExceededError) as info:
            await graph.ainvoke({"messages": [HumanMessage("go")]}, fork)
    assert info.value.spent["tokens"] == 30
    assert count_calls(tmp_path / "calls") == 3


async def test_a_fresh_store_never_inherits_a_freed_stores_budget(tmp_path: Path) -> None:
    """Each new database starts its thread's budget at zero, even when the old store's
    object was freed and a new one took its address (``id()`` reuse)."""
    from tether.checkpointing import open_checkpointer

    for i in range(12):
        place = tmp_path / f"db{i}"
        place.mkdir()
        async with open_checkpointer(f"sqlite:///{place}/t.db") as saver:
            graph = looping_agent(place, saver, Budget(max_tokens=15, on_exceed="stop"))
            with pytest.raises(BudgetExceededError) as info:
                await graph.ainvoke({"messages": [HumanMessage("go")]}, CONFIG)
        assert info.value.spent["tokens"] == 20, f"database {i}"
        assert count_calls(place / "calls") == 2, f"database {i}"
        del saver, graph, info
        gc.collect()
