"""Who continues a run once its decision is stored: a :class:`Resumer`.

Deciding checks a decision, stores it once (put-if-absent) and audits it; what
happens to the paused run then is the resumer's business:

* :class:`GraphResumer` (``graph=``, the default): runs the compiled graph in
  the deciding process with ``Command(resume={interrupt_id: decision})``, the
  interrupt found in the graph's state by the approval id it carries;
* a runtime's resumer: enqueues the run, so a worker resumes it.

A resumer answers two questions: whether the run still waits on a request
(:meth:`Resumer.is_pending`, asked before anything is written), and how to
continue it with the stored decision (:meth:`Resumer.resume`). The async entry
points take a :class:`Resumer`; their sync twins a :class:`SyncResumer`. A
:class:`GraphResumer` serves both: its steps are operations of :mod:`._io`, run
by whichever runner the entry point uses.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from langgraph.types import Command, StateSnapshot

from tether.approvals._checks import check_graph
from tether.approvals._io import (
    Flow,
    GetState,
    Graph,
    IsPending,
    Resume,
    ResumeWith,
    Unfinished,
    run,
    run_sync,
)
from tether.approvals._storage import PAYLOAD_TYPE, ApprovalRequest
from tether.approvals.errors import ApprovalConfigError, ApprovalNotPendingError

__all__ = [
    "DecisionResult",
    "GraphResumer",
    "Resumer",
    "SyncResumer",
    "choose_resumer",
    "interrupt_id",
    "not_pending",
    "pending",
    "resumed",
    "state_result",
]


@dataclass(frozen=True)
class DecisionResult:
    """What a decision did.

    Attributes:
        approval_id: The decided request.
        decision: The stored decision document (also the resume value).
        pending: The approval requests the thread waits on after resuming
            (e.g. a fresh request after a stale approval, or parallel ones).
        finished: Whether the run has nothing left to do.
        values: The graph state after resuming.
    """

    approval_id: str
    decision: dict[str, Any]
    pending: list[dict[str, Any]]
    finished: bool
    values: Any


@runtime_checkable
class Resumer(Protocol):
    """Continues a run paused at an approval request, once its decision is stored."""

    async def is_pending(self, request: ApprovalRequest) -> bool:
        """Whether the run still waits on ``request`` (asked before the decision is stored)."""
        ...

    async def resume(self, request: ApprovalRequest, doc: dict[str, Any]) -> DecisionResult:
        """Continue the run with the stored decision ``doc`` (the resume value)."""
        ...


@runtime_checkable
class SyncResumer(Protocol):
    """The sync twin of :class:`Resumer`, for ``decide_sync`` and the other sync twins."""

    def is_pending(self, request: ApprovalRequest) -> bool:
        """See :meth:`Resumer.is_pending`."""
        ...

    def resume(self, request: ApprovalRequest, doc: dict[str, Any]) -> DecisionResult:
        """See :meth:`Resumer.resume`."""
        ...


# -- the graph, in the deciding process ------------------------------------------------------
def interrupt_id(state: StateSnapshot, approval_id: str) -> str | None:
    """The id of the pending interrupt carrying ``approval_id``, if the run waits on it."""
    for item in state.interrupts:
        value = item.value
        if isinstance(value, dict) and value.get("approval_id") == approval_id:
            return str(item.id)
    return None


def not_pending(approval_id: str, thread_id: str) -> ApprovalNotPendingError:
    return ApprovalNotPendingError(
        f"thread {thread_id!r} is not paused at approval {approval_id}; it may have been "
        "resumed already, or the graph given is not the one that runs this thread"
    )


def state_result(graph: Graph, thread_id: str, approval_id: str, doc: dict[str, Any]) -> Flow[Any]:
    """The :class:`DecisionResult` after resuming.

    ``finished`` comes from :func:`tether.runtime.unfinished`: ``state.next``
    is empty for a run whose last step's writes are stored but not checkpointed.
    """
    state: StateSnapshot = yield GetState(graph, thread_id)
    left_unfinished = yield Unfinished(graph, thread_id)
    return DecisionResult(
        approval_id=approval_id,
        decision=doc,
        pending=[
            i.value
            for i in state.interrupts
            if isinstance(i.value, dict) and i.value.get("type") == PAYLOAD_TYPE
        ],
        finished=not left_unfinished,
        values=state.values,
    )


class GraphResumer:
    """Resume the run in this process: the compiled graph that runs the thread.

    What ``graph=`` means to :func:`decide`, :func:`expire_due` and :func:`settle`.

    Args:
        graph: The compiled graph, built over the same checkpointer.

    Raises:
        ApprovalConfigError: ``graph`` is not a compiled graph with a checkpointer.
    """

    def __init__(self, graph: Any) -> None:
        self.graph: Graph = check_graph(graph)

    def pending_flow(self, request: ApprovalRequest) -> Flow[bool]:
        """:meth:`is_pending` as operations."""
        state: StateSnapshot = yield GetState(self.graph, request.thread_id)
        return interrupt_id(state, request.approval_id) is not None

    def resume_flow(self, request: ApprovalRequest, doc: dict[str, Any]) -> Flow[DecisionResult]:
        """:meth:`resume` as operations."""
        thread_id, approval_id = request.thread_id, request.approval_id
        found = interrupt_id((yield GetState(self.graph, thread_id)), approval_id)
        if found is None:
            raise not_pending(approval_id, thread_id)
        yield Resume(self.graph, thread_id, Command(resume={found: doc}))
        result: DecisionResult = yield from state_result(self.graph, thread_id, approval_id, doc)
        return result

    async def is_pending(self, request: ApprovalRequest) -> bool:
        """Whether the graph's state has a pending interrupt carrying the request."""
        return await run(self.pending_flow(request), None)

    async def resume(self, request: ApprovalRequest, doc: dict[str, Any]) -> DecisionResult:
        """Resume the graph with ``Command(resume={interrupt_id: doc})`` and report its state.

        Raises:
            ApprovalNotPendingError: The run no longer waits on the request.
        """
        return await run(self.resume_flow(request, doc), None)

    def is_pending_sync(self, request: ApprovalRequest) -> bool:
        """Sync twin of :meth:`is_pending`."""
        return run_sync(self.pending_flow(request), None)

    def resume_sync(self, request: ApprovalRequest, doc: dict[str, Any]) -> DecisionResult:
        """Sync twin of :meth:`resume`."""
        return run_sync(self.resume_flow(request, doc), None)


# -- choosing and using a resumer in the protocols -------------------------------------------
def choose_resumer(graph: Any, resumer: Any, *, sync: bool) -> Any:
    """The resumer an entry point was given: exactly one of ``graph=`` and ``resumer=``.

    Raises:
        ApprovalConfigError: Both or neither given, ``resumer`` lacks
            ``is_pending``/``resume``, or a sync twin was given async ones.
    """
    if graph is not None and resumer is not None:
        raise ApprovalConfigError(
            "pass graph= or resumer=, not both: graph= resumes the run here, resumer= hands "
            "it to whatever resumes it (e.g. a runtime's queue)"
        )
    if graph is not None:
        return GraphResumer(graph)
    if resumer is None:
        raise ApprovalConfigError(
            "say who resumes the run: graph= (the compiled graph that runs the thread) or "
            "resumer= (a tether.approvals.Resumer)"
        )
    if isinstance(resumer, GraphResumer):
        return resumer
    name = type(resumer).__name__
    methods = [getattr(resumer, m, None) for m in ("is_pending", "resume")]
    if not all(callable(m) for m in methods):
        raise ApprovalConfigError(
            f"resumer= must have is_pending(request) and resume(request, doc) methods "
            f"(tether.approvals.Resumer); {name} has not"
        )
    if sync and any(inspect.iscoroutinefunction(m) for m in methods):
        raise ApprovalConfigError(
            f"{name} has async methods; the sync functions take a SyncResumer (sync methods). "
            "Await the async twin instead"
        )
    return resumer


def pending(resumer: Any, request: ApprovalRequest) -> Flow[bool]:
    """Whether the run waits on ``request``, as the resumer sees it."""
    if isinstance(resumer, GraphResumer):
        return (yield from resumer.pending_flow(request))
    return bool((yield IsPending(resumer, request)))


def resumed(resumer: Any, request: ApprovalRequest, doc: dict[str, Any]) -> Flow[DecisionResult]:
    """Continue the run with the stored decision ``doc``."""
    if isinstance(resumer, GraphResumer):
        return (yield from resumer.resume_flow(request, doc))
    result = yield ResumeWith(resumer, request, doc)
    if not isinstance(result, DecisionResult):
        raise ApprovalConfigError(
            f"{type(resumer).__name__}.resume must return a tether.approvals.DecisionResult, "
            f"got {type(result).__name__}"
        )
    return result
