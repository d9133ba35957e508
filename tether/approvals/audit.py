"""The audit trail: every request, decision, voiding, escalation and expiry is a step.

Audit steps go to the thread's step log (kind ``approval``) in the same
document shape as the other steps, so ``read_steps`` shows them in order with
the model and tool steps. Each says who, when, the arguments' hash, the hash
of the observations shown, and the outcome.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from tether.approvals.request import ApprovalRequest
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
    now = time.time()
    # The step log's document shape (see tether.steps.log.step_document), written
    # here so that recording an approval does not import the whole steps layer.
    return {
        "kind": "approval",
        "node": request.node,
        "task_id": request.task_id,
        "name": f"{request.action}:{event}",
        "input_hash": request.args_sha256,
        "model_id": None,
        "prompt_version": None,
        "tool_schema_version": None,
        "usage": {},
        "cost_usd": 0.0,
        "started_at": now,
        "ended_at": now,
        "attempt": 1,
        "worker_id": f"{socket.gethostname()}:{os.getpid()}",
        "key": request.approval_id,
        "graph_version": None,
        "detail": {"event": event},
        "output": output,
    }


async def write_audit(store: RecordStore, request: ApprovalRequest, event: str, **kw: Any) -> None:
    """Append an audit step for ``request`` to its thread's step log."""
    await store.append_step(request.thread_id, audit_document(request, event, **kw))


def write_audit_sync(store: RecordStore, request: ApprovalRequest, event: str, **kw: Any) -> None:
    """Sync twin of :func:`write_audit`."""
    store.sync.append_step(request.thread_id, audit_document(request, event, **kw))
