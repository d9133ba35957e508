"""Which records of a thread exist, as this process knows them: reads only where needed.

Before a call, the recording layer must know whether the step was recorded
earlier. Reading the record store before every call would cost a round trip
per step, so each process loads the keys of a thread's records once (on its
first recorded call there) and adds the keys it writes. A key it does not know
cannot exist unless another process wrote it in the meantime, which one run
never does; even then nothing goes wrong, because records are put-if-absent:
the call's result loses to the stored one, which the run then uses.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from functools import partial

from tether._instances import instance_key
from tether.steps._io import Await, Flow
from tether.store import RecordStore

__all__ = ["drop_thread", "forget_thread", "known", "known_flow", "remember"]

_KINDS = ("model", "tool")
_MAX_THREADS = 1024

_keys: OrderedDict[tuple[int, str], set[tuple[str, str]]] = OrderedDict()
_lock = threading.Lock()


def _loaded(store: RecordStore, thread_id: str, kind: str, key: str) -> bool | None:
    """The answer of :func:`known` if the thread's keys are loaded, else ``None``."""
    slot = (instance_key(store), thread_id)
    with _lock:
        keys = _keys.get(slot)
        if keys is None:
            return None
        _keys.move_to_end(slot)
        return (kind, key) in keys


def known_flow(store: RecordStore, thread_id: str, kind: str, key: str) -> Flow[bool]:
    """:func:`known` as a flow step: no operation at all once the thread's keys are loaded.

    (In a sync node an ``Await`` is a hop to the store's event loop and back.)
    """
    answer = _loaded(store, thread_id, kind, key)
    if answer is None:
        answer = yield Await(partial(known, store, thread_id, kind, key))
    return bool(answer)


async def known(store: RecordStore, thread_id: str, kind: str, key: str) -> bool:
    """Whether a ``kind`` record under ``key`` may exist (then read it)."""
    answer = _loaded(store, thread_id, kind, key)
    if answer is not None:
        return answer
    slot = (instance_key(store), thread_id)
    loaded = {
        (k, record.key) for k in _KINDS for record in await store.list(k, thread_id=thread_id)
    }
    with _lock:
        keys = _keys.setdefault(slot, set())
        keys |= loaded
        while len(_keys) > _MAX_THREADS:
            _keys.popitem(last=False)
        return (kind, key) in keys


def remember(store: RecordStore, thread_id: str, kind: str, key: str) -> None:
    """Note a record this process wrote."""
    with _lock:
        keys = _keys.get((instance_key(store), thread_id))
        if keys is not None:
            keys.add((kind, key))


def forget_thread(store: RecordStore, thread_id: str) -> None:
    """Drop what this process knows about a thread (e.g. after deleting it)."""
    with _lock:
        _keys.pop((instance_key(store), thread_id), None)


def drop_thread(thread_id: str) -> None:
    """Drop what this process knows about a thread, under every store it was read through."""
    with _lock:
        for slot in [slot for slot in _keys if slot[1] == thread_id]:
            del _keys[slot]
