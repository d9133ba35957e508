"""Record writes left in flight: an async node under ``durability="sync"`` does not wait for
its record, and nothing that carries the answer is saved before the record lands.

The write is started when the recorded call returns and settled by the
task's pending writes and the thread's next checkpoint (``aput_writes`` and
``aput`` of tether's PostgreSQL and Redis savers) and by the task's next
recorded call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.types import Command, interrupt

from tests.backends import Backend, fresh_backend
from tests.steps.graphs import State, one_node
from tests.steps.scripted import CountingScriptedModel, count_calls, reply
from tests.steps.test_concurrent_recording import LOSER, WINNER, Race, _node
from tether import _in_flight, open_checkpointer_sync
from tether.checkpointing.encryption import KeyRing
from tether.steps import RecordRaceError, read_steps, read_steps_sync, recorded

CONFIG: Any = {"configurable": {"thread_id": "t1"}}


@pytest.fixture(params=["postgres", "redis"])
def server_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """The backends whose savers settle record writes in flight (see the module docstring)."""
    with fresh_backend(request.param, request.getfixturevalue("servers"), tmp_path) as b:
        yield b


def _in_flight_for(thread: str) -> int:
    """How many record writes of ``thread`` are in flight or failed and not yet raised."""
    tasks = _in_flight._threads.get(thread, {})
    return sum(len(w.flying) + len(w.failed) for w in tasks.values())


def _one_call(tmp_path: Path) -> tuple[Any, list[int]]:
    """An async node with one recorded call; ``seen`` gets the writes in flight after it."""
    model = recorded(CountingScriptedModel(replies=[reply("one")], calls_file=str(tmp_path / "c")))
    seen: list[int] = []

    async def node(state: State) -> dict[str, Any]:
        answer = await model.ainvoke(state["messages"])
        seen.append(_in_flight_for("t1"))
        return {"messages": [answer]}

    return node, seen


@pytest.mark.parametrize("encrypted", [False, True], ids=["clear", "encrypted"])
async def test_an_async_node_returns_before_its_records_land_and_the_run_waits_for_them(
    server_backend: Backend, tmp_path: Path, encrypted: bool
) -> None:
    calls = tmp_path / "calls"
    model = recorded(
        CountingScriptedModel(replies=[reply("one"), reply("two")], calls_file=str(calls))
    )
    seen: list[int] = []

    async def node(state: State) -> dict[str, Any]:
        first = await model.ainvoke(state["messages"])
        seen.append(_in_flight_for("t1"))  # left in flight: the node did not wait
        second = await model.ainvoke([*state["messages"], first])
        seen.append(_in_flight_for("t1"))  # the first landed before the second call
        return {"messages": [first, second]}

    options = {"encryption": KeyRing.from_spec(KeyRing.generate_spec("k1"))} if encrypted else {}
    async with server_backend.open(**options) as saver:
        graph = one_node(node, saver)
        out = await graph.ainvoke({"messages": [HumanMessage("hi")]}, CONFIG, durability="sync")
        steps = await read_steps(saver, "t1")
        assert seen == [1, 1]
        assert _in_flight_for("t1") == 0  # the checkpoint writes settled them
        assert [m.content for m in out["messages"][1:]] == ["one", "two"]
        assert [(s.kind, s.output.content) for s in steps] == [("model", "one"), ("model", "two")]
    assert count_calls(calls) == 2


def test_a_sync_node_waits_for_its_record(durable_backend: Backend, tmp_path: Path) -> None:
    model = recorded(CountingScriptedModel(replies=[reply("one")], calls_file=str(tmp_path / "c")))
    seen: list[int] = []

    def node(state: State) -> dict[str, Any]:
        answer = model.invoke(state["messages"])
        seen.append(_in_flight_for("t1"))
        return {"messages": [answer]}

    with open_checkpointer_sync(durable_backend.url, **durable_backend.options) as saver:
        one_node(node, saver).invoke({"messages": [HumanMessage("hi")]}, CONFIG, durability="sync")
        steps = read_steps_sync(saver, "t1")
    assert seen == [0]
    assert [s.output.content for s in steps] == ["one"]


@pytest.mark.parametrize("encrypted", [False, True], ids=["clear", "encrypted"])
@pytest.mark.parametrize("name", ["memory", "sqlite"])
async def test_a_saver_that_does_not_settle_writes_gets_records_written_first(
    tmp_path: Path, encrypted: bool, name: str
) -> None:
    """Memory and SQLite savers (plain, or under encryption) never have writes in flight.

    (On SQLite the record would share the connection's one thread with
    LangGraph's own writes: in flight, it saved nothing and cost time.)
    """
    node, seen = _one_call(tmp_path)

    options = {"encryption": KeyRing.from_spec(KeyRing.generate_spec("k1"))} if encrypted else {}
    with fresh_backend(name, {}, tmp_path) as backend:
        async with backend.open(**options) as saver:
            graph = one_node(node, saver)
            await graph.ainvoke({"messages": [HumanMessage("hi")]}, CONFIG, durability="sync")
            steps = await read_steps(saver, "t1")
    assert seen == [0]
    assert [s.output.content for s in steps] == ["one"]


async def test_other_durability_modes_wait_for_the_record(
    durable_backend: Backend, tmp_path: Path
) -> None:
    node, seen = _one_call(tmp_path)

    async with durable_backend.open() as saver:
        await one_node(node, saver).ainvoke(
            {"messages": [HumanMessage("hi")]}, CONFIG, durability="async"
        )
    assert seen == [0]


async def test_a_worker_that_loses_the_race_saves_nothing_of_its_answer(
    server_backend: Backend, tmp_path: Path
) -> None:
    """Two processes run the same node; the later record write fails, and with it the run.

    The loser's node received its own answer (the write was in flight), so the
    loser's writes must not be saved: its next checkpoint write raises
    :class:`RecordRaceError` and the thread keeps the winner's answer.
    """
    race = Race(tmp_path)
    async with server_backend.open() as winner_saver, server_backend.open() as loser_saver:
        winner = one_node(_node("ainvoke", race.model("winner"), race.seen), winner_saver)
        loser = one_node(_node("ainvoke", race.model("loser"), race.seen), loser_saver)
        await winner.ainvoke({"messages": [HumanMessage("hi")]}, CONFIG)  # paused at "go?"
        losing = asyncio.create_task(loser.ainvoke(Command(resume="go"), CONFIG, durability="sync"))
        assert await asyncio.to_thread(race.loser_paused.wait, 60)
        await winner.ainvoke(Command(resume="go"), CONFIG, durability="sync")
        race.winner_recorded.set()
        with pytest.raises(RecordRaceError, match="recorded by another worker"):
            await losing
        state = await loser.aget_state(CONFIG)
        steps = await read_steps(winner_saver, "t1")
    assert race.seen == [WINNER, LOSER]
    assert isinstance(state.values["messages"][-1], AIMessage)
    assert state.values["messages"][-1].content == WINNER
    assert [s.output.content for s in steps if s.kind == "model"] == [WINNER]
    assert _in_flight_for("t1") == 0


async def test_a_node_that_catches_the_failure_still_saves_nothing(
    server_backend: Backend, tmp_path: Path
) -> None:
    """The failure is raised again by every write that could carry the answer on."""
    race = Race(tmp_path)
    caught: list[str] = []

    def node(model: Any, other: Any) -> Any:
        async def anode(state: State) -> dict[str, Any]:
            interrupt("go?")
            text = str((await model.ainvoke(state["messages"])).content)
            try:  # the next recorded call waits for the first: its failure surfaces here
                await other.ainvoke([*state["messages"], AIMessage(text)])
            except RecordRaceError as exc:
                caught.append(exc.kind)
            race.seen.append(text)
            return {"messages": [AIMessage(text)]}

        return anode

    def other(who: str) -> Any:
        calls = str(tmp_path / f"{who}-other.calls")
        return recorded(CountingScriptedModel(replies=[reply("more")], calls_file=calls))

    async with server_backend.open() as winner_saver, server_backend.open() as loser_saver:
        winner = one_node(node(race.model("winner"), other("winner")), winner_saver)
        loser = one_node(node(race.model("loser"), other("loser")), loser_saver)
        await winner.ainvoke({"messages": [HumanMessage("hi")]}, CONFIG)  # paused at "go?"
        losing = asyncio.create_task(loser.ainvoke(Command(resume="go"), CONFIG, durability="sync"))
        assert await asyncio.to_thread(race.loser_paused.wait, 60)
        await winner.ainvoke(Command(resume="go"), CONFIG, durability="sync")
        race.winner_recorded.set()
        with pytest.raises(RecordRaceError):
            await losing
        state = await loser.aget_state(CONFIG)
        steps = await read_steps(winner_saver, "t1")
    assert caught == ["model"]
    assert race.seen == [WINNER, LOSER]
    assert state.values["messages"][-1].content == WINNER
    assert [s.output.content for s in steps if s.kind == "model"] == [WINNER, "more"]
    assert _in_flight_for("t1") == 0
