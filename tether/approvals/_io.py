"""Every input and output of approvals, as operations a protocol yields, run sync or async.

The protocols (asking in :mod:`._flow`, deciding in :mod:`._decide`, the expiry
sweep in :mod:`._expiry`, reading back in :mod:`._storage`) are written once, as
generators: each yields an operation below, receives its result, and returns
its answer. :func:`run` performs the operations with ``await``;
:func:`run_sync` performs them in the calling thread, for sync nodes and sync
callers. So a sync entry point and its async twin differ only in the runner
they hand the same generator to, and nothing but this module touches the
record store, the graph or the caller's readers.

An exception raised while performing an operation is thrown into the generator
at the ``yield`` that asked for it, as if the generator had made the call
itself: its ``try``/``except`` blocks see it exactly as they would see an
inline call.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, assert_never

from langchain_core.runnables import RunnableConfig
from langgraph.pregel import Pregel
from langgraph.types import Command, interrupt

from tether.approvals.errors import ApprovalConfigError
from tether.runtime import aunfinished, unfinished
from tether.store import RecordStore

__all__ = [
    "AppendStep",
    "Call",
    "Flow",
    "GetState",
    "Graph",
    "Insert",
    "Interrupt",
    "List",
    "Op",
    "Read",
    "Resume",
    "Unfinished",
    "Upsert",
    "run",
    "run_sync",
]

T = TypeVar("T")
Graph = Pregel[Any, Any, Any, Any]


# -- the record store ----------------------------------------------------------------------
@dataclass(frozen=True)
class Read:
    """The record under ``(kind, key)``: a :class:`tether.store.Record` or ``None``."""

    kind: str
    key: str


@dataclass(frozen=True)
class List:
    """Every record of ``kind`` (of one thread, if given), oldest first."""

    kind: str
    thread_id: str | None = None


@dataclass(frozen=True)
class Insert:
    """Put-if-absent: ``True`` if this stored ``value``, ``False`` if a record was there."""

    kind: str
    key: str
    value: dict[str, Any]
    thread_id: str


@dataclass(frozen=True)
class Upsert:
    """Store ``value`` under ``(kind, key)``, replacing any earlier value."""

    kind: str
    key: str
    value: dict[str, Any]
    thread_id: str


@dataclass(frozen=True)
class AppendStep:
    """Append ``step`` (an audit document) to the thread's step log."""

    thread_id: str
    step: dict[str, Any]


# -- the caller's code and the graph -------------------------------------------------------
@dataclass(frozen=True)
class Call:
    """Call a reader the caller gave (observations, a version); async ones only under ``run``."""

    fn: Callable[[], Any]
    what: str


@dataclass(frozen=True)
class Interrupt:
    """LangGraph's ``interrupt(payload)``: pauses the run, or returns the resume value."""

    payload: dict[str, Any]


@dataclass(frozen=True)
class GetState:
    """The graph's :class:`~langgraph.types.StateSnapshot` for the thread."""

    graph: Graph
    thread_id: str


@dataclass(frozen=True)
class Unfinished:
    """Whether the thread's run has work left (:func:`tether.runtime.unfinished`)."""

    graph: Graph
    thread_id: str


@dataclass(frozen=True)
class Resume:
    """Run the thread's graph with ``command`` (``None``: just run it again)."""

    graph: Graph
    thread_id: str
    command: Command[Any] | None


Op = Read | List | Insert | Upsert | AppendStep | Call | Interrupt | GetState | Unfinished | Resume
Flow = Generator[Op, Any, T]


def _config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def _call_sync(fn: Callable[[], Any], what: str) -> Any:
    value = fn()
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()
        raise ApprovalConfigError(f"{what} is async; use arequest_approval in an async node")
    return value


def _perform_sync(op: Op, store: RecordStore) -> Any:
    result: Any = None
    match op:
        case Read():
            result = store.sync.get(op.kind, op.key)
        case List():
            result = store.sync.list(op.kind, thread_id=op.thread_id)
        case Insert():
            result = store.sync.insert(op.kind, op.key, op.value, thread_id=op.thread_id)
        case Upsert():
            store.sync.upsert(op.kind, op.key, op.value, thread_id=op.thread_id)
        case AppendStep():
            store.sync.append_step(op.thread_id, op.step)
        case Call():
            result = _call_sync(op.fn, op.what)
        case Interrupt():
            result = interrupt(op.payload)
        case GetState():
            result = op.graph.get_state(_config(op.thread_id))
        case Unfinished():
            result = unfinished(op.graph, _config(op.thread_id))
        case Resume():
            op.graph.invoke(op.command, _config(op.thread_id))
        case _:
            assert_never(op)
    return result


async def _perform(op: Op, store: RecordStore) -> Any:
    result: Any = None
    match op:
        case Read():
            result = await store.get(op.kind, op.key)
        case List():
            result = await store.list(op.kind, thread_id=op.thread_id)
        case Insert():
            result = await store.insert(op.kind, op.key, op.value, thread_id=op.thread_id)
        case Upsert():
            await store.upsert(op.kind, op.key, op.value, thread_id=op.thread_id)
        case AppendStep():
            await store.append_step(op.thread_id, op.step)
        case Call():
            result = op.fn()
            if inspect.isawaitable(result):
                result = await result
        case Interrupt():
            result = interrupt(op.payload)
        case GetState():
            result = await op.graph.aget_state(_config(op.thread_id))
        case Unfinished():
            result = await aunfinished(op.graph, _config(op.thread_id))
        case Resume():
            await op.graph.ainvoke(op.command, _config(op.thread_id))
        case _:
            assert_never(op)
    return result


@dataclass(frozen=True)
class _Answer(Generic[T]):
    value: T


def _advance(flow: Flow[T], result: Any, error: Exception | None) -> Op | _Answer[T]:
    """Hand the protocol the last result (or error): its next operation, or its answer."""
    try:
        return flow.send(result) if error is None else flow.throw(error)
    except StopIteration as done:
        return _Answer(done.value)


def run_sync(flow: Flow[T], store: RecordStore) -> T:
    """Run ``flow`` to its answer, performing each operation in this thread."""
    step = _advance(flow, None, None)
    while not isinstance(step, _Answer):
        try:
            result, error = _perform_sync(step, store), None
        except Exception as exc:  # the protocol sees it where it asked, and may catch it
            result, error = None, exc
        step = _advance(flow, result, error)
    return step.value


async def run(flow: Flow[T], store: RecordStore) -> T:
    """Run ``flow`` to its answer, awaiting each operation."""
    step = _advance(flow, None, None)
    while not isinstance(step, _Answer):
        try:
            result, error = await _perform(step, store), None
        except Exception as exc:  # the protocol sees it where it asked, and may catch it
            result, error = None, exc
        step = _advance(flow, result, error)
    return step.value
