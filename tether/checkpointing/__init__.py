"""Checkpointers for every backend tether supports, opened from one URL.

``open_checkpointer(url)`` yields a set-up LangGraph ``BaseCheckpointSaver``
for ``memory://``, ``sqlite:///``, ``postgresql://`` or ``redis://``, each with
the full capability set of LangGraph's conformance suite.

The names below are the API; tether's other layers import these too. The
public modules are :mod:`tether.checkpointing.encryption` (key rings and their
errors), :mod:`tether.checkpointing.binding` (what each sealed value is bound
to), :mod:`tether.checkpointing.rotation` (re-sealing under a new key; its
names here load on first use) and :mod:`tether.checkpointing.redis`. Every
module whose name starts with ``_`` is internal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether._lazy import lazy_attributes
from tether.checkpointing._backends import backend_of, known_backends
from tether.checkpointing._cascade import check_run_ids
from tether.checkpointing._delegating import DelegatingSaver, innermost
from tether.checkpointing._key_store import ENV_DATA_KEYS_URL, KeyStore, key_store_of
from tether.checkpointing._opener import open_checkpointer
from tether.checkpointing._sync import open_checkpointer_sync
from tether.checkpointing._url import SCHEMES, CheckpointerURL, parse_url, redact
from tether.checkpointing.encryption import (
    ENV_KEYS,
    DataKey,
    EncryptionError,
    ErasedDataKeyError,
    KeyRing,
    MissingKeyError,
    PlaintextRefusedError,
    TamperedCiphertextError,
    aad,
    data_key_named_in_base64,
    key_ring_for,
)

if TYPE_CHECKING:
    from tether.checkpointing._fencing import (
        assert_fence,
        drop_fence,
        fence_errors,
        fenced_transaction,
        hold_fence,
        install_sqlite_fence,
        lease_lost,
        queued_transaction,
        scope_reads,
        transaction_fence,
    )
    from tether.checkpointing._postgres import abort_idle_transactions
    from tether.checkpointing.rotation import RotationReport, rotate_keys

__all__ = [
    "ENV_DATA_KEYS_URL",
    "ENV_KEYS",
    "SCHEMES",
    "CheckpointerURL",
    "DataKey",
    "DelegatingSaver",
    "EncryptionError",
    "ErasedDataKeyError",
    "KeyRing",
    "KeyStore",
    "MissingKeyError",
    "PlaintextRefusedError",
    "RotationReport",
    "TamperedCiphertextError",
    "aad",
    "abort_idle_transactions",
    "assert_fence",
    "backend_of",
    "check_run_ids",
    "data_key_named_in_base64",
    "drop_fence",
    "fence_errors",
    "fenced_transaction",
    "hold_fence",
    "innermost",
    "install_sqlite_fence",
    "key_ring_for",
    "key_store_of",
    "known_backends",
    "lease_lost",
    "open_checkpointer",
    "open_checkpointer_sync",
    "parse_url",
    "queued_transaction",
    "redact",
    "rotate_keys",
    "scope_reads",
    "transaction_fence",
]

__getattr__ = lazy_attributes(
    __name__,
    {
        "RotationReport": "tether.checkpointing.rotation",
        "rotate_keys": "tether.checkpointing.rotation",
        # Every PostgreSQL pool of tether's sets it (loaded with psycopg).
        "abort_idle_transactions": "tether.checkpointing._postgres",
        # In-transaction fencing of a worker's writes (loaded by the savers that use it).
        **dict.fromkeys(
            (
                "assert_fence",
                "drop_fence",
                "fence_errors",
                "fenced_transaction",
                "hold_fence",
                "install_sqlite_fence",
                "lease_lost",
                "queued_transaction",
                "scope_reads",
                "transaction_fence",
            ),
            "tether.checkpointing._fencing",
        ),
    },
)
