"""Every input and output of compensation, as operations its protocol yields, run sync or async.

The protocol (:mod:`._flow`) is written once, as a generator of operations
(:mod:`tether._flows`): record-store operations (:mod:`tether.store.operations`),
reading the step log, and calling a tool's ``compensate``. :func:`run` awaits
each; :func:`run_sync` performs each in the calling thread.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from langgraph.checkpoint.base import BaseCheckpointSaver

from tether import _flows
from tether.compensation.errors import CompensationError
from tether.steps import read_steps, read_steps_sync
from tether.store import operations as ops
from tether.store import store_for

__all__ = ["Flow", "Op", "ReadSteps", "Undo", "run", "run_sync"]

T = TypeVar("T")


@dataclass(frozen=True)
class ReadSteps:
    """The thread's step log (:func:`tether.steps.read_steps`), outputs decoded."""

    thread_id: str


@dataclass(frozen=True)
class Undo:
    """Call a tool's ``compensate(args, result, idempotency_key)`` (sync or async)."""

    fn: Callable[..., Any]
    args: dict[str, Any]
    result: Any
    key: str
    tool: str


Op = ops.Operation | ReadSteps | Undo
Flow = _flows.Flow[Op, T]


def _undo_sync(op: Undo) -> Any:
    found = op.fn(dict(op.args), op.result, op.key)
    if inspect.isawaitable(found):
        if inspect.iscoroutine(found):
            found.close()  # never run: sync code cannot await it
        raise CompensationError(
            f"tool {op.tool!r} has an async compensate; compensate with "
            "`await compensate(...)` or make it sync"
        )
    return found


def run_sync(flow: Flow[T], checkpointer: BaseCheckpointSaver[Any]) -> T:
    """Run ``flow`` to its answer, performing each operation in this thread."""
    store = store_for(checkpointer)

    def perform(op: Op) -> Any:
        if isinstance(op, ops.Operation):
            return store.sync.perform(op)
        match op:
            case ReadSteps():
                return read_steps_sync(checkpointer, op.thread_id)
            case Undo():
                return _undo_sync(op)
            case _:
                _flows.unknown_operation(op, "compensation (tether.compensation._io)")
        return None

    return _flows.run_sync(flow, perform)


async def run(flow: Flow[T], checkpointer: BaseCheckpointSaver[Any]) -> T:
    """Run ``flow`` to its answer, awaiting each operation."""
    store = store_for(checkpointer)

    async def perform(op: Op) -> Any:
        if isinstance(op, ops.Operation):
            return await store.perform(op)
        match op:
            case ReadSteps():
                return await read_steps(checkpointer, op.thread_id)
            case Undo():
                if inspect.iscoroutinefunction(op.fn):
                    return await op.fn(dict(op.args), op.result, op.key)
                found = await asyncio.to_thread(op.fn, dict(op.args), op.result, op.key)
                return await found if inspect.isawaitable(found) else found
            case _:
                _flows.unknown_operation(op, "compensation (tether.compensation._io)")
        return None

    return await _flows.run(flow, perform)
