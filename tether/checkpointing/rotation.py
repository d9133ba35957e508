"""Key rotation: re-seal every stored envelope under the key ring's active key.

Every envelope tether writes is covered: checkpoint channel values, pending
writes and sealed metadata, the record store (recorded model calls, tool
intents, approvals, budgets, the store's keyed-hash secret) and the step log.

Rotation rewrites the stored bytes in place, per backend, instead of reading
through the saver and writing back with ``aput``/``aput_writes``: upstream
upserts keep the existing row for channel blobs (PostgreSQL ``ON CONFLICT DO
NOTHING``) and ordinary writes (PostgreSQL, SQLite ``INSERT OR IGNORE``), so a
second ``aput`` would not replace anything. The associated data of an envelope
does not change when its key does, so each envelope is opened with its old key
and sealed with the active one, and the value itself is never deserialized.
Values sealed under a thread's own data key (envelope version 3) are left as
they are: the thread's data key, a record sealed by the ring, is what gets
re-wrapped, so rotating costs one write per thread instead of one per value.
With a data-key store (``data_keys_url``) the keys are re-wrapped there, and
any key still kept in the checkpointer's own store (written before the
data-key store was configured) where it is.
Envelopes of format version 1 are re-sealed in the current format (and its
binding) even when they already use the active key.

Safety:

* on PostgreSQL and SQLite each thread is rewritten in one transaction that
  holds its rows, so a thread is either fully old or fully new, and a worker
  writing to it meanwhile waits and then writes over the rotated value;
* on Redis each value is replaced by compare-and-set, so a worker's update (or
  deletion) made during the rotation is never undone;
* an old ciphertext is only ever replaced by a verified new one, and an
  envelope already current is skipped, so a rotation that was interrupted is
  finished by running it again;
* values stored in clear are counted, never touched (see ``docs/encryption.md``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from tether.checkpointing._backends import backend_of
from tether.checkpointing._delegating import DelegatingSaver, innermost
from tether.checkpointing._encrypted import EncryptedSaver
from tether.checkpointing._key_store import key_store_of
from tether.checkpointing._rotators import Counts, Rotator, ThreadPass
from tether.checkpointing.encryption import KeyRing
from tether.errors import ConfigurationError

__all__ = ["RotationReport", "encrypted_layer", "rotate_keys"]


@dataclass
class RotationReport:
    """What a rotation did so far.

    Attributes:
        threads_total: Threads found in the store (of checkpoints, records or steps).
        threads_done: Threads fully rewritten.
        rewrapped: Envelopes re-sealed under the active key, of every kind.
        current: Envelopes that already used the active key.
        plaintext: Values found stored in clear (left as they are).
        records: Of ``rewrapped``, records of the record store.
        steps: Of ``rewrapped``, entries of step logs.
        data_keys: Of ``records``, threads' data keys re-wrapped; the values
            sealed under them count as ``current``.
        thread_id: The thread just finished.
        active_key_id: The key everything is now sealed under.
    """

    threads_total: int = 0
    threads_done: int = 0
    rewrapped: int = 0
    current: int = 0
    plaintext: int = 0
    records: int = 0
    steps: int = 0
    data_keys: int = 0
    thread_id: str = ""
    active_key_id: str = ""

    def _add(self, counts: Counts) -> None:
        self.rewrapped += counts.rewrapped
        self.current += counts.current
        self.plaintext += counts.plaintext
        self.records += counts.records
        self.steps += counts.steps
        self.data_keys += counts.data_keys


def encrypted_layer(saver: BaseCheckpointSaver[Any]) -> EncryptedSaver:
    """The :class:`EncryptedSaver` among ``saver``'s layers.

    Raises:
        ConfigurationError: The saver was opened without encryption.
    """
    layer: BaseCheckpointSaver[Any] = saver
    while True:
        if isinstance(layer, EncryptedSaver):
            return layer
        if not isinstance(layer, DelegatingSaver):
            raise ConfigurationError(
                "key rotation needs a checkpointer opened with encryption: set "
                "TETHER_ENCRYPTION_KEYS='<new id>:<key>,<old id>:<key>' (new key first)"
            )
        layer = layer.inner


async def rotate_keys(
    saver: BaseCheckpointSaver[Any],
    *,
    progress: Callable[[RotationReport], None] | None = None,
) -> RotationReport:
    """Re-seal every checkpoint value, write, metadata, record and step under the active key.

    Args:
        saver: A checkpointer from ``open_checkpointer(..., encryption=ring)``
            where ``ring`` holds the new key first and every old key after it.
        progress: Called after each thread with the running totals.

    Returns:
        The totals. ``plaintext`` counts values stored in clear, which rotation
        does not encrypt.

    Raises:
        EncryptionError: An envelope cannot be opened (its key is not in the
            ring, or it was tampered with); threads finished before stay done.
    """
    from tether.store import (
        SECRET_THREAD,
        drop_cached,
        store_for,  # the store package builds on this one
    )

    layer = encrypted_layer(saver)
    backend = innermost(layer)
    entry = backend_of(backend)
    if entry is None:
        raise ConfigurationError(f"key rotation does not support {type(backend).__name__}")
    store = store_for(layer)
    rotators = [entry.rotator_for(backend, store.driver)]
    keys = key_store_of(backend)
    if keys is not None and store.key_records is not None:  # the data keys kept apart
        rotators.append(keys.entry.rotator_for(keys.saver, store.key_records.driver))
    report = RotationReport(active_key_id=layer.encryption.active_key_id)
    listed = [set(await rotator.threads()) for rotator in rotators]
    threads = sorted(set().union(*listed))
    if SECRET_THREAD in threads:  # the store's own records (its keyed-hash secret), first
        threads.remove(SECRET_THREAD)
        report._add(await _rewrite(layer.encryption, SECRET_THREAD, rotators, listed))
    report.threads_total = len(threads)
    for thread_id in threads:
        report._add(await _rewrite(layer.encryption, thread_id, rotators, listed))
        drop_cached(frozenset({thread_id}))  # unwrapped keys held here are read again
        report.threads_done += 1
        report.thread_id = thread_id
        if progress is not None:
            progress(report)
    return report


async def _rewrite(
    ring: KeyRing, thread_id: str, rotators: list[Rotator], listed: list[set[str]]
) -> Counts:
    """Re-seal one thread in each store that lists it (the data-key store's last)."""
    one = ThreadPass(ring, thread_id)
    for rotator, threads in zip(rotators, listed, strict=True):
        if thread_id in threads:
            await rotator.rewrite(one)
    return one.counts
