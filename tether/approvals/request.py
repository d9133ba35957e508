"""The approval request: what an approver sees, stored as a record and raised as the interrupt.

One request is one JSON document. It is stored (record kind ``approval``,
keyed by the approval id) before the run pauses, and the same document is the
value of the LangGraph interrupt. It holds everything a person needs to decide
without re-deriving the agent's reasoning: the action and its resolved
arguments with their SHA-256, why, what it affects, what happens if denied,
the observations the agent acted on (with their hash), who may decide, when
the request expires and what happens then, and the versions of the records
the action depends on.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from tether.approvals.hashing import args_sha256
from tether.approvals.policies import Approvers, ExpiryPolicy, policy_from_dict

__all__ = [
    "APPROVAL_KIND",
    "DECISION_KIND",
    "PAYLOAD_TYPE",
    "Alternative",
    "ApprovalRequest",
    "approval_id_for",
    "format_time",
    "parse_time",
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


def approval_id_for(thread_id: str, checkpoint_ns: str, key: str, revision: int) -> str:
    """The deterministic id of a request: same step, same key, same revision -> same id.

    A replayed step therefore raises the same request again, never a new one;
    a request voided as stale is followed by revision + 1, a new id.
    """
    text = "\x1f".join((str(thread_id), checkpoint_ns, key, str(revision)))
    return "apr_" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


@dataclass(frozen=True)
class Alternative:
    """A safer action the agent proposes, taken if the request expires under ``SafeAlternative``.

    Attributes:
        action: The alternative action's name (for a gated tool: its own name or
            another tool's).
        args: Its arguments.
        description: One line for the approver.
    """

    action: str
    args: dict[str, Any]
    description: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON form, with the arguments' hash."""
        return {
            "action": self.action,
            "args": self.args,
            "args_sha256": args_sha256(self.args),
            "description": self.description,
        }


@dataclass(frozen=True)
class ApprovalRequest:
    """A stored approval request (see the module docstring for the fields' meaning)."""

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
