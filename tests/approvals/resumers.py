"""Resumers for the tests: real implementations of the protocol that queue, as a runtime does.

:class:`QueueingResumer` does what a runtime's resumer does, in memory: it
answers ``is_pending`` from the graph's state, and ``resume`` puts the decision
on a queue instead of running the graph; :meth:`QueueingResumer.work` is the
worker that later runs what was queued. Every call is recorded, and a test can
make something happen in the middle of one (``during_check``, ``during_resume``)
to force an interleaving.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command, StateSnapshot

from tether.approvals import ApprovalRequest, DecisionResult

Hook = Callable[[], Awaitable[Any]]


def _config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def _interrupt_id(state: StateSnapshot, approval_id: str) -> str | None:
    for item in state.interrupts:
        if isinstance(item.value, dict) and item.value.get("approval_id") == approval_id:
            return str(item.id)
    return None


def _queued(request: ApprovalRequest, doc: dict[str, Any]) -> DecisionResult:
    return DecisionResult(request.approval_id, doc, pending=[], finished=False, values=None)


class QueueingResumer:
    """An async resumer: decisions are queued for a worker, never run in the deciding call."""

    def __init__(
        self,
        graph: Any,
        *,
        during_check: Hook | None = None,
        during_resume: Hook | None = None,
    ) -> None:
        self.graph = graph
        self.calls: list[tuple[str, str]] = []
        self.queue: list[tuple[ApprovalRequest, dict[str, Any]]] = []
        self.during_check = during_check
        self.during_resume = during_resume

    async def is_pending(self, request: ApprovalRequest) -> bool:
        self.calls.append(("is_pending", request.approval_id))
        if self.during_check is not None:
            await self.during_check()
        state = await self.graph.aget_state(_config(request.thread_id))
        return _interrupt_id(state, request.approval_id) is not None

    async def resume(self, request: ApprovalRequest, doc: dict[str, Any]) -> DecisionResult:
        self.calls.append(("resume", request.approval_id))
        if self.during_resume is not None:
            await self.during_resume()
        self.queue.append((request, doc))
        return _queued(request, doc)

    async def work(self) -> None:
        """The worker: resume each queued run with its decision, by interrupt id."""
        while self.queue:
            request, doc = self.queue.pop(0)
            config = _config(request.thread_id)
            found = _interrupt_id(await self.graph.aget_state(config), request.approval_id)
            assert found is not None
            await self.graph.ainvoke(Command(resume={found: doc}), config)


class SyncQueueingResumer:
    """The sync twin of :class:`QueueingResumer` (a ``SyncResumer``)."""

    def __init__(self, graph: Any) -> None:
        self.graph = graph
        self.calls: list[tuple[str, str]] = []
        self.queue: list[tuple[ApprovalRequest, dict[str, Any]]] = []

    def is_pending(self, request: ApprovalRequest) -> bool:
        self.calls.append(("is_pending", request.approval_id))
        state = self.graph.get_state(_config(request.thread_id))
        return _interrupt_id(state, request.approval_id) is not None

    def resume(self, request: ApprovalRequest, doc: dict[str, Any]) -> DecisionResult:
        self.calls.append(("resume", request.approval_id))
        self.queue.append((request, doc))
        return _queued(request, doc)

    def work(self) -> None:
        while self.queue:
            request, doc = self.queue.pop(0)
            config = _config(request.thread_id)
            found = _interrupt_id(self.graph.get_state(config), request.approval_id)
            assert found is not None
            self.graph.invoke(Command(resume={found: doc}), config)
