"""Durable records and step logs stored beside a checkpointer's checkpoints."""

from tether.store._factory import store_for
from tether.store._record import Record, RecordStore, RecordStoreError, SyncRecordStore

__all__ = ["Record", "RecordStore", "RecordStoreError", "SyncRecordStore", "store_for"]
