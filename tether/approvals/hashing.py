"""Canonical JSON and its SHA-256: what binds an approval to the exact arguments shown."""

from __future__ import annotations

import hashlib
import json
import math
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from tether.approvals.errors import ApprovalConfigError
from tether.checkpointing.binding import APPROVAL_ID

if TYPE_CHECKING:
    from tether.store.keyed import KeyedHash

__all__ = [
    "approval_id_for",
    "args_sha256",
    "canonical_json",
    "keyed_approval_id",
    "to_json_value",
]


def to_json_value(value: Any, *, what: str = "value") -> Any:
    """``value`` as plain JSON data (dicts, lists, str, int, float, bool, None).

    Pydantic models are dumped in JSON mode; tuples become lists. Anything else
    that JSON cannot carry is an error, because an approver must see exactly
    what will run.

    Raises:
        ApprovalConfigError: ``value`` holds something JSON cannot represent.
    """
    if isinstance(value, BaseModel):
        return to_json_value(value.model_dump(mode="json"), what=what)
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ApprovalConfigError(f"{what} holds {value!r}; NaN and infinity are not JSON")
        return value
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ApprovalConfigError(
                    f"{what} has a non-string key {key!r}; JSON object keys must be strings"
                )
            out[key] = to_json_value(item, what=what)
        return out
    if isinstance(value, list | tuple):
        return [to_json_value(item, what=what) for item in value]
    raise ApprovalConfigError(
        f"{what} holds a {type(value).__name__}, which is not JSON; pass str, numbers, bools, "
        "None, lists, dicts or pydantic models"
    )


def canonical_json(value: Any) -> str:
    """The one text of ``value``: sorted keys, no spaces, UTF-8 characters kept."""
    return json.dumps(
        to_json_value(value),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )


def args_sha256(args: Any) -> str:
    """The hex SHA-256 of ``args``' canonical JSON (equal data always hash equal)."""
    return hashlib.sha256(canonical_json(args).encode("utf-8")).hexdigest()


def approval_id_for(thread_id: str, checkpoint_ns: str, key: str, revision: int) -> str:
    """The deterministic id of a request: same step, same key, same revision -> same id.

    A replayed step therefore raises the same request again, never a new one;
    a request voided as stale is followed by revision + 1, a new id.
    """
    text = "\x1f".join((str(thread_id), checkpoint_ns, key, str(revision)))
    return "apr_" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def keyed_approval_id(
    thread_id: str, checkpoint_ns: str, key: str, revision: int, keyed: KeyedHash
) -> str:
    """An approval id under the store's keyed hash (encryption on).

    The key may be ``"<action>:<args sha256>"``, so a plain hash of it would let
    anyone who sees the id test guesses of the arguments; an HMAC does not. The
    approver still compares the plain ``args_sha256`` shown beside it.
    """
    digest = keyed.hexdigest(APPROVAL_ID, str(thread_id), checkpoint_ns, key, str(revision))
    return "apr_" + digest[:24]
