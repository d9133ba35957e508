"""Durable records and step logs stored beside a checkpointer's checkpoints.

The names below are the API, for users and for tether's layers above (steps,
approvals, key rotation). :mod:`tether.store.operations` is public too: the
operations :meth:`RecordStore.perform` takes. Every module whose name starts
with ``_`` is internal.
"""

from tether.store._chain import ChainHead, ChainReport
from tether.store._data_keys import THREAD_KEY_KIND, DataKeyCache, drop_cached
from tether.store._factory import store_for
from tether.store._keyed import SECRET_KEY, SECRET_KIND, SECRET_THREAD, KeyedHash
from tether.store._ownership import on_forget
from tether.store._record import (
    Record,
    RecordDriver,
    RecordStore,
    RecordStoreError,
    SyncRecordStore,
)

__all__ = [
    "SECRET_KEY",
    "SECRET_KIND",
    "SECRET_THREAD",
    "THREAD_KEY_KIND",
    "ChainHead",
    "ChainReport",
    "DataKeyCache",
    "KeyedHash",
    "Record",
    "RecordDriver",
    "RecordStore",
    "RecordStoreError",
    "SyncRecordStore",
    "drop_cached",
    "on_forget",
    "store_for",
]
