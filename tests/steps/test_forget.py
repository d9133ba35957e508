"""forget_thread: a worker taking over a thread reads the records, not its stale caches.

Two checkpointer instances on one real database stand for two workers: each has
its own record store, so each process-level cache entry belongs to one of them,
exactly as it would in two processes. Worker A starts a thread, worker B runs it
further, then A continues it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph._internal._constants import (
    CONFIG_KEY_CHECKPOINTER,
    CONFIG_KEY_TASK_ID,
    CONFIG_KEY_THREAD_ID,
)
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from tests.backends import Backend, fresh_backend
from tests.steps.graphs import State, ask_then_pause
from tests.steps.scripted import CountingScriptedModel, count_calls, reply
from tether import open_checkpointer
from tether.steps import (
    Budget,
    BudgetExceededError,
    VersionMismatchError,
    forget_thread,
    pin_versions,
    recorded,
    with_budget,
)
from tether.steps import _budget as budgets
from tether.steps import _known as known
from tether.steps import _versions as versions
from tether.steps._scope import BUDGET_KEY, PINS_KEY, node_scope
from tether.steps._versions import VersionPins

LIMIT = 1024


@pytest.fixture(params=["sqlite", "postgres"])
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """One real database that both workers open."""
    name: str = request.param
    urls = request.getfixturevalue("servers") if name == "postgres" else {}
    with fresh_backend(name, urls, tmp_path) as b:
        yield b


def _config(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


def asks(saver: Any, model: Any, n: int = 2) -> Any:
    """ask1 -> ... -> ask<n>, each a recorded model call followed by a pause for a person."""
    builder = StateGraph(State)
    names = [f"ask{i}" for i in range(1, n + 1)]
    for name in names:
        builder.add_node(name, ask_then_pause(model))
    for before, after in zip([START, *names], [*names, END], strict=True):
        builder.add_edge(before, after)
    return builder.compile(checkpointer=saver)


def counting_model(tmp_path: Path) -> tuple[Any, Path]:
    """A recorded model answering "answer <turn>" (10 tokens a call), and its call log."""
    calls = tmp_path / "model.calls"
    model = recorded(
        CountingScriptedModel(
            replies=[reply(f"answer {i}") for i in range(3)], calls_file=str(calls)
        )
    )
    return model, calls


async def _hand_over(first: Any, second: Any, thread_id: str) -> None:
    """Worker A starts the thread (ask1 asks the model); B runs on to ask2's pause."""
    await first.ainvoke({"messages": [HumanMessage("go")]}, _config(thread_id))
    await second.ainvoke(Command(resume="ok"), _config(thread_id))


# -- the known record keys -----------------------------------------------------------------
@pytest.mark.parametrize("forget", [True, False], ids=["forgotten", "stale"])
async def test_a_step_another_worker_recorded_is_replayed_after_forget(
    shared: Backend, tmp_path: Path, forget: bool
) -> None:
    model, calls = counting_model(tmp_path)
    async with shared.open() as saver_a, shared.open() as saver_b:
        a, b = asks(saver_a, model), asks(saver_b, model)
        await _hand_over(a, b, "t1")
        assert count_calls(calls) == 2  # ask1 by A, ask2 by B
        if forget:
            forget_thread(saver_a, "t1")
        state = await a.ainvoke(Command(resume="ok"), _config("t1"))
    assert [m.content for m in state["messages"]] == ["go", "answer 0", "answer 1"]
    # Forgotten, A replays B's ask2; stale, its key set hides B's record and it asks
    # the model again (then loses to the stored answer): the cost forget_thread avoids.
    assert count_calls(calls) == (2 if forget else 3)


# -- the budget ledger ---------------------------------------------------------------------
async def test_a_worker_sees_the_spend_of_another_after_forget(
    shared: Backend, tmp_path: Path
) -> None:
    model, calls = counting_model(tmp_path)
    budget = Budget(max_tokens=15, on_exceed="stop")
    async with shared.open() as saver_a, shared.open() as saver_b:
        a = with_budget(asks(saver_a, model, 3), budget)
        b = with_budget(asks(saver_b, model, 3), budget)
        await _hand_over(a, b, "t1")  # A's ledger: 10 tokens; the records: 20
        forget_thread(saver_a, "t1")
        with pytest.raises(BudgetExceededError):
            await a.ainvoke(Command(resume="ok"), _config("t1"))
    assert count_calls(calls) == 2  # ask3 was refused before it asked the model


# -- the version pins ----------------------------------------------------------------------
async def test_a_worker_sees_the_versions_another_migrated_to_after_forget(
    shared: Backend, tmp_path: Path
) -> None:
    model, _ = counting_model(tmp_path)
    async with shared.open() as saver_a, shared.open() as saver_b:
        a = pin_versions(asks(saver_a, model), model_id="m1")
        b = pin_versions(asks(saver_b, model), policy="migrate", model_id="m2")
        await _hand_over(a, b, "t1")  # B migrated the thread's pins to m2
        forget_thread(saver_a, "t1")
        with pytest.raises(VersionMismatchError, match="model_id: 'm2' -> 'm1'"):
            await a.ainvoke(Command(resume="ok"), _config("t1"))


# -- what forget_thread drops, and the bounds ----------------------------------------------
def _entries(thread_id: str) -> dict[str, int]:
    return {
        "known": sum(slot[1] == thread_id for slot in known._keys),
        "ledgers": sum(key[1] == thread_id for key in budgets._ledgers),
        "checked": sum(marker[1] == thread_id for marker in versions._checked),
    }


def one_ask(saver: Any, model: Any) -> Any:
    builder = StateGraph(State)

    async def think(state: State) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder.add_node("think", think)
    builder.add_edge(START, "think")
    builder.add_edge("think", END)
    graph = builder.compile(checkpointer=saver)
    return pin_versions(with_budget(graph, Budget(max_tokens=10**9)), model_id="m")


async def test_forget_drops_one_thread_under_every_store(tmp_path: Path) -> None:
    model, _ = counting_model(tmp_path)
    t1, t2 = f"drop-{uuid.uuid4().hex}", f"keep-{uuid.uuid4().hex}"
    url = f"sqlite:///{tmp_path / 'f.db'}"
    async with open_checkpointer(url) as saver_a, open_checkpointer(url) as saver_b:
        for saver, thread_id in ((saver_a, t1), (saver_b, t1), (saver_a, t2)):
            await one_ask(saver, model).ainvoke(
                {"messages": [HumanMessage("go")]}, _config(thread_id)
            )
        assert _entries(t1) == {"known": 2, "ledgers": 2, "checked": 2}
        forget_thread(saver_b, t1)  # through B's layer; A's entries go too
        assert _entries(t1) == {"known": 0, "ledgers": 0, "checked": 0}
        assert _entries(t2) == {"known": 1, "ledgers": 1, "checked": 1}


async def test_the_caches_stay_bounded() -> None:
    # Each thread's first recorded step fills all three caches; this is that step's
    # cache work, without the rest of a graph run, for 2,000 threads.
    prefix = f"bound-{uuid.uuid4().hex}"
    pins = VersionPins("pinned", "fingerprint", model_id="m")
    async with open_checkpointer("memory://") as saver:
        for i in range(2000):
            scope = node_scope(
                {
                    "configurable": {
                        CONFIG_KEY_CHECKPOINTER: saver,
                        CONFIG_KEY_TASK_ID: "task",
                        CONFIG_KEY_THREAD_ID: f"{prefix}-{i}",
                        BUDGET_KEY: Budget(max_tokens=100),
                        PINS_KEY: pins,
                    }
                }
            )
            assert scope is not None
            assert not await known.known(scope.store, scope.thread_id, "model", "k")
            assert await budgets.ledger_for(scope) is not None
            assert await versions.ensure_pins(scope) is pins
    assert (len(known._keys), len(budgets._ledgers), len(versions._checked)) == (LIMIT,) * 3
    # The most recent threads are the ones kept.
    assert _entries(f"{prefix}-1999") == {"known": 1, "ledgers": 1, "checked": 1}
    assert _entries(f"{prefix}-0") == {"known": 0, "ledgers": 0, "checked": 0}


def test_forget_refuses_swapped_or_missing_arguments(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="needs a checkpointer first, got str"):
        forget_thread("t1", "t1")  # type: ignore[arg-type]
    from langgraph.checkpoint.memory import InMemorySaver

    with pytest.raises(TypeError, match="thread id as a non-empty str, got None"):
        forget_thread(InMemorySaver(), None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="got ''"):
        forget_thread(InMemorySaver(), "")
