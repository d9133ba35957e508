"""Per-thread data keys: what makes erasing a thread crypto-shredding.

With encryption on, every thread gets its own random AES-256 data key the first
time something of it is written (a checkpoint, a write, a record or a step).
Its values are sealed under that key (envelope version 3, see
:mod:`tether.checkpointing.encryption`), and the key itself is kept in the
record store as a record of kind :data:`THREAD_KEY_KIND`, key :func:`key_record`
(the thread id behind a prefix, so the empty thread id has a key too),
filed under the thread, and sealed by the key ring like the store's keyed-hash
secret (so ``tether keys rotate`` rewraps it, and never touches the values).

Erasing the thread deletes that record with the thread's other records, after
its checkpoints (:mod:`tether.checkpointing._cascade`): from then on no copy of
the thread's version-3 ciphertext (a replica, a dump, rows restored from a
backup without the key record) can be read, with any key ring.

A full backup of the store taken before the erasure holds the key record too.
So that such a backup cannot decrypt an erased thread, the keys can live in a
store of their own (``open_checkpointer(..., data_keys_url=...)`` or
``TETHER_DATA_KEYS_URL``, see :mod:`tether.checkpointing._key_store`): new keys
are created there, erasure deletes them there, and rotation rewraps them there.
A key the store itself holds from before (written without a data-key store)
is still read, rewrapped and erased where it is; it is never moved.

Two workers writing a new thread at once converge on one key: the key is
inserted put-if-absent and read back. Unwrapped keys of recently used threads
are kept in memory per backend (bounded), dropped when the thread's records are
deleted in this process.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import threading
import time
import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from tether.checkpointing import DataKey
from tether.errors import ConfigurationError
from tether.store._keyed import SECRET_THREAD
from tether.store._ownership import NO_RUN, on_forget

if TYPE_CHECKING:
    from tether.store._record import RecordStore
    from tether.store._types import Record

__all__ = [
    "THREAD_KEY_KIND",
    "DataKeyCache",
    "cache_for",
    "drop_cached",
    "key_record",
    "load_data_key",
    "ring_only",
]

THREAD_KEY_KIND = "thread_key"


def key_record(thread_id: str) -> str:
    """The record key of ``thread_id``'s data key (never empty: record keys cannot be)."""
    return f"thread:{thread_id}"


"""The record kind a thread's wrapped data key is stored under (its key is the thread id)."""
_CACHED_THREADS = 4096


def ring_only(thread_id: str, kind: str | None = None) -> bool:
    """Whether a value is sealed by the ring itself, not by its thread's data key.

    The data-key records themselves, and the store's own thread (its keyed-hash
    secret must survive the erasure of any thread).
    """
    return kind == THREAD_KEY_KIND or thread_id == SECRET_THREAD


class DataKeyCache:
    """Unwrapped data keys of the most recently used threads of one backend."""

    def __init__(self, size: int = _CACHED_THREADS) -> None:
        self._size = size
        self._keys: OrderedDict[str, DataKey] = OrderedDict()
        self._lock = threading.Lock()
        # (event loop id, thread) -> the load under way there (see RecordStore.data_key)
        self.flights: dict[tuple[int, str], asyncio.Future[DataKey | None]] = {}

    def get(self, thread_id: str, want: str | None = None) -> DataKey | None:
        """The cached key of the thread (only if its id is ``want``, when given)."""
        with self._lock:
            key = self._keys.get(thread_id)
            if key is None or (want is not None and key.key_id != want):
                return None
            self._keys.move_to_end(thread_id)
            return key

    def put(self, thread_id: str, key: DataKey) -> None:
        with self._lock:
            self._keys[thread_id] = key
            self._keys.move_to_end(thread_id)
            while len(self._keys) > self._size:
                self._keys.popitem(last=False)

    def drop(self, thread_ids: frozenset[str] | None) -> None:
        """Forget the keys of ``thread_ids`` (of every thread, for ``None``)."""
        with self._lock:
            if thread_ids is None:
                self._keys.clear()
            else:
                for thread_id in thread_ids:
                    self._keys.pop(thread_id, None)


# Per backend connection, per key ring: a key unwrapped by one ring is never
# handed to a layer holding another (it must prove it can unwrap it itself).
_caches: weakref.WeakKeyDictionary[Any, dict[str, DataKeyCache]] = weakref.WeakKeyDictionary()
_caches_lock = threading.Lock()


def cache_for(driver: Any, cipher: Any) -> DataKeyCache:
    """The cache shared by every record store on ``driver`` with the same key ring."""
    ring = str(getattr(cipher, "fingerprint", id(cipher)))
    with _caches_lock:
        by_ring = _caches.get(driver)
        if by_ring is None:
            by_ring = _caches[driver] = {}
        cache = by_ring.get(ring)
        if cache is None:
            cache = by_ring[ring] = DataKeyCache()
        return cache


def drop_cached(thread_ids: frozenset[str] | None) -> None:
    """Forget the unwrapped keys of ``thread_ids`` (all, for ``None``) held in this process.

    Called when a thread's records are deleted, and by key rotation once a
    thread's key is re-wrapped: a ring must unwrap a key itself to use it.
    """
    with _caches_lock:
        caches = [cache for by_ring in _caches.values() for cache in by_ring.values()]
    for cache in caches:
        cache.drop(thread_ids)


on_forget(drop_cached)


async def _stored_key(store: RecordStore, thread_id: str) -> Record | None:
    """The thread's key record: in the data-key store, else in the store itself.

    A key in the store itself was written before a data-key store was configured.
    """
    keys = store.key_records
    record = None if keys is None else await keys.get(THREAD_KEY_KIND, key_record(thread_id))
    if record is None:
        record = await store.get(THREAD_KEY_KIND, key_record(thread_id))
    return record


async def load_data_key(store: RecordStore, thread_id: str, *, create: bool) -> DataKey | None:
    """The thread's data key from the store, creating it if ``create`` (put-if-absent).

    With a data-key store (``data_keys_url``) the key is read there first, then
    in ``store`` itself (a key written before the data-key store was
    configured), and a new key is created in the data-key store.

    Returns ``None`` when the thread has none and ``create`` is false.

    Raises:
        RecordStoreError: The stored key record is malformed.
        EncryptionError: The stored key cannot be unwrapped with the ring.
    """
    from tether.store._record import RecordStoreError  # record.py imports this module

    record = await _stored_key(store, thread_id)
    if record is None:
        if not create:
            return None
        fresh = DataKey.generate()
        value = {
            "id": fresh.key_id,
            "key": base64.b64encode(fresh.raw).decode(),
            "created_at": time.time(),
        }
        # Two workers may race here: put-if-absent keeps one; the loser reads it back.
        home = store.key_records or store
        if await home.insert(
            THREAD_KEY_KIND, key_record(thread_id), value, thread_id=thread_id, run_id=NO_RUN
        ):
            store._data_keys.put(thread_id, fresh)
            return fresh
        record = await home.get(THREAD_KEY_KIND, key_record(thread_id))
        if record is None:
            raise RecordStoreError(
                f"the data key of thread {thread_id!r} was deleted while it was being created "
                "(the thread was erased concurrently); nothing was written"
            )
    try:
        key = DataKey(str(record.value["id"]), base64.b64decode(record.value["key"], validate=True))
    except (KeyError, TypeError, binascii.Error, ValueError, ConfigurationError) as exc:
        raise RecordStoreError(
            f"the data key of thread {thread_id!r} (record {THREAD_KEY_KIND!r}) is malformed "
            f"({exc}); the thread's values cannot be read"
        ) from None
    if record.thread_id != thread_id:
        raise RecordStoreError(
            f"the data key record of thread {thread_id!r} is filed under thread "
            f"{record.thread_id!r}; refusing it"
        )
    store._data_keys.put(thread_id, key)
    return key
