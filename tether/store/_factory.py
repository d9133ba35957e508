"""``store_for``: the record store living beside a checkpointer's checkpoints."""

from __future__ import annotations

import threading
import weakref
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from tether.checkpointing import (
    DelegatingSaver,
    backend_of,
    innermost,
    key_store_of,
    known_backends,
)
from tether.errors import ConfigurationError
from tether.store._record import Cipher, RecordDriver, RecordStore

__all__ = ["store_for"]

_lock = threading.Lock()
# Keyed by saver object: drivers per backend saver, stores per (possibly layered) saver.
_drivers: weakref.WeakKeyDictionary[Any, RecordDriver] = weakref.WeakKeyDictionary()
_stores: weakref.WeakKeyDictionary[Any, RecordStore] = weakref.WeakKeyDictionary()


def _cipher(saver: BaseCheckpointSaver[Any]) -> Cipher | None:
    layer: Any = saver
    while True:
        cipher = getattr(layer, "encryption", None)
        if cipher is not None:
            return cipher  # type: ignore[no-any-return]
        if not isinstance(layer, DelegatingSaver):
            return None
        layer = layer.inner


def _driver(base: BaseCheckpointSaver[Any]) -> RecordDriver:
    backend = backend_of(base)
    if backend is None:
        raise ConfigurationError(
            f"no record store for checkpointer type {type(base).__name__}; open the "
            f"checkpointer with tether.open_checkpointer() ({known_backends()})"
        )
    return backend.record_driver_for(base)


def _cached_driver(base: BaseCheckpointSaver[Any]) -> RecordDriver:
    driver = _drivers.get(base)
    if driver is None:
        driver = _drivers[base] = _driver(base)
    return driver


def store_for(saver: BaseCheckpointSaver[Any]) -> RecordStore:
    """The record store on the same backend and connection as ``saver``.

    Delegating layers are unwrapped to find the backend; an encryption layer
    among them (an object with an ``encryption`` cipher) encrypts every value.
    When the backend was opened with a data-key store (``data_keys_url``), the
    threads' data keys are kept there (see :mod:`tether.store._data_keys`).
    The store is cached per saver object, so repeated calls are cheap.

    Args:
        saver: A checkpointer returned by :func:`tether.open_checkpointer` (or a
            layer over one).

    Raises:
        ConfigurationError: ``saver`` is not a backend tether knows.
    """
    store = _stores.get(saver)  # the common case, without the lock (a read)
    if store is not None:
        return store
    with _lock:
        store = _stores.get(saver)
        if store is not None:
            return store
        base = innermost(saver)
        keys = key_store_of(base)
        key_driver = None if keys is None else _cached_driver(keys.saver)
        store = _stores[saver] = RecordStore(_cached_driver(base), _cipher(saver), key_driver)
        return store
