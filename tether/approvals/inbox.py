"""Reading approvals back: one request with its decision, or the pending ones of a database."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from tether.approvals.decisions import require_record
from tether.approvals.request import APPROVAL_KIND, DECISION_KIND, ApprovalRequest
from tether.store import Record, store_for

__all__ = [
    "ApprovalView",
    "get_approval",
    "get_approval_sync",
    "list_approvals",
    "list_approvals_sync",
]

_DONE = {"approve": "approved", "edit": "edited", "reject": "rejected", "expire": "expired"}


@dataclass(frozen=True)
class ApprovalView:
    """A request as stored, with its decision and a status derived from both.

    Attributes:
        request: The request (with any escalations applied).
        decision: The decision document, if decided.
        status: ``pending``, ``approved``, ``edited``, ``rejected``, ``expired``
            (settled by the expiry policy) or ``voided`` (stale, replaced).
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


def _views(
    records: list[Record], decisions: list[Record], status: str | None
) -> list[ApprovalView]:
    by_id = {d.key: d for d in decisions}
    views = [_view(r, by_id.get(r.key)) for r in records]
    return [v for v in views if status is None or v.status == status]


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
    store = store_for(checkpointer)
    records = await store.list(APPROVAL_KIND, thread_id=thread_id)
    decisions = await store.list(DECISION_KIND, thread_id=thread_id)
    return _views(records, decisions, status)


def list_approvals_sync(
    checkpointer: BaseCheckpointSaver[Any],
    *,
    thread_id: str | None = None,
    status: str | None = "pending",
) -> list[ApprovalView]:
    """Sync twin of :func:`list_approvals`."""
    store = store_for(checkpointer)
    records = store.sync.list(APPROVAL_KIND, thread_id=thread_id)
    decisions = store.sync.list(DECISION_KIND, thread_id=thread_id)
    return _views(records, decisions, status)


async def get_approval(checkpointer: BaseCheckpointSaver[Any], approval_id: str) -> ApprovalView:
    """One approval by id.

    Raises:
        UnknownApprovalError: No such request.
    """
    store = store_for(checkpointer)
    record = require_record(None, approval_id, await store.get(APPROVAL_KIND, approval_id))
    return _view(record, await store.get(DECISION_KIND, approval_id))


def get_approval_sync(checkpointer: BaseCheckpointSaver[Any], approval_id: str) -> ApprovalView:
    """Sync twin of :func:`get_approval`."""
    store = store_for(checkpointer)
    record = require_record(None, approval_id, store.sync.get(APPROVAL_KIND, approval_id))
    return _view(record, store.sync.get(DECISION_KIND, approval_id))
