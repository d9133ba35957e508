"""``decide``: check a person's decision against the stored request, record it once, resume.

Checks, in order, each with its own error: the request exists in the thread
(:class:`UnknownApprovalError`), it is not decided yet
(:class:`AlreadyDecidedError`), the decider may decide
(:class:`ApproverNotAllowedError`), it has not expired
(:class:`ApprovalExpiredError`), the decider saw these arguments
(:class:`ArgsHashMismatchError`), edited arguments match the schema
(:class:`InvalidEditError`), and the run is paused at it
(:class:`ApprovalNotPendingError`). Nothing is written until every check
passed.

The decision is then stored with an atomic put-if-absent keyed by the approval
id: of two concurrent submissions exactly one is stored, and only that one
resumes the run, through ``Command(resume={interrupt_id: decision})``. The
interrupt id is found in the graph's state by the approval id the interrupt
carries, so several approvals pending in one step are each decided by id.

The graph to resume is a parameter: the compiled graph that runs the thread
(built over the same checkpointer in the deciding process).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from langgraph.types import Command, StateSnapshot

from tether.approvals.errors import (
    AlreadyDecidedError,
    ApprovalConfigError,
    ApprovalExpiredError,
    ApprovalNotPendingError,
    ApproverNotAllowedError,
    ArgsHashMismatchError,
    UnknownApprovalError,
)
from tether.approvals.hashing import args_sha256 as sha256_of
from tether.approvals.identity import RESERVED_PREFIX
from tether.approvals.request import (
    PAYLOAD_TYPE,
    ApprovalRequest,
    format_time,
)
from tether.approvals.schemas import validate_args
from tether.store import Record

__all__ = [
    "DecisionResult",
    "build_decision",
    "check_request",
    "pending_payloads",
    "require_record",
]

HumanDecision = Literal["approve", "edit", "reject"]
SYSTEM_EXPIRY = "tether:expiry"


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


def require_record(thread_id: str | None, approval_id: str, request: Record | None) -> Record:
    """The stored request record, or :class:`UnknownApprovalError`."""
    if request is None or (thread_id is not None and request.thread_id != str(thread_id)):
        where = f" in thread {thread_id!r}" if thread_id is not None else ""
        raise UnknownApprovalError(
            f"no approval request {approval_id!r}{where}; list them with "
            "`tether approvals list --url URL`"
        )
    return request


def check_request(
    thread_id: str | None, approval_id: str, request: Record | None, decided: Record | None
) -> ApprovalRequest:
    """The stored request, after the existence and already-decided checks."""
    request = require_record(thread_id, approval_id, request)
    parsed = ApprovalRequest.from_dict(request.value)
    if parsed.status == "voided":
        raise AlreadyDecidedError(
            f"approval {approval_id} was voided ({parsed.status_reason}) after it was decided; "
            "decide the fresh request that replaced it (`tether approvals list`)"
        )
    if decided is not None:
        d = decided.value
        raise AlreadyDecidedError(
            f"approval {approval_id} was already decided ({d['decision']} by {d['by']} at "
            f"{d['at']}); a decision is final and resumes the run once"
        )
    return parsed


def _check_person(
    request: ApprovalRequest,
    by: str,
    roles: tuple[str, ...],
    moment: datetime,
    args_sha256: str | None,
) -> None:
    """The checks on a person's decision: who, when, and on which arguments."""
    if not by or not isinstance(by, str):
        raise ApproverNotAllowedError("a decision must say who decides (by='user id')")
    if by.startswith(RESERVED_PREFIX):
        raise ApproverNotAllowedError(
            f"{by!r} is reserved for tether's own deciders; a person decides under their own id"
        )
    if not request.approvers.allows(by, roles):
        allowed = request.approvers.to_dict()
        raise ApproverNotAllowedError(
            f"{by!r} (roles {list(roles)}) may not decide approval {request.approval_id}; "
            f"allowed: users {allowed['users']}, roles {allowed['roles']}"
        )
    if request.expired(moment):
        raise ApprovalExpiredError(
            f"approval {request.approval_id} expired at {request.expires_at}; it can no "
            "longer be decided. Run `tether approvals expire --url URL` to apply its "
            f"expiry policy ({request.on_expiry.to_dict()['policy']})"
        )
    if args_sha256 != request.args_sha256:
        raise ArgsHashMismatchError(
            f"approval {request.approval_id} shows arguments with sha256 "
            f"{request.args_sha256}, but the decision names {args_sha256!r}; look at the "
            "request again (`tether approvals show`) and decide on what it shows"
        )


def build_decision(
    request: ApprovalRequest,
    decision: str,
    *,
    by: str,
    roles: tuple[str, ...] = (),
    args_sha256: str | None,
    edited_args: dict[str, Any] | None = None,
    reason: str | None = None,
    now: datetime | None = None,
    policy: str | None = None,
    source: str | None = None,
) -> dict[str, Any]:
    """Check a decision against ``request`` and build the document to store and resume with.

    ``source`` says how the decider's identity was established (see
    :class:`tether.approvals.identity.Decider`); it is stored as ``decider_source``.
    """
    moment = now or datetime.now(UTC)
    if decision not in ("approve", "edit", "reject", "expire"):
        raise ApprovalConfigError(
            f"decision must be 'approve', 'edit' or 'reject', got {decision!r}"
        )
    if decision == "expire":
        if by != SYSTEM_EXPIRY or policy not in ("stop", "safe_alternative"):
            raise ApprovalConfigError("only the expiry sweep settles a request as expired")
    else:
        _check_person(request, by, roles, moment, args_sha256)
    args: dict[str, Any] | None = None
    if decision == "edit":
        if edited_args is None:
            raise ApprovalConfigError("an 'edit' decision needs edited_args")
        args = validate_args(request.action, request.args_schema, edited_args)
    elif edited_args is not None:
        raise ApprovalConfigError(
            f"edited_args are only taken with decision='edit', not {decision!r}"
        )
    if decision == "expire" and policy == "safe_alternative" and request.alternative:
        args = request.alternative["args"]
    return {
        "approval_id": request.approval_id,
        "thread_id": request.thread_id,
        "action": request.action,
        "decision": decision,
        "by": by,
        "roles": list(roles),
        "decider_source": source or ("tether" if decision == "expire" else "caller"),
        "at": format_time(moment),
        "reason": reason,
        "policy": policy,
        "shown_args_sha256": request.args_sha256,
        "args": args,
        "args_sha256": None if args is None else sha256_of(args),
    }


def interrupt_id_for(state: StateSnapshot, approval_id: str) -> str | None:
    """The id of the pending interrupt carrying ``approval_id``, if the run waits on it."""
    for item in state.interrupts:
        value = item.value
        if isinstance(value, dict) and value.get("approval_id") == approval_id:
            return str(item.id)
    return None


def pending_payloads(state: StateSnapshot) -> list[dict[str, Any]]:
    """The approval payloads the thread is waiting on."""
    return [
        i.value
        for i in state.interrupts
        if isinstance(i.value, dict) and i.value.get("type") == PAYLOAD_TYPE
    ]


def not_pending(approval_id: str, thread_id: str) -> ApprovalNotPendingError:
    """The error for a request whose run is not paused at it."""
    return ApprovalNotPendingError(
        f"thread {thread_id!r} is not paused at approval {approval_id}; it may have been "
        "resumed already, or the graph given is not the one that runs this thread"
    )


def result_of(
    approval_id: str, doc: dict[str, Any], state: StateSnapshot, *, unfinished: bool
) -> DecisionResult:
    """The :class:`DecisionResult` after resuming.

    ``unfinished`` comes from :func:`tether.runtime.unfinished`: ``state.next``
    is empty for a run whose last step's writes are stored but not checkpointed.
    """
    return DecisionResult(
        approval_id=approval_id,
        decision=doc,
        pending=pending_payloads(state),
        finished=not unfinished,
        values=state.values,
    )


def resume_command(interrupt_id: str, doc: dict[str, Any]) -> Command[Any]:
    """The command that delivers ``doc`` to exactly one interrupt."""
    return Command(resume={interrupt_id: doc})
