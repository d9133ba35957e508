"""``cancel_pending``: the requests of a cancelled run, settled as ``cancelled``.

When a run waiting on people is cancelled (or passes its deadline), nobody
should decide its requests any more. Each request gets the decision
``cancelled`` through the same put-if-absent as a person's decision, so of a
cancel and a concurrent decision exactly one is stored: the loser's decision
gets :class:`AlreadyDecidedError` and resumes nothing, and a cancel that lost
leaves that request out of its answer. Every later decision gets
:class:`AlreadyDecidedError` too, the requests leave the pending list, and a
gate that runs again reads ``cancelled`` as a rejection carrying the reason.

Nothing is resumed: the run is over, or whoever cancelled it decides what runs next.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from tether.approvals._checks import CANCELLED, cancel_decision
from tether.approvals._io import Flow, Insert, Read, run, run_sync
from tether.approvals._storage import (
    APPROVAL_KIND,
    DECISION_KIND,
    ApprovalRequest,
    audit,
    require_record,
)
from tether.approvals.errors import ApprovalConfigError
from tether.store import store_for

__all__ = ["cancel_pending", "cancel_pending_sync"]


def _checked(approval_ids: Any, by: Any, reason: Any) -> list[str]:
    """The distinct ids, in order, after checking every argument."""
    if isinstance(approval_ids, str) or not isinstance(approval_ids, Sequence):
        raise ApprovalConfigError(
            f"approval_ids must be a list of approval ids, got {approval_ids!r}; "
            "write cancel_pending(saver, [approval_id], ...)"
        )
    if not all(isinstance(i, str) and i for i in approval_ids):
        raise ApprovalConfigError(f"approval ids must be non-empty strings, got {approval_ids!r}")
    if not isinstance(by, str) or not by:
        raise ApprovalConfigError("cancel_pending needs by= naming who cancels (a non-empty str)")
    if not isinstance(reason, str) or not reason:
        raise ApprovalConfigError(
            "cancel_pending needs reason= (a non-empty str): the agent and the audit log show it"
        )
    return list(dict.fromkeys(approval_ids))


def _cancelling(
    approval_ids: list[str], by: str, reason: str, now: datetime | None
) -> Flow[list[str]]:
    requests = []
    for approval_id in approval_ids:  # every id exists, or nothing is written
        record = require_record(None, approval_id, (yield Read(APPROVAL_KIND, approval_id)))
        requests.append(ApprovalRequest.from_dict(record.value))
    cancelled = []
    for request in requests:
        if request.status == "voided":  # replaced by a fresh request, which the run waits on
            continue
        doc = cancel_decision(request, by=by, reason=reason, now=now)
        if (yield Insert(DECISION_KIND, request.approval_id, doc, request.thread_id)):
            yield audit(request, "cancelled", by=by, outcome=CANCELLED, reason=reason)
            cancelled.append(request.approval_id)
    return cancelled


async def cancel_pending(
    checkpointer: BaseCheckpointSaver[Any],
    approval_ids: Sequence[str],
    *,
    by: str,
    reason: str,
    now: datetime | None = None,
) -> list[str]:
    """Settle each undecided request as ``cancelled``; resume nothing.

    Args:
        checkpointer: The checkpointer of the runs.
        approval_ids: The requests (e.g. those a cancelled run waits on).
        by: Who cancels (``tether:cancel``, ``tether:deadline``, or a person's id).
        reason: Why; recorded, audited, and what the gate tells the agent.
        now: The current time (injectable for tests).

    Returns:
        The ids this call cancelled, in order: not those decided (or
        cancelled) already, nor voided ones.

    Raises:
        ApprovalConfigError: ``approval_ids`` is not a list of ids, or ``by`` or
            ``reason`` is missing.
        UnknownApprovalError: An id names no request (checked before anything
            is written).
    """
    ids = _checked(approval_ids, by, reason)
    return await run(_cancelling(ids, by, reason, now), store_for(checkpointer))


def cancel_pending_sync(
    checkpointer: BaseCheckpointSaver[Any],
    approval_ids: Sequence[str],
    *,
    by: str,
    reason: str,
    now: datetime | None = None,
) -> list[str]:
    """Sync twin of :func:`cancel_pending`."""
    ids = _checked(approval_ids, by, reason)
    return run_sync(_cancelling(ids, by, reason, now), store_for(checkpointer))
