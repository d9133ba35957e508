"""Who may decide, and what happens when nobody does in time (expiry policies).

Every request expires. When it does, exactly one of these applies:

* :class:`Escalate`: a new set of approvers gets a new expiry; when that one
  passes too, the escalation's ``then`` policy applies;
* :class:`Stop`: the run ends with its partial result;
* :class:`SafeAlternative`: the :class:`Alternative` the agent proposed with the
  request runs instead.

Approve-on-timeout does not exist: a timeout never approves, and any
configuration that asks for it is rejected with :class:`ApprovalConfigError`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from tether.approvals.errors import ApprovalConfigError
from tether.approvals.hashing import args_sha256

__all__ = [
    "Alternative",
    "Approvers",
    "Escalate",
    "ExpiryPolicy",
    "SafeAlternative",
    "Stop",
    "expiry_policy",
    "policy_from_dict",
]

_NO_APPROVE_ON_TIMEOUT = (
    "approve-on-timeout does not exist in tether: a timeout never approves. Choose "
    "Escalate(to=Approvers(...)), Stop() or SafeAlternative() as the expiry policy"
)
_APPROVING_WORDS = ("approve", "accept", "allow", "grant", "permit", "auto")


@dataclass(frozen=True)
class Approvers:
    """Who may decide a request: named users, or anyone holding one of the roles.

    Args:
        users: User ids allowed to decide.
        roles: Roles whose holders may decide (the caller of ``decide`` states
            the decider's roles, e.g. from its identity provider).
    """

    users: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()

    def __init__(self, users: Iterable[str] = (), roles: Iterable[str] = ()) -> None:
        if isinstance(users, str) or isinstance(roles, str):
            raise ApprovalConfigError(
                "Approvers(users=..., roles=...) takes lists of names, not one string; "
                "write users=['alice']"
            )
        object.__setattr__(self, "users", tuple(str(u) for u in users))
        object.__setattr__(self, "roles", tuple(str(r) for r in roles))
        if not self.users and not self.roles:
            raise ApprovalConfigError(
                "an approval needs someone who may decide it: give Approvers(users=[...]) "
                "and/or roles=[...]"
            )

    def allows(self, user: str, roles: Iterable[str]) -> bool:
        """Whether ``user`` (holding ``roles``) may decide."""
        return user in self.users or bool(set(roles) & set(self.roles))

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"users": list(self.users), "roles": list(self.roles)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Approvers:
        """Inverse of :meth:`to_dict`."""
        return cls(users=data.get("users", ()), roles=data.get("roles", ()))


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
class Stop:
    """On expiry, end the run with its partial result."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"policy": "stop"}


@dataclass(frozen=True)
class SafeAlternative:
    """On expiry, run the alternative the agent proposed with the request.

    The request must carry an :class:`Alternative` (see ``request_approval``).
    """

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"policy": "safe_alternative"}


@dataclass(frozen=True)
class Escalate:
    """On expiry, hand the request to ``to`` with a fresh expiry of ``expires_in``.

    Args:
        to: The approvers after escalation.
        expires_in: How long they get.
        then: The policy when the escalated request expires too (default: stop).
    """

    to: Approvers
    expires_in: timedelta
    then: ExpiryPolicy = field(default_factory=Stop)

    def __post_init__(self) -> None:
        if not isinstance(self.to, Approvers):
            raise ApprovalConfigError(
                f"Escalate(to=...) must be Approvers(...), not {type(self.to).__name__}"
            )
        if not isinstance(self.expires_in, timedelta) or self.expires_in <= timedelta(0):
            raise ApprovalConfigError(
                f"Escalate(expires_in=...) must be a positive timedelta, got {self.expires_in!r}"
            )
        object.__setattr__(self, "then", expiry_policy(self.then))

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "policy": "escalate",
            "to": self.to.to_dict(),
            "expires_in_seconds": self.expires_in.total_seconds(),
            "then": self.then.to_dict(),
        }


ExpiryPolicy = Stop | SafeAlternative | Escalate


def expiry_policy(value: Any) -> ExpiryPolicy:
    """Validate an expiry policy given as an object or a name (``"stop"``, ``"safe_alternative"``).

    Raises:
        ApprovalConfigError: Unknown policy, or anything that would approve on
            timeout.
    """
    if isinstance(value, Stop | SafeAlternative | Escalate):
        return value
    if isinstance(value, str):
        name = value.strip().lower().replace("-", "_")
        if name == "stop":
            return Stop()
        if name in {"safe_alternative", "alternative"}:
            return SafeAlternative()
        if any(word in name for word in _APPROVING_WORDS):
            raise ApprovalConfigError(f"expiry policy {value!r}: {_NO_APPROVE_ON_TIMEOUT}")
        if name == "escalate":
            raise ApprovalConfigError(
                "expiry policy 'escalate' needs a target: write "
                "Escalate(to=Approvers(users=[...]), expires_in=timedelta(hours=...))"
            )
    if value is True or (isinstance(value, dict) and "approve" in str(value).lower()):
        raise ApprovalConfigError(f"expiry policy {value!r}: {_NO_APPROVE_ON_TIMEOUT}")
    raise ApprovalConfigError(
        f"unknown expiry policy {value!r}; use Escalate(...), Stop() or SafeAlternative() "
        "(or the names 'stop' / 'safe_alternative')"
    )


def policy_from_dict(data: dict[str, Any]) -> ExpiryPolicy:
    """Rebuild a policy from its stored JSON form."""
    name = data.get("policy")
    if name == "escalate":
        return Escalate(
            to=Approvers.from_dict(data["to"]),
            expires_in=timedelta(seconds=float(data["expires_in_seconds"])),
            then=policy_from_dict(data["then"]),
        )
    return expiry_policy(name)
