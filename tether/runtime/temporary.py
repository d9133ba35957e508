"""Deleting the temporary threads of stateless runs (design §2.5).

A stateless run (no ``thread_id``) with ``on_completion="delete"`` (the default)
runs on a temporary thread, which LangGraph deletes when the run ends. tether
keeps it a little longer, so the run's events can still be read: ``tether
serve`` deletes it as soon as it has sent the run's result, and workers delete
those nobody read (a background stateless run) once their runs stopped more than
a grace period ago. Both delete the rows (the thread, its runs and events), then
the checkpoints.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from tether.runtime.store.base import RunStore

__all__ = ["SWEEP_GRACE", "delete_temporary_threads"]

SWEEP_GRACE = 60.0
"""Seconds a worker leaves a stopped temporary thread for its reader before deleting it."""

_BATCH = 100


async def delete_temporary_threads(
    store: RunStore, saver: BaseCheckpointSaver[Any], *, grace: float
) -> list[str]:
    """Delete every temporary thread whose runs all stopped more than ``grace``
    seconds ago (every tenant), with its runs, events and checkpoints; their ids."""
    before = datetime.now(UTC) - timedelta(seconds=grace)
    deleted: list[str] = []
    while True:
        batch = await store.delete_temporary_threads(ended_before=before, limit=_BATCH)
        for thread_id in batch:
            await saver.adelete_thread(thread_id)
        deleted += batch
        if len(batch) < _BATCH:
            return deleted
