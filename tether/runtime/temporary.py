"""Deleting the temporary threads of stateless runs (design §2.5).

A stateless run (no ``thread_id``) with ``on_completion="delete"`` (the default)
runs on a temporary thread, which LangGraph deletes when the run ends. tether
keeps it a little longer, so the run's events can still be read: ``tether
serve`` deletes it as soon as it has sent the run's result, and the scheduler's
cleanup deletes those nobody read (a background stateless run) once their runs
stopped :data:`GRACE` seconds ago. Both delete the rows (the thread, its runs
and events), then the checkpoints.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from tether.runtime.store.base import RunStore

__all__ = ["GRACE", "delete_temporary_threads"]

GRACE = 60.0
"""Seconds a stopped temporary thread is left for its reader before the scheduler deletes it."""

_BATCH = 100


async def delete_temporary_threads(
    store: RunStore, saver: BaseCheckpointSaver[Any], *, ended_before: datetime
) -> list[str]:
    """Delete every temporary thread whose runs all stopped before ``ended_before``
    (every tenant), with its runs, events and checkpoints; their ids."""
    deleted: list[str] = []
    while True:
        batch = await store.delete_temporary_threads(ended_before=ended_before, limit=_BATCH)
        for thread_id in batch:
            await saver.adelete_thread(thread_id)
        deleted += batch
        if len(batch) < _BATCH:
            return deleted
