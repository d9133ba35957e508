"""What approvals store, and reading it back.

One request is one JSON document (:class:`ApprovalRequest`). It is stored
(record kind ``approval``, keyed by the approval id) before the run pauses, and
the same document is the value of the LangGraph interrupt. It holds everything a
person needs to decide without re-deriving the agent's reasoning: the action and
its resolved arguments with their SHA-256, why, what it affects, what happens if
denied, the observations the agent acted on (with their hash), who may decide,
when the request expires and what happens then, and the versions of the records
the action depends on.

A decision is stored beside it (record kind ``approval_decision``, same key),
put-if-absent, so it is recorded once. Every request, decision, voiding,
escalation, expiry and cancellation is also an audit step in the thread's step log (kind
``approval``), in the same document shape as the other steps, so ``read_steps``
shows them in order with the model and tool steps.

:func:`list_approvals` and :func:`get_approval` read requests back with their
decisions, as :class:`ApprovalView`.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from tether.approvals._io import AppendStep, Flow, Insert, List, Read, Upsert, run, run_sync
from tether.approvals._policies import Approvers, ExpiryPolicy, policy_from_dict
from tether.approvals.errors import UnknownApprovalError
from tether.store import Record, store_for

__all__ = [
    "APPROVAL_KIND",
    "DECISION_KIND",
    "PAYLOAD_TYPE",
    "ApprovalRequest",
    "ApprovalView",
    "audit",
    "audit_document",
    "format_time",
    "get_approval",
    "get_approval_sync",
    "insert_request",
    "list_approvals",
    "list_approvals_sync",
    "parse_time",
    "require_record",
    "upsert_request",
]

APPROVAL_KIND = "approval"
DECISION_KIND = "approval_decision"
PAYLOAD_TYPE = "tether.approval"


def format_time(moment: datetime) -> str:
    """ISO 8601 in UTC, e.g. ``2026-11-30T09:00:00+00:00``."""
    return moment.astimezone(UTC).isoformat(timespec="seconds")


def parse_time(text: str) -> datetime:
    """Inverse of :func:`format_time`."""
    return datetime.fromisoformat(text)


@dataclass(frozen=True)
class ApprovalRequest:
    """A stored approval request (see the module docstring and docs/approvals.md for the fields)."""

    approval_id: str
    thread_id: str
    action: str
    args: dict[str, Any]
    args_sha256: str
    why: str
    affects: str
    if_denied: str
    observations: dict[str, Any]
    observations_sha256: str
    approvers: Approvers
    requested_at: str
    expires_at: str
    on_expiry: ExpiryPolicy
    depends_on: dict[str, Any]
    alternative: dict[str, Any] | None = None
    args_schema: str | None = None
    args_json_schema: dict[str, Any] | None = None
    node: str = ""
    task_id: str = ""
    checkpoint_ns: str = ""
    key: str = ""
    revision: int = 0
    replaces: str | None = None
    status: str = "pending"
    status_reason: str | None = None
    escalations: list[dict[str, Any]] = field(default_factory=list)

    def expired(self, now: datetime) -> bool:
        """Whether the request has expired at ``now``."""
        return now >= parse_time(self.expires_at)

    def with_status(self, status: str, reason: str | None = None) -> ApprovalRequest:
        """A copy with a new status (``pending``, ``cleared`` or ``voided``)."""
        return replace(self, status=status, status_reason=reason)

    def to_dict(self) -> dict[str, Any]:
        """The stored (and shown) JSON document."""
        return {
            "type": PAYLOAD_TYPE,
            "approval_id": self.approval_id,
            "thread_id": self.thread_id,
            "action": self.action,
            "args": self.args,
            "args_sha256": self.args_sha256,
            "why": self.why,
            "affects": self.affects,
            "if_denied": self.if_denied,
            "observations": self.observations,
            "observations_sha256": self.observations_sha256,
            "approvers": self.approvers.to_dict(),
            "requested_at": self.requested_at,
            "expires_at": self.expires_at,
            "on_expiry": self.on_expiry.to_dict(),
            "depends_on": self.depends_on,
            "alternative": self.alternative,
            "args_schema": self.args_schema,
            "args_json_schema": self.args_json_schema,
            "node": self.node,
            "task_id": self.task_id,
            "checkpoint_ns": self.checkpoint_ns,
            "key": self.key,
            "revision": self.revision,
            "replaces": self.replaces,
            "status": self.status,
            "status_reason": self.status_reason,
            "escalations": self.escalations,
        }

    def payload(self) -> dict[str, Any]:
        """The interrupt value: the document without the fields that change after it is raised."""
        doc = self.to_dict()
        for name in ("status", "status_reason", "escalations"):
            doc.pop(name)
        return doc

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ApprovalRequest:
        """Rebuild a request from its stored document."""
        return cls(
            approval_id=data["approval_id"],
            thread_id=data["thread_id"],
            action=data["action"],
            args=data["args"],
            args_sha256=data["args_sha256"],
            why=data["why"],
            affects=data["affects"],
            if_denied=data["if_denied"],
            observations=data["observations"],
            observations_sha256=data["observations_sha256"],
            approvers=Approvers.from_dict(data["approvers"]),
            requested_at=data["requested_at"],
            expires_at=data["expires_at"],
            on_expiry=policy_from_dict(data["on_expiry"]),
            depends_on=data["depends_on"],
            alternative=data.get("alternative"),
            args_schema=data.get("args_schema"),
            args_json_schema=data.get("args_json_schema"),
            node=data.get("node", ""),
            task_id=data.get("task_id", ""),
            checkpoint_ns=data.get("checkpoint_ns", ""),
            key=data.get("key", ""),
            revision=int(data.get("revision", 0)),
            replaces=data.get("replaces"),
            status=data.get("status", "pending"),
            status_reason=data.get("status_reason"),
            escalations=list(data.get("escalations", [])),
        )


def require_record(thread_id: str | None, approval_id: str, request: Record | None) -> Record:
    """The stored request record, or :class:`UnknownApprovalError`."""
    if request is None or (thread_id is not None and request.thread_id != str(thread_id)):
        where = f" in thread {thread_id!r}" if thread_id is not None else ""
        raise UnknownApprovalError(
            f"no approval request {approval_id!r}{where}; list them with "
            "`tether approvals list --url URL`"
        )
    return request


def insert_request(request: ApprovalRequest) -> Insert:
    """Store ``request`` unless one with its id is stored already."""
    return Insert(APPROVAL_KIND, request.approval_id, request.to_dict(), request.thread_id)


def upsert_request(request: ApprovalRequest) -> Upsert:
    """Store ``request`` over the earlier version of it (a new status, an escalation)."""
    return Upsert(APPROVAL_KIND, request.approval_id, request.to_dict(), request.thread_id)


# -- the audit trail -----------------------------------------------------------------------
def audit_document(
    request: ApprovalRequest,
    event: str,
    *,
    by: str | None = None,
    args_sha256: str | None = None,
    **detail: Any,
) -> dict[str, Any]:
    """A step document recording ``event`` (``requested``, ``decided``, ``voided``, ...).

    Each says who, when, the arguments' hash, the hash of the observations
    shown, and the outcome.
    """
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
    # The step log's document shape (see tether.steps._log.step_document), written
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


def audit(request: ApprovalRequest, event: str, **detail: Any) -> AppendStep:
    """Append an audit step for ``request`` to its thread's step log."""
    return AppendStep(request.thread_id, audit_document(request, event, **detail))


# -- reading back --------------------------------------------------------------------------
_DONE = {
    "approve": "approved",
    "edit": "edited",
    "reject": "rejected",
    "expire": "expired",
    "cancelled": "cancelled",
}


@dataclass(frozen=True)
class ApprovalView:
    """A request as stored, with its decision and a status derived from both.

    Attributes:
        request: The request (with any escalations applied).
        decision: The decision document, if decided.
        status: ``pending``, ``approved``, ``edited``, ``rejected``, ``expired``
            (settled by the expiry policy), ``cancelled`` (with its run) or
            ``voided`` (stale, replaced).
    """

    request: ApprovalRequest
    decision: dict[str, Any] | None
    status: str

    def overdue(self, now: datetime | None = None) -> bool:
        """Pending past its expiry (waiting for the expiry sweep)."""
        return self.status == "pending" and self.request.expired(now or datetime.now(UTC))


def _view(record: Record, decision: Record | None) -> ApprovalView:
    request = ApprovalRequest.from_dict(record.value)
    if request.status == "voided":
        status = "voided"
    elif decision is not None:
        status = _DONE[decision.value["decision"]]
    else:
        status = "pending"
    return ApprovalView(request, None if decision is None else decision.value, status)


def _listing(thread_id: str | None, status: str | None) -> Flow[list[ApprovalView]]:
    records: list[Record] = yield List(APPROVAL_KIND, thread_id)
    decisions: list[Record] = yield List(DECISION_KIND, thread_id)
    by_id = {d.key: d for d in decisions}
    views = [_view(r, by_id.get(r.key)) for r in records]
    return [v for v in views if status is None or v.status == status]


def _getting(approval_id: str) -> Flow[ApprovalView]:
    record = require_record(None, approval_id, (yield Read(APPROVAL_KIND, approval_id)))
    return _view(record, (yield Read(DECISION_KIND, approval_id)))


async def list_approvals(
    checkpointer: BaseCheckpointSaver[Any],
    *,
    thread_id: str | None = None,
    status: str | None = "pending",
) -> list[ApprovalView]:
    """Approvals of one thread or of the whole database, oldest first.

    Args:
        checkpointer: The checkpointer of the runs.
        thread_id: Only this thread's (default: every thread).
        status: Only those with this status (default ``pending``; ``None`` for all).
    """
    return await run(_listing(thread_id, status), store_for(checkpointer))


def list_approvals_sync(
    checkpointer: BaseCheckpointSaver[Any],
    *,
    thread_id: str | None = None,
    status: str | None = "pending",
) -> list[ApprovalView]:
    """Sync twin of :func:`list_approvals`."""
    return run_sync(_listing(thread_id, status), store_for(checkpointer))


async def get_approval(checkpointer: BaseCheckpointSaver[Any], approval_id: str) -> ApprovalView:
    """One approval by id.

    Raises:
        UnknownApprovalError: No such request.
    """
    return await run(_getting(approval_id), store_for(checkpointer))


def get_approval_sync(checkpointer: BaseCheckpointSaver[Any], approval_id: str) -> ApprovalView:
    """Sync twin of :func:`get_approval`."""
    return run_sync(_getting(approval_id), store_for(checkpointer))
