"""What a worker lends the layers below it while it runs one run, and how they stop.

The runtime (``tether.runtime``) executes a claimed run inside
``with guarding(guard):``. The layers below it (the recording layer, durable
tools, the savers and the record store) must not import the runtime, so they
reach the worker through this module only:

* :class:`RunGuard`: the worker's side of one run (its fence, its tenant, an
  in-memory :meth:`~RunGuard.check` at each boundary, buffered
  :meth:`~RunGuard.note` events, a one-round-trip :meth:`~RunGuard.verify`);
* :func:`current_guard` and :func:`guarding`: the guard travels in one
  ``ContextVar``, so it reaches asyncio tasks (they copy the context), sync
  nodes (LangGraph runs them in executors with a copied context) and the record
  store's sync calls (``run_coroutine_threadsafe`` copies the calling thread's
  context);
* :func:`boundary`: called where a crash point was (before and after a model
  call or a tool effect). It asks the guard, notes the detail, then reaches the
  crash point of the same name, so ``tether crashtest`` sees the same
  boundaries in the same order. Without a guard it is only the crash point;
* :func:`note`: a run event with no crash point (a replayed model call or tool).

How a run stops on purpose is the :class:`RunStopped` family. It derives from
LangGraph's ``GraphBubbleUp``, which LangGraph re-raises without retrying
(``pregel/_retry.py``: ``except GraphBubbleUp: raise``) and for which the
runner writes no ``ERROR`` to the task's pending writes (``pregel/_runner.py``
``commit``), so a stopped run leaves no error behind for its next holder.
:class:`StepTimeoutError` is the exception: an ordinary error, so the graph's
``RetryPolicy`` decides what a slow step means.

This module imports nothing from tether above :mod:`tether.errors` and the
crash-point hook.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal, NamedTuple, Protocol, runtime_checkable

from langgraph.errors import GraphBubbleUp

from tether._crashpoints import crash_point
from tether.errors import TetherError

__all__ = [
    "CancelAction",
    "Fence",
    "LeaseLostError",
    "RunCancelledError",
    "RunGuard",
    "RunHandedBackError",
    "RunStopped",
    "RunTimedOutError",
    "StepTimeoutError",
    "boundary",
    "current_guard",
    "guarding",
    "note",
]

CancelAction = Literal["interrupt", "rollback"]
_CANCEL_ACTIONS = ("interrupt", "rollback")


class Fence(NamedTuple):
    """The claim a worker holds on a run: valid while the run row carries ``token``.

    ``secret`` is the claim's lease secret when the run store minted one (a
    run-scoped worker role, see :mod:`tether.runtime.worker_role`); ``""`` otherwise.
    It is left out of the ``repr``.
    """

    run_id: str
    thread_id: str
    token: int
    secret: str = ""

    def __repr__(self) -> str:
        hidden = ", secret=<hidden>" if self.secret else ""
        return (
            f"Fence(run_id={self.run_id!r}, thread_id={self.thread_id!r}, "
            f"token={self.token!r}{hidden})"
        )


@runtime_checkable
class RunGuard(Protocol):
    """What a worker lends the layers below it while it executes one run.

    Attributes:
        fence: The run, its thread and the fence token of this claim.
        tenant: The tenant the run belongs to (``""``: none).
        same_database: The run store and the checkpointer share one database,
            so writes check the fence inside their own transaction.
    """

    fence: Fence
    tenant: str
    same_database: bool

    def check(self, boundary: str) -> None:
        """In memory, no I/O: raise a :class:`RunStopped` (or
        :class:`StepTimeoutError`) if the run must not pass ``boundary``."""
        ...

    def note(self, kind: str, detail: Mapping[str, Any]) -> None:
        """Buffer a run event of ``kind``."""
        ...

    async def verify(self) -> None:
        """One round trip: raise :class:`LeaseLostError` if the claim is gone."""
        ...


_MEMBERS = ("fence", "tenant", "same_database", "check", "note", "verify")
_GUARD: ContextVar[RunGuard | None] = ContextVar("tether_run_guard", default=None)


def current_guard() -> RunGuard | None:
    """The guard of the run executing in this context, if a worker runs one."""
    return _GUARD.get()


@contextmanager
def guarding(guard: RunGuard) -> Iterator[None]:
    """Run the block (and every task and node it starts) under ``guard``.

    Raises:
        TypeError: ``guard`` lacks a member of :class:`RunGuard`.
    """
    missing = [name for name in _MEMBERS if not hasattr(guard, name)]
    if missing:
        raise TypeError(
            f"guarding() needs a RunGuard; {type(guard).__name__} has no "
            f"{', '.join(missing)} (see tether.boundaries.RunGuard)"
        )
    token = _GUARD.set(guard)
    try:
        yield
    finally:
        _GUARD.reset(token)


def boundary(name: str, detail: Mapping[str, Any] | None = None) -> None:
    """Mark a boundary a run may only pass while its worker still holds it.

    The guard (if any) checks first, so a stopped run raises before the effect
    that follows; then ``detail`` becomes a run event of kind ``name``; then the
    crash point ``name`` is reached, exactly as before guards existed.

    Args:
        name: The boundary, e.g. ``"tool.before"``; the crash point's name too.
        detail: What to record about it, or ``None`` for no event.

    Raises:
        RunStopped: The guard stopped the run (cancelled, timed out, lease lost,
            handed back).
        StepTimeoutError: The current step ran longer than its timeout.
    """
    guard = _GUARD.get()
    if guard is not None:
        guard.check(name)
        if detail is not None:
            guard.note(name, detail)
    crash_point(name)


def note(kind: str, detail: Mapping[str, Any]) -> None:
    """Record a run event (e.g. ``"model.replayed"``) if a worker runs this; no crash point."""
    guard = _GUARD.get()
    if guard is not None:
        guard.note(kind, detail)


# -- stopping a run on purpose -------------------------------------------------------------
class RunStopped(GraphBubbleUp):
    """A worker stopped this run on purpose.

    LangGraph neither retries it nor writes an error for the task
    (``langgraph/pregel/_retry.py``, ``_runner.py`` ``commit``); the worker
    decides what the run's status becomes.
    """

    default = "the worker stopped this run"

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.default)


class LeaseLostError(RunStopped):
    """The worker no longer holds the run: its lease expired or another worker took it over."""

    default = (
        "this worker lost its claim on the run (lease expired or taken over); "
        "it stops without writing, and the new holder continues the run"
    )


class RunCancelledError(RunStopped):
    """Someone cancelled the run (``Runtime.cancel``).

    Attributes:
        action: ``"interrupt"`` keeps what the run did so far; ``"rollback"``
            deletes it.
        reason: Why, as the canceller said.
    """

    def __init__(self, action: CancelAction, reason: str | None = None) -> None:
        if action not in _CANCEL_ACTIONS:
            raise ValueError(f"cancel action must be 'interrupt' or 'rollback', got {action!r}")
        self.action: CancelAction = action
        self.reason = reason
        why = f": {reason}" if reason else ""
        super().__init__(f"run cancelled ({action}){why}")

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.action, self.reason)


class RunTimedOutError(RunStopped):
    """The run passed its deadline."""

    default = "the run passed its deadline"


class RunHandedBackError(RunStopped):
    """The worker hands the run back (shutting down, or its lease in doubt); another continues."""

    default = (
        "this worker hands the run back (shutting down, or its lease in doubt); "
        "another worker continues it from its last checkpoint"
    )


class StepTimeoutError(TetherError):
    """A step ran longer than its step timeout.

    An ordinary exception, unlike :class:`RunStopped`: the graph's
    ``RetryPolicy`` decides whether the step is tried again, and LangGraph
    records the error in the task's writes.

    Attributes:
        seconds: The step timeout that was exceeded.
        boundary: Where the step was stopped (``"model.before"``, ``"tool.before"``).
    """

    def __init__(self, seconds: float, boundary: str) -> None:
        self.seconds = seconds
        self.boundary = boundary
        super().__init__(
            f"the step ran longer than its step timeout of {seconds:g} s and was stopped at "
            f"{boundary!r}, before the call; raise step_timeout, or make the node async so "
            "LangGraph can time it out itself"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.seconds, self.boundary)
