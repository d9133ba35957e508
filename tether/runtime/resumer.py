"""Deciding an approval enqueues the run's resume; whichever worker is free continues it.

:class:`RuntimeResumer` is the :class:`tether.approvals.Resumer` of the runtime.
``tether.approvals.decide(..., resumer=RuntimeResumer(rt))`` runs every check
approvals always runs, stores the decision exactly once, and then, instead of
running the graph in the deciding process, turns the ``interrupted`` run row
back into ``pending`` with ``Command(resume={interrupt_id: decision})`` as its
input. The resume is idempotent: a second enqueue of the same run finds it no
longer ``interrupted`` and changes nothing.

A compensation request (action ``compensate:<tool>``) has no waiting run: the
run it belongs to has ended. It is pending while the thread's compensation
waits on it (read from the stored records, no graph needed), and deciding it
enqueues a continuation run that a worker compensates with
(:mod:`.compensations`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tether.approvals import ApprovalRequest, DecisionResult
from tether.compensation import compensation_waits_on, is_compensation_request
from tether.runtime import compensations
from tether.runtime.models import Run
from tether.runtime.store.base import NewEvent

if TYPE_CHECKING:
    from tether.runtime.api import Runtime

__all__ = ["RuntimeResumer"]


class RuntimeResumer:
    """Resumes runs by enqueueing them in ``runtime``'s run store.

    Args:
        runtime: The runtime whose tenant's runs it resumes.
        any_tenant: Resume the run whatever its thread's tenant (the
            scheduler's expiry sweep, which serves every tenant).
    """

    def __init__(self, runtime: Runtime, *, any_tenant: bool = False) -> None:
        self.runtime = runtime
        self.any_tenant = any_tenant

    async def _scope(self, request: ApprovalRequest) -> Runtime | None:
        if not self.any_tenant:
            return self.runtime
        tenant = await self.runtime.store.thread_tenant(request.thread_id)
        return None if tenant is None else self.runtime.scoped(tenant)

    async def _waiting(self, request: ApprovalRequest) -> tuple[Runtime, Run, str] | None:
        runtime = await self._scope(request)
        if runtime is None:
            return None
        runs = await runtime.list(thread_id=request.thread_id, status="interrupted")
        for run in runs:
            for waiting in run.waiting_on:
                if waiting.approval_id == request.approval_id:
                    return runtime, run, waiting.interrupt_id
        return None

    async def is_pending(self, request: ApprovalRequest) -> bool:
        """Whether an ``interrupted`` run of the thread waits on this request (for a
        compensation request: whether the thread's compensation does).

        Raises:
            ApprovalNotPendingError: A compensation request that this runtime's
                tenant cannot continue now (the message says why).
        """
        if is_compensation_request(request):
            runtime = await self._scope(request)
            if runtime is None:
                return False
            if not await compensation_waits_on(await runtime.checkpointer(), request):
                return False
            await compensations.find_run(runtime, request)
            return True
        return await self._waiting(request) is not None

    async def resume(self, request: ApprovalRequest, doc: dict[str, Any]) -> DecisionResult:
        """Enqueue the waiting run with the decision as its resume value."""
        from tether.approvals.errors import ApprovalNotPendingError

        if is_compensation_request(request):
            return await self._continue_compensation(request, doc)
        found = await self._waiting(request)
        if found is None:
            raise ApprovalNotPendingError(
                f"approval {request.approval_id!r}: no run of thread {request.thread_id!r} "
                "waits on it any more"
            )
        runtime, run, interrupt_id = found
        decided = NewEvent(
            "approval.decided",
            {
                "approval_id": request.approval_id,
                "decision": doc.get("decision"),
                "by": doc.get("by"),
                "args_sha256": request.args_sha256,
            },
        )
        await runtime.store.resume_run(
            run.run_id,
            {"resume": {interrupt_id: doc}},
            tenant=runtime.tenant,
            events=[decided],
        )
        return DecisionResult(
            approval_id=request.approval_id,
            decision=doc,
            pending=[],
            finished=False,
            values=None,
        )

    async def _continue_compensation(
        self, request: ApprovalRequest, doc: dict[str, Any]
    ) -> DecisionResult:
        """Enqueue the continuation run; a worker compensates with the stored decision."""
        from tether.approvals.errors import ApprovalNotPendingError

        runtime = await self._scope(request)
        if runtime is None:
            raise ApprovalNotPendingError(
                f"approval {request.approval_id!r}: thread {request.thread_id!r} is gone"
            )
        continuation = await compensations.enqueue(runtime, request, doc)
        return DecisionResult(
            approval_id=request.approval_id,
            decision=doc,
            pending=[],
            finished=False,
            values={"continued_by": continuation.run_id},
        )
