"""Human-in-the-loop approvals as stored state.

A request is stored and raised as a LangGraph interrupt (:func:`request_approval`,
or a tool wrapped by :func:`requires_approval`); a person's decision comes back
through :func:`decide`, checked against the request (who, when, which
arguments), recorded exactly once, and delivered with
``Command(resume={interrupt_id: ...})``. Stale preconditions void an approval;
every request expires under a policy that never approves
(:func:`expire_due`). Every request and decision is a step in the thread's log.

The names below are the whole API. The modules behind them are private:

* ``_request``: asking (``request_approval``, ``requires_approval``);
* ``_flow``: the asking protocol, written once as a generator of operations;
* ``_decide``: deciding (``decide``, ``decide_as``, ``settle``, ``resume_decided``, ``Decider``);
* ``_resuming``: who resumes a decided run (``Resumer``, ``GraphResumer``);
* ``_cancel``: cancelling the requests of a cancelled run (``cancel_pending``);
* ``_checks``: the checks a decision passes and the document it becomes;
* ``_expiry``: the expiry sweep (``expire_due``);
* ``_policies``: who may decide, and the expiry policies;
* ``_storage``: the stored request, the audit steps, and reading them back;
* ``_display``: escaping and the layout an approver reads;
* ``_io``: every operation on the store and the graph, performed sync or async;
* ``errors``: the errors, each naming the problem and the fix.
"""

from tether.approvals._cancel import cancel_pending, cancel_pending_sync
from tether.approvals._checks import build_decision, register_args_schema
from tether.approvals._copy import copy_settled
from tether.approvals._decide import (
    Decider,
    DecisionPayload,
    decide,
    decide_as,
    decide_as_sync,
    decide_sync,
    resume_decided,
    resume_decided_sync,
    settle,
    settle_sync,
)
from tether.approvals._display import (
    approval_fields,
    escape_json,
    escape_text,
    format_approval,
    format_approval_line,
)
from tether.approvals._expiry import ExpiryAction, expire_due, expire_due_sync
from tether.approvals._flow import ApprovalOutcome
from tether.approvals._policies import (
    Alternative,
    Approvers,
    Escalate,
    ExpiryPolicy,
    SafeAlternative,
    Stop,
    expiry_policy,
    policy_from_dict,
)
from tether.approvals._request import (
    ApprovalGatedTool,
    arequest_approval,
    request_approval,
    requires_approval,
    stopped_by_expiry,
)
from tether.approvals._resuming import DecisionResult, GraphResumer, Resumer, SyncResumer
from tether.approvals._storage import (
    APPROVAL_KIND,
    DECISION_KIND,
    ApprovalRequest,
    ApprovalView,
    get_approval,
    get_approval_sync,
    list_approvals,
    list_approvals_sync,
)
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
from tether.approvals.hashing import args_sha256, canonical_json
from tether.steps import on_replay_copy as _on_replay_copy

__all__ = [
    "APPROVAL_KIND",
    "DECISION_KIND",
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
    "ExpiryPolicy",
    "GraphResumer",
    "InvalidEditError",
    "Resumer",
    "SafeAlternative",
    "Stop",
    "SyncResumer",
    "UnknownApprovalError",
    "approval_fields",
    "arequest_approval",
    "args_sha256",
    "build_decision",
    "cancel_pending",
    "cancel_pending_sync",
    "canonical_json",
    "copy_settled",
    "decide",
    "decide_as",
    "decide_as_sync",
    "decide_sync",
    "escape_json",
    "escape_text",
    "expire_due",
    "expire_due_sync",
    "expiry_policy",
    "format_approval",
    "format_approval_line",
    "get_approval",
    "get_approval_sync",
    "list_approvals",
    "list_approvals_sync",
    "policy_from_dict",
    "register_args_schema",
    "request_approval",
    "requires_approval",
    "resume_decided",
    "resume_decided_sync",
    "settle",
    "settle_sync",
    "stopped_by_expiry",
]

# A replay answers each gate with the decision the run got (see tether.approvals._copy).
_on_replay_copy(copy_settled)
