"""Deciding for the current user: the checks approvals always make, the run resumed by a worker.

The decider is the request's user (:func:`tether.server._identity.current_user`),
never a field of the body: a body naming one (``by``, ``roles``, ...) is refused.
The decision goes through :func:`tether.approvals.decide_as` with the runtime's
resumer, the path ``Runtime.decide`` and ``tether approvals ... --runtime``
take: the request exists in the user's tenant, is undecided, the user is an
approver, it has not expired, the ``args_sha256`` is the one shown, edited
arguments validate against the request's schema, and a run waits on it. Only
then is the decision stored (once) and the waiting run enqueued again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tether.approvals import (
    AlreadyDecidedError,
    ApprovalConfigError,
    ApprovalError,
    ApprovalExpiredError,
    ApprovalNotPendingError,
    ApproverNotAllowedError,
    ArgsHashMismatchError,
    Decider,
    DecisionPayload,
    DecisionResult,
    InvalidEditError,
    UnknownApprovalError,
    decide_as,
)
from tether.runtime import Runtime, resumer
from tether.server._errors import ApiError
from tether.server._identity import User
from tether.server.inbox._queue import entry, tenant_runtime

__all__ = ["decide_for", "payload_from_body", "status_of"]

_STATUS: tuple[tuple[type[ApprovalError], int], ...] = (
    (UnknownApprovalError, 404),
    (ApproverNotAllowedError, 403),
    (AlreadyDecidedError, 409),
    (ApprovalExpiredError, 409),
    (ArgsHashMismatchError, 409),
    (ApprovalNotPendingError, 409),
    (InvalidEditError, 422),
    (ApprovalConfigError, 422),
)


# Said before deciding; the decision's own check (the run is paused at the request) stands.
_NO_RUN = {
    "orphaned": "no run waits on it any more (its run was cancelled or deleted), so deciding "
    "it would resume nothing",
    "starting": "its run is still executing; decide it once the run stops at it",
}


def status_of(error: ApprovalError) -> int:
    """The HTTP status answering an approval error."""
    for kind, status in _STATUS:
        if isinstance(error, kind):
            return status
    return 422


def payload_from_body(body: Any) -> DecisionPayload:
    """The decision a JSON body states: ``decision``, ``args_sha256``, ``reason`` and, for
    an edit, ``args`` (or ``edited_args``).

    Raises:
        ApiError: 422 when the body is malformed or tries to say who decides.
    """
    if not isinstance(body, Mapping):
        raise ApiError(422, f"a decision must be a JSON object, got {type(body).__name__}")
    fields = dict(body)
    if "args" in fields:
        if "edited_args" in fields:
            raise ApiError(422, "give the edited arguments once, as 'args'")
        fields["edited_args"] = fields.pop("args")
    try:
        payload = DecisionPayload.from_body(fields)
    except ApprovalConfigError as exc:
        raise ApiError(422, str(exc).replace("edited_args", "args")) from None
    if payload.decision not in ("approve", "edit", "reject"):
        raise ApiError(
            422, f"decision must be 'approve', 'edit' or 'reject', got {payload.decision!r}"
        )
    if payload.decision == "reject" and not (payload.reason or "").strip():
        raise ApiError(422, "a rejection needs a reason: the agent is told why")
    if payload.decision == "edit" and payload.edited_args is None:
        raise ApiError(422, "an edit needs 'args': the arguments to run instead")
    if payload.decision != "edit" and payload.edited_args is not None:
        raise ApiError(422, f"'args' are only taken with decision 'edit', not {payload.decision!r}")
    return payload


async def decide_for(
    runtime: Runtime, user: User, approval_id: str, payload: DecisionPayload
) -> DecisionResult:
    """Decide ``approval_id`` as ``user``; the waiting run is enqueued for a worker.

    Raises:
        ApprovalError: A check failed (see :func:`status_of` for its HTTP status);
            nothing was stored.
    """
    found = await entry(runtime, user, approval_id)  # 404 outside the user's tenant
    if found.state in _NO_RUN and found.view.decision is None:
        raise ApprovalNotPendingError(f"approval {approval_id}: {_NO_RUN[found.state]}")
    rt = tenant_runtime(runtime, user)
    try:
        decider = Decider(user.identity, user.roles, source=user.source)
    except ApprovalConfigError as exc:
        raise ApproverNotAllowedError(str(exc)) from None
    return await decide_as(
        await rt.checkpointer(),
        decider,
        approval_id,
        payload,
        resumer=resumer.RuntimeResumer(rt),
        thread_id=found.view.request.thread_id,
    )
