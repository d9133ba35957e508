"""Keyed hashes for identifiers stored in clear, under a secret kept in the store.

With encryption on, an identifier that is derived from user data and stored or
shown in clear (a durable tool's record key without a tool-call id, an approval
id, an idempotency key) is an HMAC-SHA256 instead of a plain SHA-256: a plain
hash of a small argument (an amount) is found again by trying every value.

The HMAC key is not derived from the encryption keys, because those rotate and
the identifiers must not: replay finds a recorded step by recomputing its key,
and an approval id is what an approver types. It is a random 32-byte secret,
created the first time a store is opened with encryption and kept in the store
itself as an encrypted record (kind ``store_secret``, thread
``__tether_store__``), so every worker reads the same one and ``tether keys
rotate`` re-wraps it like any other record. Anyone holding the encryption key
can read it; anyone without it sees only HMACs.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import time
from typing import TYPE_CHECKING

from tether.checkpointing import aad
from tether.store._ownership import NO_RUN

if TYPE_CHECKING:
    from tether.store._record import RecordStore

__all__ = ["SECRET_KEY", "SECRET_KIND", "SECRET_THREAD", "KeyedHash", "load_keyed_hash"]

SECRET_KIND = "store_secret"
SECRET_KEY = "keyed-hash"
SECRET_THREAD = "__tether_store__"
"""The thread id the secret is filed under (it belongs to no run; do not delete it)."""
_SECRET_BYTES = 32


class KeyedHash:
    """HMAC-SHA256 over :func:`~tether.checkpointing.encryption.aad` (domain, *parts).

    Args:
        secret: The store's 32-byte secret.
    """

    __slots__ = ("_secret",)

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def __repr__(self) -> str:  # never print the secret
        return "KeyedHash(<secret>)"

    def hexdigest(self, domain: str, *parts: str) -> str:
        """The hex HMAC of ``parts`` under ``domain`` (a label from ``binding``)."""
        return hmac.new(self._secret, aad(domain, *parts), hashlib.sha256).hexdigest()


async def load_keyed_hash(store: RecordStore) -> KeyedHash:
    """The store's keyed hash, creating its secret the first time (put-if-absent).

    Raises:
        RecordStoreError: The stored secret is malformed.
        EncryptionError: The stored secret cannot be decrypted with the ring.
    """
    from tether.store._record import RecordStoreError  # record.py imports this module

    record = await store.get(SECRET_KIND, SECRET_KEY)
    if record is None:
        fresh = base64.b64encode(os.urandom(_SECRET_BYTES)).decode()
        value = {"secret": fresh, "created_at": time.time()}
        # Two workers may race here: put-if-absent keeps one, and both read it back.
        await store.insert(SECRET_KIND, SECRET_KEY, value, thread_id=SECRET_THREAD, run_id=NO_RUN)
        record = await store.get(SECRET_KIND, SECRET_KEY)
    try:
        secret = base64.b64decode(str(record.value["secret"]), validate=True)  # type: ignore[union-attr]
    except (AttributeError, KeyError, binascii.Error, ValueError):
        secret = b""
    if len(secret) != _SECRET_BYTES:
        raise RecordStoreError(
            f"the store's keyed-hash secret (record {SECRET_KIND!r} {SECRET_KEY!r}) is missing "
            "or malformed; restore it from a backup: identifiers of recorded steps and "
            "approvals depend on it"
        )
    return KeyedHash(secret)
