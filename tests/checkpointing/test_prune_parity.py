"""``prune(strategy="keep_latest")`` keeps and deletes the same things on every backend.

The rules are LangGraph's ``AsyncPostgresSaver.aprune`` ones; see
:mod:`tether.checkpointing._prune`. Each test runs real graphs where LangGraph
can produce the case, and writes checkpoints directly only for the pre-v4
format, which current LangGraph no longer writes.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Annotated, Any, TypedDict
from uuid import uuid4

import pytest
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.constants import TASKS
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, Send, interrupt

from tests.backends import Backend
from tests.raw_storage import raw_dump

Saver = BaseCheckpointSaver[Any]


def config(thread_id: str, ns: str | None = None, checkpoint_id: str | None = None) -> Any:
    conf: dict[str, Any] = {"thread_id": thread_id}
    if ns is not None:
        conf["checkpoint_ns"] = ns
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


async def stored(saver: Saver, thread_id: str) -> dict[tuple[str, str], str | None]:
    """Every checkpoint of the thread, all namespaces: (ns, id) -> parent id."""
    out: dict[tuple[str, str], str | None] = {}
    async for t in saver.alist(config(thread_id)):
        conf = t.config["configurable"]
        parent = t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None
        out[(conf["checkpoint_ns"], conf["checkpoint_id"])] = parent
    return out


async def mentions(backend: Backend, saver: Saver, thread_id: str, marker: str) -> bool:
    """Whether any raw row or key of the thread holds ``marker`` (as text or hex bytes)."""
    needles = (marker, marker.encode().hex())
    return any(
        any(n in line for n in needles)
        for line in await raw_dump(backend, saver)
        if thread_id in line
    )


# -- graphs ---------------------------------------------------------------------------------


class Notes(TypedDict, total=False):
    notes: Annotated[list[str], operator.add]
    doc: list[str]


def write_doc(state: Notes) -> Notes:
    n = len(state.get("notes", []))
    return {"notes": [f"note-{n}"], "doc": [f"doc-marker-{n}-{'x' * 40}"]}


def notes_graph(saver: Saver) -> CompiledStateGraph[Any, Any, Any, Any]:
    graph = StateGraph(Notes)
    graph.add_node("first", write_doc)
    graph.add_node("second", write_doc)
    graph.add_edge(START, "first")
    graph.add_edge("first", "second")
    graph.add_edge("second", END)
    return graph.compile(checkpointer=saver)


def _extend(state: list[str], batches: Sequence[list[str]]) -> list[str]:
    out = list(state or [])
    for batch in batches:
        out.extend(batch)
    return out


class DeltaState(TypedDict, total=False):
    log: Annotated[list[str], DeltaChannel(_extend)]


def delta_graph(saver: Saver) -> CompiledStateGraph[Any, Any, Any, Any]:
    graph = StateGraph(DeltaState)
    graph.add_node("step", lambda s: {"log": [f"entry-{len(s.get('log', []))}"]})
    graph.add_edge(START, "step")
    graph.add_edge("step", END)
    return graph.compile(checkpointer=saver)


class Outer(TypedDict, total=False):
    answer: str


def ask(state: Outer) -> Outer:
    return {"answer": str(interrupt("answer?"))}


def call_graph(saver: Saver) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A root graph whose node calls a subgraph that pauses for an answer."""
    sub = StateGraph(Outer)
    sub.add_node("ask", ask)
    sub.add_edge(START, "ask")
    sub.add_edge("ask", END)
    graph = StateGraph(Outer)
    graph.add_node("sub", sub.compile())
    graph.add_edge(START, "sub")
    graph.add_edge("sub", END)
    return graph.compile(checkpointer=saver)


# -- rules ----------------------------------------------------------------------------------


async def test_keep_latest_keeps_one_checkpoint_and_clears_its_parent(backend: Backend) -> None:
    tid = f"notes-{uuid4()}"
    async with backend.open() as saver:
        graph = notes_graph(saver)
        await graph.ainvoke({"notes": []}, config(tid))
        await graph.ainvoke({"notes": []}, config(tid))
        before = await stored(saver, tid)
        head = (await graph.aget_state(config(tid))).config["configurable"]["checkpoint_id"]
        assert len(before) > 2
        assert before[("", head)] is not None

        await saver.aprune([tid], strategy="keep_latest")

        assert await stored(saver, tid) == {("", head): None}
        state = await graph.aget_state(config(tid))
        assert state.values["notes"] == ["note-0", "note-1", "note-2", "note-3"]
        assert state.parent_config is None
        for (_, gone), _parent in before.items():
            if gone != head:
                assert await saver.aget_tuple(config(tid, "", gone)) is None
        # The thread goes on from its kept head.
        final = await graph.ainvoke({"notes": []}, config(tid))
        assert final["notes"][-1] == "note-5"


async def test_keep_latest_frees_blobs_and_writes_of_deleted_checkpoints(
    backend: Backend,
) -> None:
    tid, other = f"blobs-{uuid4()}", f"other-{uuid4()}"
    async with backend.open() as saver:
        graph = notes_graph(saver)
        await graph.ainvoke({"notes": []}, config(tid))
        await graph.ainvoke({"notes": []}, config(other))
        assert await mentions(backend, saver, tid, "doc-marker-0")
        assert await mentions(backend, saver, other, "doc-marker-0")

        await saver.aprune([tid])

        assert not await mentions(backend, saver, tid, "doc-marker-0")  # freed
        assert await mentions(backend, saver, other, "doc-marker-0")
        assert (await graph.aget_state(config(tid))).values["doc"][0].startswith("doc-marker-1")
        # Another thread is untouched.
        assert len(await stored(saver, other)) > 1
        assert (await graph.aget_state(config(other))).values["notes"] == ["note-0", "note-1"]


async def test_keep_latest_refuses_a_delta_channel_thread_before_deleting(
    backend: Backend,
) -> None:
    plain, delta = f"plain-{uuid4()}", f"delta-{uuid4()}"
    async with backend.open() as saver:
        await notes_graph(saver).ainvoke({"notes": []}, config(plain))
        graph = delta_graph(saver)
        await graph.ainvoke({"log": []}, config(delta))
        await graph.ainvoke({"log": []}, config(delta))
        plain_before, delta_before = await stored(saver, plain), await stored(saver, delta)

        with pytest.raises(NotImplementedError, match=delta):
            await saver.aprune([plain, delta], strategy="keep_latest")

        assert await stored(saver, plain) == plain_before  # nothing pruned
        assert await stored(saver, delta) == delta_before
        assert (await graph.aget_state(config(delta))).values["log"] == ["entry-0", "entry-1"]
        await saver.aprune([delta], strategy="delete")
        assert await stored(saver, delta) == {}


async def test_a_subgraph_call_goes_with_its_root_checkpoint(backend: Backend) -> None:
    tid = f"calls-{uuid4()}"
    async with backend.open() as saver:
        graph = call_graph(saver)
        await graph.ainvoke({"answer": ""}, config(tid))
        first = await graph.ainvoke(Command(resume="first"), config(tid))
        assert first["answer"] == "first"
        await graph.ainvoke({"answer": ""}, config(tid))  # second call, paused inside
        calls = sorted({ns for ns, _ in await stored(saver, tid) if ns})
        assert len(calls) == 2
        assert all(ns.startswith("sub:") for ns in calls)
        live = (await graph.aget_state(config(tid), subgraphs=True)).tasks[0].state
        live_ns = live.config["configurable"]["checkpoint_ns"]  # type: ignore[union-attr]

        await saver.aprune([tid])

        after = await stored(saver, tid)
        assert sorted({ns for ns, _ in after}) == ["", live_ns]
        assert sum(1 for ns, _ in after if ns == live_ns) == 1
        (done,) = [ns for ns in calls if ns != live_ns]
        assert await saver.aget_tuple(config(tid, done)) is None
        final = await graph.ainvoke(Command(resume="second"), config(tid))
        assert final["answer"] == "second"


async def _put(saver: Saver, tid: str, parent: Any | None, v: int, step: int) -> Any:
    checkpoint = empty_checkpoint()
    checkpoint["v"] = v
    conf = parent if parent is not None else config(tid, "")
    return await saver.aput(conf, checkpoint, {"source": "loop", "step": step, "parents": {}}, {})


@pytest.mark.parametrize("v", [3, 4])
async def test_a_pre_v4_head_keeps_the_parent_holding_its_sends(backend: Backend, v: int) -> None:
    tid = f"sends-{uuid4()}"
    async with backend.open() as saver:
        first = await _put(saver, tid, None, v, 0)
        second = await _put(saver, tid, first, v, 1)
        await saver.aput_writes(second, [(TASKS, Send("node", {"x": 1}))], "task-send")
        head = await _put(saver, tid, second, v, 2)
        ids = [c["configurable"]["checkpoint_id"] for c in (first, second, head)]

        await saver.aprune([tid])

        if v < 4:  # the head reads its pending sends from its parent: both stay
            assert await stored(saver, tid) == {("", ids[2]): ids[1], ("", ids[1]): None}
            kept = await saver.aget_tuple(config(tid, "", ids[1]))
            assert kept is not None
            assert [w[1] for w in kept.pending_writes or []] == [TASKS]
        else:
            assert await stored(saver, tid) == {("", ids[2]): None}


async def test_prune_arguments_are_checked_the_same_everywhere(backend: Backend) -> None:
    tid = f"args-{uuid4()}"
    async with backend.open() as saver:
        await notes_graph(saver).ainvoke({"notes": []}, config(tid))
        count = len(await stored(saver, tid))
        with pytest.raises(TypeError, match="not a"):
            await saver.aprune(tid)
        with pytest.raises(ValueError, match="newest"):
            await saver.aprune([tid], strategy="newest")
        await saver.aprune([])
        assert len(await stored(saver, tid)) == count


async def test_writes_of_a_checkpoint_not_saved_yet_survive(backend: Backend) -> None:
    """A run saves a step's writes before its checkpoint; pruning in between keeps them."""
    tid = f"pending-{uuid4()}"
    async with backend.open() as saver:
        first = await _put(saver, tid, None, 4, 0)
        head = await _put(saver, tid, first, 4, 1)
        upcoming = empty_checkpoint()
        await saver.aput_writes(
            config(tid, "", upcoming["id"]), [("notes", ["early"])], "task-early"
        )

        await saver.aprune([tid])

        saved = await saver.aput(head, upcoming, {"source": "loop", "step": 2, "parents": {}}, {})
        loaded = await saver.aget_tuple(saved)
        assert loaded is not None
        assert [(w[1], w[2]) for w in loaded.pending_writes or []] == [("notes", ["early"])]
