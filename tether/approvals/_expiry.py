"""``expire_due``: apply the expiry policy of every request whose time is up.

Run it from a scheduler (``tether approvals expire --url URL`` in cron, or a
worker loop); ``now`` is injectable, so tests never sleep.

* escalate: the request gets the escalation's approvers and a new expiry (the
  run stays paused; nothing resumes). When that expiry passes too, the
  escalation's ``then`` policy applies.
* stop / safe_alternative: an ``expire`` decision is stored through the same
  put-if-absent as a person's decision (so a person deciding at the same
  moment and the sweep never both resume the run) and the run is resumed, by
  the graph (``graph=``) or by whoever resumes runs (``resumer=``, e.g. a
  runtime's queue).

A timeout never approves.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from tether.approvals._checks import SYSTEM_EXPIRY, build_decision
from tether.approvals._decide import settling
from tether.approvals._io import Flow, List, run, run_sync
from tether.approvals._policies import Escalate, ExpiryPolicy, SafeAlternative
from tether.approvals._resuming import GraphResumer, Resumer, SyncResumer, choose_resumer
from tether.approvals._storage import (
    APPROVAL_KIND,
    DECISION_KIND,
    ApprovalRequest,
    audit,
    format_time,
    upsert_request,
)
from tether.approvals.errors import AlreadyDecidedError, ApprovalNotPendingError
from tether.store import Record, store_for

__all__ = ["ExpiryAction", "current_policy", "expire_due", "expire_due_sync"]


@dataclass(frozen=True)
class ExpiryAction:
    """What the sweep did with one expired request.

    Attributes:
        approval_id: The request.
        thread_id: Its thread.
        outcome: ``escalated``, ``stopped``, ``safe_alternative`` or ``skipped``.
        detail: A sentence for operators.
    """

    approval_id: str
    thread_id: str
    outcome: str
    detail: str


def current_policy(request: ApprovalRequest) -> ExpiryPolicy:
    """The policy that applies now: escalations already done move down the ``then`` chain."""
    policy = request.on_expiry
    for _ in request.escalations:
        if isinstance(policy, Escalate):
            policy = policy.then
    return policy


def _due(records: list[Record], decided: set[str], now: datetime) -> list[ApprovalRequest]:
    due = []
    for record in records:
        request = ApprovalRequest.from_dict(record.value)
        if request.status == "pending" and record.key not in decided and request.expired(now):
            due.append(request)
    return due


def _escalated(request: ApprovalRequest, policy: Escalate, now: datetime) -> ApprovalRequest:
    step: dict[str, Any] = {
        "at": format_time(now),
        "from": request.approvers.to_dict(),
        "to": policy.to.to_dict(),
        "expired_at": request.expires_at,
        "expires_at": format_time(now + policy.expires_in),
    }
    return replace(
        request,
        approvers=policy.to,
        expires_at=format_time(now + policy.expires_in),
        escalations=[*request.escalations, step],
    )


def _expire_doc(request: ApprovalRequest, policy: ExpiryPolicy, now: datetime) -> dict[str, Any]:
    name = "safe_alternative" if isinstance(policy, SafeAlternative) else "stop"
    return build_decision(
        request, "expire", by=SYSTEM_EXPIRY, args_sha256=None, now=now, policy=name
    )


def _settled(request: ApprovalRequest, doc: dict[str, Any]) -> ExpiryAction:
    outcome = "stopped" if doc["policy"] == "stop" else "safe_alternative"
    return ExpiryAction(
        request.approval_id,
        request.thread_id,
        outcome,
        f"{request.action}: expired at {request.expires_at}; policy {doc['policy']} applied",
    )


def _skipped(request: ApprovalRequest, exc: Exception) -> ExpiryAction:
    return ExpiryAction(request.approval_id, request.thread_id, "skipped", str(exc))


def _escalation_action(request: ApprovalRequest) -> ExpiryAction:
    return ExpiryAction(
        request.approval_id,
        request.thread_id,
        "escalated",
        f"{request.action}: escalated to {request.approvers.to_dict()} until {request.expires_at}",
    )


def _expiring(resumer: Any, now: datetime) -> Flow[list[ExpiryAction]]:
    decided = {r.key for r in (yield List(DECISION_KIND))}
    actions = []
    for request in _due((yield List(APPROVAL_KIND)), decided, now):
        policy = current_policy(request)
        if isinstance(policy, Escalate):
            escalated = _escalated(request, policy, now)
            last = escalated.escalations[-1]
            yield upsert_request(escalated)
            yield audit(
                escalated,
                "escalated",
                by=SYSTEM_EXPIRY,
                to=last["to"],
                expires_at=last["expires_at"],
            )
            actions.append(_escalation_action(escalated))
            continue
        doc = _expire_doc(request, policy, now)
        try:
            yield from settling(resumer, request, doc)
        except (AlreadyDecidedError, ApprovalNotPendingError) as exc:
            actions.append(_skipped(request, exc))
            continue
        actions.append(_settled(request, doc))
    return actions


async def expire_due(
    checkpointer: BaseCheckpointSaver[Any],
    graph: Any = None,
    now: datetime | None = None,
    *,
    resumer: Resumer | None = None,
) -> list[ExpiryAction]:
    """Apply the expiry policy of every pending request expired at ``now`` (default: now).

    Args:
        checkpointer: The checkpointer of the runs.
        graph: The compiled graph that runs them (resumed here for stop and
            safe_alternative). Give this or ``resumer``.
        now: The current time (injectable for tests).
        resumer: Who resumes the runs instead of ``graph`` (a :class:`Resumer`).

    Returns:
        One :class:`ExpiryAction` per expired request.

    Raises:
        ApprovalConfigError: Not exactly one of ``graph`` and ``resumer``.
    """
    chosen = choose_resumer(graph, resumer, sync=False)
    return await run(_expiring(chosen, now or datetime.now(UTC)), store_for(checkpointer))


def expire_due_sync(
    checkpointer: BaseCheckpointSaver[Any],
    graph: Any = None,
    now: datetime | None = None,
    *,
    resumer: SyncResumer | GraphResumer | None = None,
) -> list[ExpiryAction]:
    """Sync twin of :func:`expire_due` (``resumer`` is a :class:`SyncResumer`)."""
    chosen = choose_resumer(graph, resumer, sync=True)
    return run_sync(_expiring(chosen, now or datetime.now(UTC)), store_for(checkpointer))
