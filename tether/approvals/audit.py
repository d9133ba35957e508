"""The audit trail: every request, decision, voiding, escalation and expiry is a step.

Audit steps go to the thread's step log (kind ``approval``) in the same
document shape as the other steps, so ``read_steps`` shows them in order with
the model and tool steps. Each says who, when, the arguments' hash, the hash
of the observations shown, and the outcome.
"""

from __future__ import annotations

from typing import Any

from tether.approvals.request import ApprovalRequest
from tether.steps.log import step_document
from tether.store import RecordStore

__all__ = ["audit_document", "write_audit", "write_audit_sync"]


def audit_document(
    request: ApprovalRequest,
    event: str,
    *,
    by: str | None = None,
    args_sha256: str | None = None,
    **detail: Any,
) -> dict[str, Any]:
    """A step document recording ``event`` (``requested``, ``decided``, ``voided``, ...)."""
    output = {
        "event": event,
        "approval_id": request.approval_id,
        "action": request.action,
        "by": by,
        "args_sha256": args_sha256 or request.args_sha256,
        "observations_sha256": request.observations_sha256,
        **detail,
    }
    return step_document(
        "approval",
        name=f"{request.action}:{event}",
        node=request.node,
        task_id=request.task_id,
        input_hash=request.args_sha256,
        output=output,
        key=request.approval_id,
        detail={"event": event},
    )


async def write_audit(store: RecordStore, request: ApprovalRequest, event: str, **kw: Any) -> None:
    """Append an audit step for ``request`` to its thread's step log."""
    await store.append_step(request.thread_id, audit_document(request, event, **kw))


def write_audit_sync(store: RecordStore, request: ApprovalRequest, event: str, **kw: Any) -> None:
    """Sync twin of :func:`write_audit`."""
    store.sync.append_step(request.thread_id, audit_document(request, event, **kw))
