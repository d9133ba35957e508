"""Idempotency for durable tools: the key a tool gets, and what a reconcile hook returns."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, create_model

__all__ = ["KEY_PARAM", "Reconcile", "ReconcileResult", "hide_key", "idempotency_key"]

KEY_PARAM = "idempotency_key"


@dataclass(frozen=True)
class ReconcileResult:
    """What a ``reconcile`` hook returns when it could read the outside world back.

    ``ReconcileResult(output)`` says the action happened; the run continues
    with ``output`` as if the tool had returned it. ``ReconcileResult.unknown(reason)``
    says the hook cannot tell (the service is down, the record is ambiguous):
    the call raises ``ToolOutcomeUnknownError`` with the reason, and the next
    attempt asks the hook again. A hook returns ``None`` when the action did not
    happen, and nothing else.

    Attributes:
        output: The tool's result as read back from the outside world.
        outcome: ``"happened"`` or ``"unknown"``.
        reason: For ``"unknown"``: why the hook cannot tell, for the operator.
    """

    output: Any
    outcome: Literal["happened", "unknown"] = "happened"
    reason: str = ""

    def __post_init__(self) -> None:
        if self.outcome not in ("happened", "unknown"):
            raise ValueError(
                f"ReconcileResult outcome must be 'happened' or 'unknown', got {self.outcome!r}"
            )

    @classmethod
    def unknown(cls, reason: str = "") -> ReconcileResult:
        """The hook cannot tell whether the action happened; the call is refused."""
        return cls(None, "unknown", reason)


Reconcile = Callable[
    [dict[str, Any], str], "ReconcileResult | Awaitable[ReconcileResult | None] | None"
]


def idempotency_key(tenant: str, thread_id: str, step: str, tool: str, args_hash: str) -> str:
    """The key a tool gets: the same for the same (tenant, thread, step, tool, args)."""
    digest = hashlib.sha256("|".join((tenant, thread_id, step, tool, args_hash)).encode())
    return "tether-" + digest.hexdigest()[:40]


def hide_key(schema: Any) -> Any:
    """``schema`` without the ``idempotency_key`` field, so the model never sees it."""
    if isinstance(schema, dict):
        hidden = json.loads(json.dumps(schema))
        hidden.get("properties", {}).pop(KEY_PARAM, None)
        if KEY_PARAM in hidden.get("required", []):
            hidden["required"].remove(KEY_PARAM)
        return hidden
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        fields = {n: (f.annotation, f) for n, f in schema.model_fields.items() if n != KEY_PARAM}
        return create_model(schema.__name__, __doc__=schema.__doc__, **fields)  # type: ignore[call-overload]
    return schema
