"""Every backend gives back what it was given, as PostgresSaver does.

Objects come back as the same objects (not serialized dicts; an exception as
its repr, which is all LangGraph's serializer keeps), pending writes
come back in LangGraph's order whatever order they were saved in, interrupts
keep every field, and a checkpoint's metadata holds the config's extra keys.
"""

from __future__ import annotations

import datetime
import enum
import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.graph import END, START, StateGraph
from langgraph.types import Interrupt
from pydantic import BaseModel

from tests.backends import Backend
from tests.checkpointing.encryption_helpers import ring

# LangGraph's channel names for a task's error and interrupts (importing its
# constants for them is deprecated).
ERROR, INTERRUPT = "__error__", "__interrupt__"


class Address(BaseModel):
    street: str
    number: int


class Customer(BaseModel):
    name: str
    address: Address
    tags: list[str]


@dataclass
class Order:
    id: int
    total: Decimal
    customer: Customer


class Status(enum.Enum):
    OPEN = "open"
    PAID = "paid"


class Refused(Exception):
    """A domain error a node raises."""


VALUES: dict[str, Any] = {
    "customer": Customer(name="Ada", address=Address(street="Main", number=1), tags=["vip"]),
    "order": Order(
        7, Decimal("12.50"), Customer(name="Bo", address=Address(street="Side", number=2), tags=[])
    ),
    "status": Status.PAID,
    "when": datetime.datetime(2026, 11, 3, 12, 30, tzinfo=datetime.UTC),
    "ref": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "labels": {"a", "b"},
    "text": "plain",
    "count": 3,
}


def _config(thread_id: str, **extra: Any) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", **extra}}


async def _save(saver: BaseCheckpointSaver[Any], thread_id: str) -> RunnableConfig:
    checkpoint = empty_checkpoint()
    versions = {ch: saver.get_next_version(None, None) for ch in VALUES}  # type: ignore[arg-type]
    checkpoint["channel_values"] = dict(VALUES)
    checkpoint["channel_versions"] = dict(versions)
    return await saver.aput(_config(thread_id), checkpoint, {"source": "loop", "step": 1}, versions)


def _same(got: Any, want: Any) -> None:
    assert type(got) is type(want), (type(got), type(want))
    assert got == want


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
async def test_state_values_come_back_as_the_same_objects(
    backend: Backend, encrypted: bool
) -> None:
    options = {"encryption": ring("k1")} if encrypted else {}
    async with backend.open(**options) as saver:
        stored = await _save(saver, "t1")
        got = await saver.aget_tuple(stored)
        assert got is not None
        for channel, want in VALUES.items():
            _same(got.checkpoint["channel_values"][channel], want)
        [listed] = [t async for t in saver.alist(_config("t1"))]
        assert listed.checkpoint["channel_values"] == VALUES


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
async def test_pending_writes_come_back_as_objects_with_every_field(
    backend: Backend, encrypted: bool
) -> None:
    options = {"encryption": ring("k1")} if encrypted else {}
    schema = {"type": "object", "properties": {"approved": {"type": "boolean"}}}
    interrupt = Interrupt(value={"question": "ship?"}, id="int-1", response_schema=schema)
    async with backend.open(**options) as saver:
        stored = await _save(saver, "t1")
        await saver.aput_writes(stored, [(ERROR, Refused("card declined", 402))], "task-err")
        await saver.aput_writes(
            stored, [("customer", VALUES["customer"]), ("order", VALUES["order"])], "task-ok"
        )
        await saver.aput_writes(stored, [(INTERRUPT, [interrupt])], "task-ask")
        got = await saver.aget_tuple(stored)
        assert got is not None
        writes = {(task, channel): value for task, channel, value in got.pending_writes or []}
        # LangGraph's serializer keeps an exception as its repr (it never rebuilds one).
        assert writes[("task-err", ERROR)] == "Refused('card declined', 402)"
        _same(writes[("task-ok", "customer")], VALUES["customer"])
        _same(writes[("task-ok", "order")], VALUES["order"])
        [asked] = writes[("task-ask", INTERRUPT)]
        assert type(asked) is Interrupt
        assert (asked.value, asked.id, asked.response_schema) == (
            {"question": "ship?"},
            "int-1",
            schema,
        )


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
async def test_pending_writes_come_back_in_langgraphs_order(
    backend: Backend, encrypted: bool
) -> None:
    # Live execution applies a step's writes by (task path, task id, index);
    # a saver that returns them otherwise rebuilds order-sensitive values wrongly.
    options = {"encryption": ring("k1")} if encrypted else {}
    async with backend.open(**options) as saver:
        stored = await _save(saver, "t1")
        saved = [
            ("task-b", "~0", [("log", "b0"), ("log", "b1")]),
            ("task-a", "~1", [("log", "a0")]),
            ("task-c", "~0", [("log", "c0"), ("log", "c1"), ("log", "c2")]),
            ("task-0", "~2", [("log", "z0")]),
        ]
        for task_id, path, writes in saved:
            await saver.aput_writes(stored, writes, task_id, path)
        got = await saver.aget_tuple(stored)
        assert got is not None
        assert [w[2] for w in got.pending_writes or []] == [
            "b0",
            "b1",
            "c0",
            "c1",
            "c2",
            "a0",
            "z0",
        ]
        [listed] = [t async for t in saver.alist(_config("t1"))]
        assert listed.pending_writes == got.pending_writes


async def test_metadata_holds_the_configs_extra_keys(backend: Backend) -> None:
    async with backend.open() as saver:
        config = _config("t1", user_id="u-42", attempt=2, __internal="hidden")
        config["metadata"] = {"tenant": "acme"}
        checkpoint = empty_checkpoint()
        stored = await saver.aput(config, checkpoint, {"source": "input", "step": -1}, {})
        got = await saver.aget_tuple(stored)
        assert got is not None
        assert got.metadata["user_id"] == "u-42"
        assert got.metadata["attempt"] == 2
        assert got.metadata["tenant"] == "acme"
        assert "__internal" not in got.metadata
        [listed] = [t async for t in saver.alist(_config("t1"), filter={"user_id": "u-42"})]
        assert listed.metadata == got.metadata


class Shop(TypedDict, total=False):
    customer: Customer
    order: Order


def _shop_graph(saver: BaseCheckpointSaver[Any], fail: dict[str, bool]) -> Any:
    def enrich(state: Shop) -> Shop:
        customer = state["customer"].model_copy(update={"tags": ["checked"]})
        return {"customer": customer}

    def charge(state: Shop) -> Shop:
        if fail["charge"]:
            raise Refused("card declined", 402)
        return {"order": Order(1, Decimal("9.99"), state["customer"])}

    graph = StateGraph(Shop)
    graph.add_node("enrich", enrich)
    graph.add_node("charge", charge)
    graph.add_edge(START, "enrich")
    graph.add_edge("enrich", "charge")
    graph.add_edge("charge", END)
    return graph.compile(checkpointer=saver)


async def test_a_failed_run_resumes_with_its_objects(backend: Backend) -> None:
    fail = {"charge": True}
    config: Any = {"configurable": {"thread_id": "shop-1"}}
    async with backend.open() as saver:
        graph = _shop_graph(saver, fail)
        with pytest.raises(Refused):
            await graph.ainvoke({"customer": VALUES["customer"]}, config)
        state = await graph.aget_state(config)
        assert state.next == ("charge",)
        _same(state.values["customer"], VALUES["customer"].model_copy(update={"tags": ["checked"]}))
        [task] = state.tasks
        assert task.error == "Refused('card declined', 402)"

        fail["charge"] = False
        done = await graph.ainvoke(None, config)
        assert type(done["order"]) is Order
        assert type(done["order"].customer) is Customer
        assert done["order"].customer.tags == ["checked"]


async def test_a_checkpoint_comes_back_with_exactly_its_keys(backend: Backend) -> None:
    # LangGraph's own checkpoints (format v4) have no "pending_sends" key.
    async with backend.open() as saver:
        checkpoint: Any = {k: v for k, v in empty_checkpoint().items() if k != "pending_sends"}
        checkpoint["v"] = 4
        checkpoint["channel_values"] = {"text": "plain"}
        checkpoint["channel_versions"] = {"text": saver.get_next_version(None, None)}  # type: ignore[arg-type]
        stored = await saver.aput(
            _config("t1"), checkpoint, {"step": 0}, checkpoint["channel_versions"]
        )
        got = await saver.aget_tuple(stored)
        assert got is not None
        assert got.checkpoint == checkpoint


@pytest.mark.parametrize("backend", ["postgres", "redis"], indirect=True)
async def test_sends_of_a_pre_v4_checkpoint_become_its_tasks_channel(backend: Backend) -> None:
    # Before format v4 a checkpoint's pending sends were its parent's TASKS writes
    # on these two backends; PostgresSaver hands them over as the tasks channel.
    # (The memory and SQLite savers kept them in the checkpoint's "pending_sends".)
    from langgraph.constants import TASKS
    from langgraph.types import Send

    async with backend.open() as saver:
        parent: Any = empty_checkpoint()
        parent["v"] = 3
        stored_parent = await saver.aput(_config("t1"), parent, {"step": 0}, {})
        sends = [Send("node", {"n": 2}), Send("node", {"n": 1})]
        await saver.aput_writes(stored_parent, [(TASKS, sends[1])], "task-b", "~1")
        await saver.aput_writes(stored_parent, [(TASKS, sends[0])], "task-a", "~0")
        child: Any = empty_checkpoint()
        child["v"] = 3
        child["channel_values"] = {"text": "plain"}
        child["channel_versions"] = {"text": saver.get_next_version(None, None)}  # type: ignore[arg-type]
        stored = await saver.aput(stored_parent, child, {"step": 1}, child["channel_versions"])
        got = await saver.aget_tuple(stored)
        assert got is not None
        assert got.checkpoint["channel_values"][TASKS] == sends
        assert TASKS in got.checkpoint["channel_versions"]
