"""A process-unique number per live object, for caches keyed by an object's identity.

``id()`` is reused as soon as an object is freed, so a cache keyed by
``id(store)`` can hand a new store (another database, another file) what was
cached for an old one that lived at the same address: a budget already spent,
records "known" to be absent. :func:`instance_key` never reuses a number.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from typing import Any

__all__ = ["instance_key"]

_numbers: dict[int, tuple[Any, int]] = {}
_counter = itertools.count(1)
# Reentrant: making a weak reference allocates, so the garbage collector may run inside
# instance_key and free another keyed object, whose callback (_drop) then runs on this
# thread while it holds the lock.
_lock = threading.RLock()


def instance_key(obj: object) -> int:
    """A number that names ``obj`` for as long as it lives, and nothing else ever."""
    address = id(obj)
    with _lock:
        entry = _numbers.get(address)
        if entry is not None and _target(entry[0]) is obj:
            return entry[1]
        number = next(_counter)
        try:
            holder: Any = weakref.ref(obj, lambda ref: _drop(address, ref))
        except TypeError:  # no weak references: hold it, so its address stays its own
            holder = obj
        _numbers[address] = (holder, number)
        return number


def _target(holder: Any) -> object:
    return holder() if isinstance(holder, weakref.ref) else holder


def _drop(address: int, ref: weakref.ref[Any]) -> None:
    with _lock:
        entry = _numbers.get(address)
        if entry is not None and entry[0] is ref:
            del _numbers[address]
