"""Every input and output of approvals, as operations a protocol yields, run sync or async.

The protocols (asking in :mod:`._flow`, deciding in :mod:`._decide`, the expiry
sweep in :mod:`._expiry`, cancelling in :mod:`._cancel`, resuming a graph in
:mod:`._resuming`, reading back in :mod:`._storage`) are written once, as
generators: each yields an operation below, receives its result, and returns
its answer. :func:`run` performs the operations with ``await``;
:func:`run_sync` performs them in the calling thread, for sync nodes and sync
callers. So a sync entry point and its async twin differ only in the runner
they hand the same generator to, and nothing but this module touches the
record store, the graph, the caller's readers or the caller's resumer.

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

from tether._progress import aunfinished, unfinished
from tether.approvals.errors import ApprovalConfigError
from tether.store import RecordStore

__all__ = [
    "AppendStep",
    "Call",
    "Flow",
    "GetState",
    "Graph",
    "Insert",
    "Interrupt",
    "IsPending",
    "List",
    "Op",
    "Read",
    "Resume",
    "ResumeWith",
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


# -- the caller's resumer (tether.approvals.Resumer, or its sync twin) ---------------------
@dataclass(frozen=True)
class IsPending:
    """``resumer.is_pending(request)``: whether the run waits on this request."""

    resumer: Any
    request: Any


@dataclass(frozen=True)
class ResumeWith:
    """``resumer.resume(request, doc)``: continue the run with the stored decision."""

    resumer: Any
    request: Any
    doc: dict[str, Any]


Op = (
    Read
    | List
    | Insert
    | Upsert
    | AppendStep
    | Call
    | Interrupt
    | GetState
    | Unfinished
    | Resume
    | IsPending
    | ResumeWith
)
Flow = Generator[Op, Any, T]


def _config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def _call_sync(
    fn: Callable[[], Any], what: str, fix: str = "use arequest_approval in an async node"
) -> Any:
    value = fn()
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()
        raise ApprovalConfigError(f"{what} is async; {fix}")
    return value


def _resumer_call_sync(op: IsPending | ResumeWith) -> Any:
    name = type(op.resumer).__name__
    fix = "the sync functions take a resumer with sync methods; await the async twin instead"
    if isinstance(op, IsPending):
        return _call_sync(lambda: op.resumer.is_pending(op.request), f"{name}.is_pending", fix)
    return _call_sync(lambda: op.resumer.resume(op.request, op.doc), f"{name}.resume", fix)


async def _resumer_call(op: IsPending | ResumeWith) -> Any:
    if isinstance(op, IsPending):
        result = op.resumer.is_pending(op.request)
    else:
        result = op.resumer.resume(op.request, op.doc)
    return (await result) if inspect.isawaitable(result) else result


def _records(store: RecordStore | None) -> RecordStore:
    if store is None:  # a flow run without a store asked for a record: a bug in the flow
        raise RuntimeError("this approvals flow was run without a record store")
    return store


RecordOp = Read | List | Insert | Upsert | AppendStep
_RECORD_OPS = (Read, List, Insert, Upsert, AppendStep)


def _record_sync(op: RecordOp, store: RecordStore) -> Any:
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
        case _:
            assert_never(op)
    return result


async def _record(op: RecordOp, store: RecordStore) -> Any:
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
        case _:
            assert_never(op)
    return result


def _perform_sync(op: Op, store: RecordStore | None) -> Any:
    if isinstance(op, _RECORD_OPS):
        return _record_sync(op, _records(store))
    result: Any = None
    match op:
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
        case IsPending() | ResumeWith():
            result = _resumer_call_sync(op)
        case _:
            assert_never(op)
    return result


async def _perform(op: Op, store: RecordStore | None) -> Any:
    if isinstance(op, _RECORD_OPS):
        return await _record(op, _records(store))
    result: Any = None
    match op:
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
        case IsPending() | ResumeWith():
            result = await _resumer_call(op)
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


def run_sync(flow: Flow[T], store: RecordStore | None) -> T:
    """Run ``flow`` to its answer, performing each operation in this thread.

    ``store`` may be ``None`` for a flow that reads and writes no records (one
    that only drives the graph).
    """
    step = _advance(flow, None, None)
    while not isinstance(step, _Answer):
        try:
            result, error = _perform_sync(step, store), None
        except Exception as exc:  # the protocol sees it where it asked, and may catch it
            result, error = None, exc
        step = _advance(flow, result, error)
    return step.value


async def run(flow: Flow[T], store: RecordStore | None) -> T:
    """Run ``flow`` to its answer, awaiting each operation (``store`` as for :func:`run_sync`)."""
    step = _advance(flow, None, None)
    while not isinstance(step, _Answer):
        try:
            result, error = await _perform(step, store), None
        except Exception as exc:  # the protocol sees it where it asked, and may catch it
            result, error = None, exc
        step = _advance(flow, result, error)
    return step.value
