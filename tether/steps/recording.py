"""Keeps the step log complete when a process dies between a record and its step.

A recorded call writes its record first (the record is what replay trusts) and
then appends its step. If the process dies between the two, the replay that
finds the record appends the missing step, so the log still holds every call.
Each process reads a thread's log once to learn which records are logged.
"""

from __future__ import annotations

import threading
from typing import Any

from tether.store import RecordStore

__all__ = ["ensure_logged", "mark_logged"]

_logged: dict[tuple[int, str], set[str]] = {}
_lock = threading.Lock()


async def _load(store: RecordStore, thread_id: str) -> set[str]:
    keys = {str(doc["key"]) for _, doc in await store.indexed_steps(thread_id) if doc.get("key")}
    with _lock:
        known = _logged.setdefault((id(store), thread_id), set())
        known |= keys
        return known


async def ensure_logged(store: RecordStore, thread_id: str, key: str, step: dict[str, Any]) -> None:
    """Append ``step`` unless the log already holds a step for record ``key``."""
    with _lock:
        known = _logged.get((id(store), thread_id))
    if known is not None and key in known:
        return
    known = await _load(store, thread_id)
    if key in known:
        return
    await store.append_step(thread_id, step)
    mark_logged(store, thread_id, key)


def mark_logged(store: RecordStore, thread_id: str, key: str) -> None:
    """Note that the step for record ``key`` is in the log."""
    with _lock:
        known = _logged.get((id(store), thread_id))
        if known is not None:
            known.add(key)
