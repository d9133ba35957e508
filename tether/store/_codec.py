"""How records and steps are stored as text: JSON, sealed with associated data when encrypted.

Associated data (:mod:`tether.checkpointing.binding`): a record is bound to its
thread, kind and key, a step to its thread and index, each under its own domain
label; version-1 envelopes were bound to ``|``-joined text and still read.

A thread's records and steps are sealed under the thread's data key (envelope
version 3, :mod:`tether.store._data_keys`) when the caller passes one;
version-2 envelopes (under a ring key, written before data keys) still read.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

from tether.checkpointing import ENV_KEYS, MissingKeyError, binding, data_key_named_in_base64
from tether.store._chain import step_digest
from tether.store._keyed import KeyedHash
from tether.store._types import Cipher, RawRecord, Record, RecordStoreError, StepPayload

__all__ = ["RecordCodec", "check_names"]

# Marks a stored value as ciphertext; plain JSON always starts with "{".
_ENCRYPTED = "enc1:"


def check_names(kind: str, key: str) -> None:
    """Refuse a kind or key no backend can file (``':'`` and ``'@'`` separate Redis key parts)."""
    if not isinstance(kind, str) or not kind or any(c in kind for c in ":|@"):
        raise RecordStoreError(
            f"record kind {kind!r} must be a non-empty str without ':', '|' or '@' "
            "(use a short identifier such as 'model' or 'budget')"
        )
    if not isinstance(key, str) or not key:
        raise RecordStoreError(f"record key {key!r} must be a non-empty str")


def _sealed(cipher: Cipher, text: str, aad: bytes, data_key: Any) -> str:
    """``text`` encrypted and bound to ``aad``, as stored."""
    blob = cipher.encrypt(text.encode(), aad, data_key=data_key)
    return _ENCRYPTED + base64.b64encode(blob).decode("ascii")


def _json(value: dict[str, Any]) -> str:
    if not isinstance(value, dict):
        raise RecordStoreError(f"record values must be dicts, got {type(value).__name__}")
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise RecordStoreError(
            f"record value is not JSON-serializable ({exc}); store only str, numbers, "
            "bools, None, lists and dicts"
        ) from exc


class RecordCodec:
    """Encodes values for a driver and decodes what it returns, with or without a cipher."""

    def __init__(self, cipher: Cipher | None) -> None:
        self.cipher = cipher

    def wanted_key(self, payload: str) -> str | None:
        """The data key a stored value is sealed under (``None``: a ring key, or clear)."""
        if self.cipher is None or not payload.startswith(_ENCRYPTED):
            return None
        return data_key_named_in_base64(payload[len(_ENCRYPTED) :])

    def _decode(
        self, payload: str, aad: bytes, v1_aad: bytes, what: str, data_key: Any
    ) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self._open(payload, aad, v1_aad, what, data_key))
        return value

    def _open(self, payload: str, aad: bytes, v1_aad: bytes, what: str, data_key: Any) -> str:
        """The JSON text of a stored value, decrypted and authenticated when it is sealed."""
        if payload.startswith(_ENCRYPTED):
            if self.cipher is None:
                raise MissingKeyError(
                    f"{what} is encrypted but the checkpointer was opened without a key; set "
                    f"{ENV_KEYS} to the key ring the store was written with (or pass "
                    "encryption=KeyRing(...))"
                )
            blob = base64.b64decode(payload[len(_ENCRYPTED) :])
            return self.cipher.decrypt(blob, aad, what, v1_aad=v1_aad, data_key=data_key).decode()
        if self.cipher is not None and not getattr(self.cipher, "allow_plaintext", False):
            raise RecordStoreError(
                f"{what} is stored in plaintext but encryption is on; refusing to "
                "trust an unauthenticated value (it may have been written by hand)"
            )
        return payload

    def raw(  # noqa: PLR0917 - the stored record's fields, in order
        self,
        kind: str,
        key: str,
        value: dict[str, Any],
        thread_id: str,
        run_id: str | None,
        data_key: Any = None,
    ) -> RawRecord:
        """The stored form of a record (``run_id`` already resolved)."""
        check_names(kind, key)
        thread = str(thread_id)
        payload = _json(value)
        if self.cipher is not None:  # (the associated data is built only to seal)
            payload = _sealed(self.cipher, payload, binding.record(thread, kind, key), data_key)
        return RawRecord(kind, key, thread, payload, time.time(), run_id)

    def step(
        self,
        thread: str,
        step: dict[str, Any],
        run_id: str | None,
        keyed: KeyedHash | None,
        data_key: Any = None,
    ) -> StepPayload:
        """The stored form of a step, sealed once its index is known (it is bound).

        ``keyed`` is the store's keyed hash (encrypted stores), for the chain digest.
        """
        text = _json(step)  # refuses bad input before anything is written
        digest = step_digest(keyed, thread, text)
        cipher = self.cipher
        if cipher is None:
            return StepPayload(lambda index: text, text, run_id, digest)
        return StepPayload(
            lambda index: _sealed(cipher, text, binding.step(thread, index), data_key),
            None,
            run_id,
            digest,
        )

    def record(self, raw: RawRecord, data_key: Any = None) -> Record:
        """A stored record, decoded and authenticated (``data_key``: its thread's)."""
        thread, kind, key = raw.thread_id, raw.kind, raw.key
        value = self._decode(
            raw.payload,
            binding.record(thread, kind, key),
            binding.record_v1(thread, kind, key),
            f"record {kind!r} {key!r} of thread {thread!r}",
            data_key,
        )
        return Record(kind, key, thread, value, raw.created_at, raw.run_id)

    def step_value(
        self, thread: str, index: int, payload: str, data_key: Any = None
    ) -> dict[str, Any]:
        """A stored step, decoded and authenticated."""
        value: dict[str, Any] = json.loads(self.step_text(thread, index, payload, data_key))
        return value

    def step_text(self, thread: str, index: int, payload: str, data_key: Any = None) -> str:
        """A stored step's JSON text as it was written, decrypted and authenticated."""
        return self._open(
            payload,
            binding.step(thread, index),
            binding.step_v1(thread, index),
            f"step {index} of thread {thread!r}",
            data_key,
        )
