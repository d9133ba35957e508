"""Protocols written once, as generators of operations, and run sync or async.

Code that sync and async callers both need (a record-store operation, a
recorded model call, a durable tool call) is written once, as a *flow*: a
generator that yields an operation (a frozen dataclass naming what to do),
receives its result, and finally returns its answer. An interpreter performs
the operations: :func:`run` awaits each one, :func:`run_sync` performs it in
the calling thread. A sync entry point and its async twin then differ only in
the interpreter they hand the same flow to; the protocol cannot drift between
them.

Each layer names its own operations and writes its own ``perform`` functions
(one awaiting, one not), each an exhaustive ``match`` over its operations that
ends in :func:`unknown_operation`, so the type checker flags an operation a
``perform`` forgets, and at run time an unknown operation is an error, never
silently treated as another one.

An exception raised while performing an operation is thrown into the flow at
the ``yield`` that asked for it, as if the flow had made the call itself: its
``try``/``except`` blocks see it exactly as they would see an inline call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, Generic, Never, NoReturn, TypeAlias, TypeVar

__all__ = ["Flow", "run", "run_sync", "unknown_operation"]

OpT = TypeVar("OpT")
T = TypeVar("T")

Flow: TypeAlias = Generator[OpT, Any, T]
"""A protocol that yields operations of type ``OpT`` and returns a ``T``."""


def unknown_operation(op: Never, where: str) -> NoReturn:
    """The last ``case`` of a ``perform``: the type checker proves it unreachable.

    Raises:
        TypeError: Always, naming the object that is not one of ``where``'s operations.
    """
    raise TypeError(
        f"{op!r} is not an operation of {where}; yield one of the operation classes {where} defines"
    )


@dataclass(frozen=True)
class _Answer(Generic[T]):
    value: T


def _advance(flow: Flow[OpT, T], result: Any, error: BaseException | None) -> OpT | _Answer[T]:
    """Hand the flow the last result (or error): its next operation, or its answer."""
    try:
        return flow.send(result) if error is None else flow.throw(error)
    except StopIteration as done:
        return _Answer(done.value)


def run_sync(flow: Flow[OpT, T], perform: Callable[[OpT], Any]) -> T:
    """Run ``flow`` to its answer, performing each operation in this thread."""
    step = _advance(flow, None, None)
    try:
        while not isinstance(step, _Answer):
            try:
                result, error = perform(step), None
            except Exception as exc:  # the flow sees it where it asked, and may catch it
                result, error = None, exc
            step = _advance(flow, result, error)
    finally:
        flow.close()  # a flow abandoned mid-way (cancelled) runs its ``finally`` blocks
    return step.value


async def run(flow: Flow[OpT, T], perform: Callable[[OpT], Awaitable[Any]]) -> T:
    """Run ``flow`` to its answer, awaiting each operation."""
    step = _advance(flow, None, None)
    try:
        while not isinstance(step, _Answer):
            try:
                result, error = await perform(step), None
            except Exception as exc:  # the flow sees it where it asked, and may catch it
                result, error = None, exc
            step = _advance(flow, result, error)
    finally:
        flow.close()  # a flow abandoned mid-way (cancelled) runs its ``finally`` blocks
    return step.value
