"""What a gate returns to the agent once a request is settled: :class:`ApprovalOutcome`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from tether.approvals.request import ApprovalRequest

__all__ = ["ApprovalOutcome", "DecisionKind"]

DecisionKind = Literal["approve", "edit", "reject", "expire"]


def _changes(before: dict[str, Any], after: dict[str, Any]) -> str:
    keys = sorted(set(before) | set(after))
    parts = [
        f"{k}: {before.get(k)!r} -> {after.get(k)!r}" for k in keys if before.get(k) != after.get(k)
    ]
    return ", ".join(parts) or "no change"


@dataclass(frozen=True)
class ApprovalOutcome:
    """The settled request, as the step that asked for it sees it.

    Attributes:
        request: The request that was decided.
        decision: ``approve``, ``edit``, ``reject`` or ``expire``.
        by: Who decided (``tether:expiry`` when the expiry policy did).
        reason: The decider's reason, if given.
        action: The action to run: the request's, or the alternative's when an
            expired request fell back to its safe alternative.
        args: The arguments to run it with (edited ones after an edit), or
            ``None`` when nothing may run (rejected, or stopped on expiry).
        args_sha256: The SHA-256 of ``args``.
        policy: For ``expire``: ``stop`` or ``safe_alternative``.
    """

    request: ApprovalRequest
    decision: DecisionKind
    by: str
    reason: str | None
    action: str
    args: dict[str, Any] | None
    args_sha256: str | None
    policy: str | None = None

    @property
    def approval_id(self) -> str:
        """The id of the settled request."""
        return self.request.approval_id

    @property
    def proceed(self) -> bool:
        """Whether an action may run now (``action`` with ``args``)."""
        return self.args is not None

    @property
    def stop(self) -> bool:
        """Whether the run should end here with its partial result (expired, policy ``stop``)."""
        return self.decision == "expire" and self.policy == "stop"

    @property
    def edited(self) -> bool:
        """Whether the approver changed the arguments."""
        return self.decision == "edit"

    @property
    def observation(self) -> str:
        """What the agent should be told, so it adapts instead of retrying blindly."""
        req = self.request
        why = f" Reason: {self.reason}." if self.reason else ""
        if self.decision == "approve":
            return f"{self.by} approved {req.action}.{why}"
        if self.decision == "edit":
            assert self.args is not None
            return (
                f"{self.by} edited the arguments of {req.action} before approving "
                f"({_changes(req.args, self.args)}).{why} It runs with the edited arguments "
                f"(sha256 {self.args_sha256})."
            )
        if self.decision == "reject":
            return (
                f"{self.by} rejected {req.action}.{why} Do not retry it as it was; "
                f"{req.if_denied or 'tell the user and choose another course'}."
            )
        if self.policy == "safe_alternative":
            return (
                f"Nobody decided on {req.action} before {req.expires_at}; the safe alternative "
                f"{self.action} runs instead (timeouts never approve)."
            )
        return (
            f"Nobody decided on {req.action} before {req.expires_at}; the run stops here "
            f"(timeouts never approve). {req.if_denied}".rstrip()
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON summary for tool results and logs."""
        return {
            "approval_id": self.approval_id,
            "decision": self.decision,
            "by": self.by,
            "reason": self.reason,
            "action": self.action,
            "args_sha256": self.args_sha256,
            "policy": self.policy,
            "note": self.observation,
        }
