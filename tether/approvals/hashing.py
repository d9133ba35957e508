"""Canonical JSON and its SHA-256: what binds an approval to the exact arguments shown.

The form is :mod:`tether._canonical`'s, in the spelling approvals have always
been stored with: UTF-8 text as the approver reads it (``ensure_ascii=False``)
and no NaN or infinity (arguments are stored and shown as JSON).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from tether._canonical import CanonicalJSONError, to_plain
from tether._canonical import canonical_json as _canonical_json
from tether.approvals.errors import ApprovalConfigError
from tether.checkpointing import binding

if TYPE_CHECKING:
    from tether.store import KeyedHash

__all__ = [
    "ArgsNotJSONError",
    "approval_id_for",
    "args_sha256",
    "canonical_json",
    "keyed_approval_id",
    "to_json_value",
]


class ArgsNotJSONError(ApprovalConfigError, CanonicalJSONError):
    """Approval data holds something JSON cannot carry (it names the type and the path).

    An :class:`ApprovalConfigError`, as such values always were, and the
    :class:`~tether._canonical.CanonicalJSONError` every canonical hash raises.
    """


def to_json_value(value: Any, *, what: str = "value") -> Any:
    """``value`` as plain JSON data (dicts, lists, str, int, float, bool, None).

    Pydantic models are dumped in JSON mode; mappings become dicts, tuples and
    other sequences lists (the rules of :mod:`tether._canonical`). Anything else
    that JSON cannot carry is an error, because an approver must see exactly
    what will run.

    Raises:
        ApprovalConfigError: ``value`` holds something JSON cannot represent.
    """
    return to_plain(value, allow_nan=False, ensure_utf8=True, what=what, error=ArgsNotJSONError)


def canonical_json(value: Any) -> str:
    """The one text of ``value``: sorted keys, no spaces, UTF-8 characters kept."""
    return _canonical_json(value, ensure_ascii=False, allow_nan=False, error=ArgsNotJSONError)


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
    digest = keyed.hexdigest(binding.APPROVAL_ID, str(thread_id), checkpoint_ns, key, str(revision))
    return "apr_" + digest[:24]
