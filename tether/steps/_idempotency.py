"""Idempotency for durable tools: the key a tool gets, and what a reconcile hook returns."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, create_model

from tether.checkpointing import aad, binding

if TYPE_CHECKING:
    from tether.store import KeyedHash

__all__ = [
    "KEY_PARAM",
    "Reconcile",
    "ReconcileResult",
    "args_digest",
    "hide_key",
    "idempotency_key",
]

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


def idempotency_key(
    tenant: str,
    thread_id: str,
    step: str,
    tool: str,
    args_hash: str,
    *,
    keyed: KeyedHash | None = None,
) -> str:
    """The key a tool gets: the same for the same (tenant, thread, step, tool, args).

    Different tuples always get different keys. With ``keyed`` (encryption on) it
    is an HMAC, so nobody who sees the key can test guesses of the arguments.
    Otherwise it is a SHA-256 of the parts joined with ``"|"`` where that text is
    unambiguous (no ``"|"`` or NUL in tenant, thread, tool or args hash: the step
    is then the middle), which keeps the keys earlier versions handed to outside
    systems; else of their length-prefixed encoding, which never equals such text.
    """
    parts = (tenant, thread_id, step, tool, args_hash)
    if keyed is not None:
        return "tether-" + keyed.hexdigest(binding.IDEMPOTENCY_KEY, *parts)[:40]
    if any("|" in p or "\0" in p for p in (tenant, thread_id, tool, args_hash)):
        text = aad(binding.IDEMPOTENCY_KEY, *parts)  # starts with a NUL byte, unlike joined text
    else:
        text = "|".join(parts).encode()
    return "tether-" + hashlib.sha256(text).hexdigest()[:40]


def args_digest(args_hash: str, keyed: KeyedHash | None) -> str:
    """What a record key shows of a call's arguments: their hash, keyed when encrypting."""
    return args_hash if keyed is None else keyed.hexdigest(binding.TOOL_ARGS, args_hash)


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
