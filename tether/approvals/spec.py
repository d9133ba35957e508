"""The validated arguments of one approval request (:class:`ApprovalSpec`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from tether.approvals.errors import ApprovalConfigError
from tether.approvals.hashing import to_json_value
from tether.approvals.policies import Approvers, ExpiryPolicy, SafeAlternative, expiry_policy
from tether.approvals.request import Alternative
from tether.approvals.schemas import register_args_schema

__all__ = ["ApprovalSpec", "Observations", "Reader", "make_spec"]

Reader = Callable[[], Any]
Observations = Mapping[str, Any] | Callable[[], Any]


@dataclass(frozen=True)
class ApprovalSpec:
    """The validated arguments of one ``request_approval`` call."""

    action: str
    args: dict[str, Any]
    why: str
    affects: str
    if_denied: str
    observations: Observations
    approvers: Approvers
    expires_in: timedelta
    on_expiry: ExpiryPolicy
    depends_on: Mapping[str, Reader]
    alternative: Alternative | None
    args_schema: type[BaseModel] | None
    key: str | None


def make_spec(**kw: Any) -> ApprovalSpec:
    """Validate ``request_approval``'s keyword arguments.

    Raises:
        ApprovalConfigError: What is wrong and how to write it.
    """
    action = kw["action"]
    if not isinstance(action, str) or not action:
        raise ApprovalConfigError(
            f"action must be a non-empty str naming the action, got {action!r}"
        )
    approvers = kw["approvers"]
    if not isinstance(approvers, Approvers):
        raise ApprovalConfigError(
            f"approvers must be Approvers(users=[...], roles=[...]), not {type(approvers).__name__}"
        )
    expires_in = kw["expires_in"]
    if not isinstance(expires_in, timedelta) or expires_in <= timedelta(0):
        raise ApprovalConfigError(
            f"expires_in must be a positive timedelta (every request expires), got {expires_in!r}"
        )
    on_expiry = expiry_policy(kw["on_expiry"])
    policies = [on_expiry]
    while hasattr(policies[-1], "then"):
        policies.append(policies[-1].then)
    alternative = kw["alternative"]
    if any(isinstance(p, SafeAlternative) for p in policies) and alternative is None:
        raise ApprovalConfigError(
            f"the expiry policy of {action!r} is SafeAlternative() but no alternative was "
            "proposed; pass alternative=Alternative(action=..., args=..., description=...)"
        )
    if alternative is not None and not isinstance(alternative, Alternative):
        raise ApprovalConfigError("alternative must be an Alternative(action=..., args=...)")
    depends_on = dict(kw["depends_on"] or {})
    for name, reader in depends_on.items():
        if not callable(reader):
            raise ApprovalConfigError(
                f"depends_on[{name!r}] must be a callable returning a version"
            )
    schema = kw["args_schema"]
    if schema is not None:
        if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            raise ApprovalConfigError("args_schema must be a pydantic BaseModel subclass")
        register_args_schema(action, schema)
    args = to_json_value(kw["args"], what=f"the arguments of {action!r}")
    if not isinstance(args, dict):
        raise ApprovalConfigError(f"the arguments of {action!r} must be a dict of named values")
    return ApprovalSpec(
        action=action,
        args=args,
        why=str(kw["why"]),
        affects=str(kw["affects"]),
        if_denied=str(kw["if_denied"]),
        observations=kw["observations"] or {},
        approvers=approvers,
        expires_in=expires_in,
        on_expiry=on_expiry,
        depends_on=depends_on,
        alternative=alternative,
        args_schema=schema,
        key=kw["key"],
    )


# -- the operations the logic asks its driver to perform ---------------------------------
