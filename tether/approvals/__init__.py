"""Human-in-the-loop approvals as stored state.

A request is stored and raised as a LangGraph interrupt (:func:`request_approval`,
or a tool wrapped by :func:`requires_approval`); a person's decision comes back
through :func:`decide`, checked against the request (who, when, which
arguments), recorded exactly once, and delivered with
``Command(resume={interrupt_id: ...})``. Stale preconditions void an approval;
every request expires under a policy that never approves
(:func:`expire_due`). Every request and decision is a step in the thread's log.
"""

from tether.approvals.deciding import (
    decide,
    decide_as,
    decide_as_sync,
    decide_sync,
    resume_decided,
    resume_decided_sync,
)
from tether.approvals.decisions import DecisionResult
from tether.approvals.errors import (
    AlreadyDecidedError,
    ApprovalConfigError,
    ApprovalError,
    ApprovalExpiredError,
    ApprovalMismatchError,
    ApprovalNotPendingError,
    ApproverNotAllowedError,
    ArgsHashMismatchError,
    InvalidEditError,
    UnknownApprovalError,
)
from tether.approvals.expiry import ExpiryAction, expire_due, expire_due_sync
from tether.approvals.gate import arequest_approval, request_approval
from tether.approvals.hashing import args_sha256, canonical_json
from tether.approvals.identity import Decider, DecisionPayload
from tether.approvals.inbox import (
    ApprovalView,
    get_approval,
    get_approval_sync,
    list_approvals,
    list_approvals_sync,
)
from tether.approvals.outcome import ApprovalOutcome
from tether.approvals.policies import Approvers, Escalate, SafeAlternative, Stop
from tether.approvals.request import Alternative, ApprovalRequest
from tether.approvals.tool import ApprovalGatedTool, requires_approval, stopped_by_expiry

__all__ = [
    "AlreadyDecidedError",
    "Alternative",
    "ApprovalConfigError",
    "ApprovalError",
    "ApprovalExpiredError",
    "ApprovalGatedTool",
    "ApprovalMismatchError",
    "ApprovalNotPendingError",
    "ApprovalOutcome",
    "ApprovalRequest",
    "ApprovalView",
    "ApproverNotAllowedError",
    "Approvers",
    "ArgsHashMismatchError",
    "Decider",
    "DecisionPayload",
    "DecisionResult",
    "Escalate",
    "ExpiryAction",
    "InvalidEditError",
    "SafeAlternative",
    "Stop",
    "UnknownApprovalError",
    "arequest_approval",
    "args_sha256",
    "canonical_json",
    "decide",
    "decide_as",
    "decide_as_sync",
    "decide_sync",
    "expire_due",
    "expire_due_sync",
    "get_approval",
    "get_approval_sync",
    "list_approvals",
    "list_approvals_sync",
    "request_approval",
    "requires_approval",
    "resume_decided",
    "resume_decided_sync",
    "stopped_by_expiry",
]
