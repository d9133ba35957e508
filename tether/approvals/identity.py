"""Who decides, kept apart from what is decided: :class:`Decider` and :class:`DecisionPayload`.

In the library and the CLI, ``by=`` and roles are strings the caller states:
whoever can call ``decide`` (or run ``tether approvals`` against the database)
can decide as anyone, so the caller is the trust boundary. A server cannot
work that way: the person is whoever its authentication says, and the request
body is untrusted. So the decision path takes the two separately:

* a :class:`Decider` (user id, roles, and where that identity came from), built
  by the server from its authentication, never from the body;
* a :class:`DecisionPayload` (decision, shown args hash, edited arguments,
  reason), which has no identity field, and whose parser
  (:meth:`DecisionPayload.from_body`) refuses a body that tries to carry one.

:func:`tether.approvals.decide_as` takes both; :func:`tether.approvals.decide`
is the same path with ``by``/``roles`` as the trusted caller's ``Decider``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tether.approvals.errors import ApprovalConfigError

__all__ = ["RESERVED_PREFIX", "Decider", "DecisionPayload"]

RESERVED_PREFIX = "tether:"
"""User ids starting with this are tether's own deciders (the expiry sweep)."""

_PAYLOAD_FIELDS = ("decision", "args_sha256", "edited_args", "reason")
# Body keys that try to say who decides; refused with a message naming the fix.
_IDENTITY_FIELDS = frozenset(
    {"by", "roles", "role", "decider", "user", "user_id", "approver", "decided_by", "identity"}
)


@dataclass(frozen=True)
class Decider:
    """The person deciding, as the caller (or a server's authentication) vouches for them.

    Args:
        user_id: The person's id, compared with ``Approvers(users=...)``.
        roles: The roles they hold, compared with ``Approvers(roles=...)``.
        source: How the identity was established, recorded with the decision
            and its audit step: ``"caller"`` for the library's ``by=``,
            ``"cli"`` for ``tether approvals``, or a server's own label
            (``"oidc:https://issuer"``).
    """

    user_id: str
    roles: tuple[str, ...]
    source: str

    def __init__(self, user_id: str, roles: Iterable[str] = (), source: str = "caller") -> None:
        if not isinstance(user_id, str) or not user_id:
            raise ApprovalConfigError("a Decider needs a non-empty user id (str)")
        if user_id.startswith(RESERVED_PREFIX):
            raise ApprovalConfigError(
                f"user id {user_id!r} is reserved: ids starting with {RESERVED_PREFIX!r} "
                "are tether's own deciders (the expiry sweep)"
            )
        if isinstance(roles, str) or not isinstance(roles, Iterable):
            raise ApprovalConfigError(
                f"Decider roles must be a list of role names, got {roles!r}; "
                "write roles=['finance']"
            )
        names = tuple(roles)
        if not all(isinstance(r, str) and r for r in names):
            raise ApprovalConfigError(f"Decider roles must be non-empty strings, got {names!r}")
        if not isinstance(source, str) or not source:
            raise ApprovalConfigError("Decider source must be a non-empty label, e.g. 'cli'")
        object.__setattr__(self, "user_id", user_id)
        object.__setattr__(self, "roles", names)
        object.__setattr__(self, "source", source)


@dataclass(frozen=True)
class DecisionPayload:
    """What a person submits about a request; who they are is not part of it.

    Args:
        decision: ``"approve"``, ``"edit"`` or ``"reject"``.
        args_sha256: The ``args_sha256`` the person was shown; must match.
        edited_args: For ``"edit"``: the arguments to run instead.
        reason: Why; shown to the agent on reject and edit, and audited.
    """

    decision: str
    args_sha256: str | None = None
    edited_args: dict[str, Any] | None = None
    reason: str | None = None

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> DecisionPayload:
        """Parse an untrusted request body (decoded JSON).

        Raises:
            ApprovalConfigError: The body is not an object, misses ``decision``,
                has a field of the wrong type or an unknown field, or tries to
                say who decides (``by``, ``roles``, ``decider``, ...): that comes
                from the authenticated identity only.
        """
        if not isinstance(body, Mapping):
            raise ApprovalConfigError(
                f"a decision must be a JSON object, got {type(body).__name__}"
            )
        smuggled = sorted(k for k in body if str(k).lower() in _IDENTITY_FIELDS)
        if smuggled:
            raise ApprovalConfigError(
                f"a decision's body may not say who decides (it has {', '.join(smuggled)}): "
                "the decider is the authenticated user, passed as decider=Decider(...)"
            )
        unknown = sorted(str(k) for k in body if k not in _PAYLOAD_FIELDS)
        if unknown:
            raise ApprovalConfigError(
                f"unknown field {unknown[0]!r} in a decision; the fields are "
                f"{', '.join(_PAYLOAD_FIELDS)}"
            )
        if not isinstance(body.get("decision"), str):
            raise ApprovalConfigError("a decision needs 'decision': 'approve', 'edit' or 'reject'")
        for name in ("args_sha256", "reason"):
            if body.get(name) is not None and not isinstance(body[name], str):
                raise ApprovalConfigError(f"'{name}' must be a string")
        edited = body.get("edited_args")
        if edited is not None and not isinstance(edited, dict):
            raise ApprovalConfigError("'edited_args' must be a JSON object of arguments")
        return cls(
            decision=body["decision"],
            args_sha256=body.get("args_sha256"),
            edited_args=edited,
            reason=body.get("reason"),
        )
