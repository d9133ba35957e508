"""Every input and output of the step layer, as operations its protocols yield, run sync or async.

The protocols of a recorded model call (:mod:`.recorder`), a durable tool call
(:mod:`._tool_flow`), the wait for a task's checkpoint (:mod:`.parent`) and the
step-log reader (:mod:`.log`) are written once, as flows (:mod:`tether._flows`):
each yields the operations below, receives their results, and returns its
answer. :func:`run` performs them with ``await``; :func:`run_sync` performs
them in the calling thread, for sync nodes. So ``invoke`` and ``ainvoke``,
``stream`` and ``astream``, a tool's ``_run`` and ``_arun`` differ only in the
interpreter they hand the same flow to, and only this module calls the model,
the tool, the record store or the async functions of other modules.

Record-store operations are those of :mod:`tether.store.operations`, handed to
the store's public ``perform``.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import run_in_executor
from langchain_core.tools import BaseTool

from tether import _flows, _in_flight
from tether.boundaries import boundary
from tether.steps._errors import RecordRaceError, StepsError
from tether.store import RecordStore
from tether.store import operations as ops

__all__ = [
    "IN_FLIGHT",
    "Await",
    "Commit",
    "Execute",
    "Flow",
    "Invoke",
    "Op",
    "Pause",
    "RunReconcile",
    "Sleep",
    "Stream",
    "execute",
    "execute_sync",
    "run",
    "run_sync",
]

T = TypeVar("T")


@dataclass(frozen=True)
class Await:
    """An async function of a module that has no flow of its own (budgets, pins, known keys).

    ``make`` creates the coroutine: :func:`run` awaits it in the caller's task,
    :func:`run_sync` runs it on the record store's event loop and waits.
    """

    make: Callable[[], Coroutine[Any, Any, Any]]


@dataclass(frozen=True)
class Sleep:
    """Pause for ``seconds``."""

    seconds: float


@dataclass(frozen=True)
class _ModelCall:
    """The arguments of one call of a wrapped model."""

    model: Runnable[Any, Any]
    input: Any
    config: RunnableConfig | None
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Invoke(_ModelCall):
    """The wrapped model's answer: ``invoke`` or ``ainvoke``."""


@dataclass(frozen=True)
class Stream(_ModelCall):
    """The wrapped model's answer as the list of its chunks: ``stream`` or ``astream``."""


@dataclass(frozen=True)
class Execute:
    """Run a durable tool's function (or the tool it wraps) with ``inputs``.

    ``func`` is a sync function, ``coroutine`` an async one; without either,
    ``inner`` (a LangChain tool) runs. A sync interpreter cannot await
    ``coroutine`` and runs ``inner`` instead, as LangChain does.
    """

    func: Callable[..., Any] | None
    coroutine: Callable[..., Any] | None
    inner: BaseTool
    inputs: dict[str, Any]
    config: RunnableConfig


@dataclass(frozen=True)
class RunReconcile:
    """Call a durable tool's ``reconcile(args, key)`` hook (sync or async)."""

    hook: Callable[[dict[str, Any], str], Any]
    args: dict[str, Any]
    key: str
    tool: str


@dataclass(frozen=True)
class Pause:
    """Ask a person: call ``ask`` (which may ``interrupt()`` the run) in the node's own context.

    Both interpreters call it in the caller's thread or task, where LangGraph's
    ``interrupt()`` finds the running node.
    """

    ask: Callable[[], Any]


@dataclass(frozen=True)
class Commit:
    """Write a step's record and its step-log entry; answers the step's index.

    The index is ``None`` when another worker recorded the step first. With
    ``deferrable`` the async interpreter may leave the write in flight
    (:mod:`tether._in_flight`, kept under ``flight``: the thread, the graph's
    namespace and the task id) and answer :data:`IN_FLIGHT` at once; the write
    then passes ``boundary`` itself when it lands, and raises
    :class:`RecordRaceError` (from the thread's next checkpoint write) if
    another worker's record was there first. Otherwise the flow passes the
    boundary, as after any write.
    """

    put: ops.PutWithStep
    boundary: str
    detail: dict[str, Any]
    flight: tuple[str, str, str]
    deferrable: bool = False


IN_FLIGHT = -1
"""What a :class:`Commit` answers when its write was left in flight."""


Op = ops.Operation | Commit | Await | Sleep | Invoke | Stream | Execute | RunReconcile | Pause
Flow = _flows.Flow[Op, T]


def execute_sync(op: Execute) -> Any:
    """Run the tool in this thread."""
    if op.func is not None:  # a plain function: no second tool run around it
        return op.func(**op.inputs)
    return op.inner.invoke(op.inputs, op.config)


async def execute(op: Execute) -> Any:
    """Run the tool, awaiting it (a sync function runs in the executor)."""
    if op.coroutine is not None:
        return await op.coroutine(**op.inputs)
    if op.func is not None:
        return await run_in_executor(op.config, op.func, **op.inputs)
    return await op.inner.ainvoke(op.inputs, op.config)


def _reconcile_sync(op: RunReconcile) -> Any:
    found = op.hook(dict(op.args), op.key)
    if inspect.isawaitable(found):
        if inspect.iscoroutine(found):
            found.close()  # never run: a sync node cannot await it
        raise StepsError(
            f"tool {op.tool!r} has an async reconcile hook; call it "
            "with ainvoke (async graphs) or make the hook sync"
        )
    return found


def _perform_sync(op: Op, store: RecordStore) -> Any:
    if isinstance(op, Commit):
        return store.sync.perform(op.put)
    if isinstance(op, ops.Operation):
        return store.sync.perform(op)
    result: Any = None
    match op:
        case Await():
            result = store.sync.call(op.make())
        case Sleep():
            time.sleep(op.seconds)
        case Invoke():
            result = op.model.invoke(op.input, op.config, **op.kwargs)
        case Stream():
            result = list(op.model.stream(op.input, op.config, **op.kwargs))
        case Execute():
            result = execute_sync(op)
        case RunReconcile():
            result = _reconcile_sync(op)
        case Pause():
            result = op.ask()
        case _:
            _flows.unknown_operation(op, "the step layer (tether.steps._io)")
    return result


async def _land(op: Commit, store: RecordStore) -> None:
    """A write left in flight: perform it, then pass its boundary."""
    index = await store.perform(op.put)
    if index is None:
        raise RecordRaceError(op.put.kind, op.put.key)
    boundary(op.boundary, {**op.detail, "step_index": index})


async def _perform(op: Op, store: RecordStore) -> Any:
    if isinstance(op, Commit):
        if not op.deferrable:
            return await store.perform(op.put)
        _in_flight.start(*op.flight, _land(op, store))
        return IN_FLIGHT
    if isinstance(op, ops.Operation):
        return await store.perform(op)
    result: Any = None
    match op:
        case Await():
            result = await op.make()
        case Sleep():
            await asyncio.sleep(op.seconds)
        case Invoke():
            result = await op.model.ainvoke(op.input, op.config, **op.kwargs)
        case Stream():
            result = [chunk async for chunk in op.model.astream(op.input, op.config, **op.kwargs)]
        case Execute():
            result = await execute(op)
        case RunReconcile():
            result = op.hook(dict(op.args), op.key)
            if inspect.isawaitable(result):
                result = await result
        case Pause():
            result = op.ask()
        case _:
            _flows.unknown_operation(op, "the step layer (tether.steps._io)")
    return result


def run_sync(flow: Flow[T], store: RecordStore) -> T:
    """Run ``flow`` to its answer, performing each operation in this thread."""
    return _flows.run_sync(flow, lambda op: _perform_sync(op, store))


async def run(flow: Flow[T], store: RecordStore, flight: tuple[str, str, str] | None = None) -> T:
    """Run ``flow`` to its answer, awaiting each operation.

    With ``flight`` (a node scope's), the task's record writes still in flight
    land first, so a node's steps keep their order and nothing follows an
    answer whose record has not landed (one that failed raises here).
    """
    if flight is not None:
        thread_id, _, task_id = flight
        await _in_flight.settle_task(thread_id, task_id)
    return await _flows.run(flow, lambda op: _perform(op, store))
