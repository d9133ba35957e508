"""Deleting checkpoints deletes what tether recorded beside them.

Every backend saver calls these after its own delete, so ``delete_thread``,
``delete_for_runs`` and ``prune(strategy="delete")`` also remove the thread's
(or the runs') model outputs, tool results, intent records, approvals and step
log, and tell in-process caches to forget them.

Checkpoints go first and records second. A crash in between leaves records
without checkpoints, which the next delete of the same thread removes (both
steps are idempotent). The other order could leave a resumable run whose
recorded answers and tool claims are gone, and resuming it would ask the model
again and repeat tool effects.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = ["check_run_ids", "delete_records_of_runs", "delete_records_of_threads"]


def check_run_ids(run_ids: Sequence[str]) -> list[str]:
    """``run_ids`` as a list of str, refusing a bare string.

    A bare ``"abc"`` is a sequence of the runs ``a``, ``b`` and ``c``; deleting
    those would be silent data loss, so it is refused on every backend.

    Raises:
        TypeError: ``run_ids`` is a str or bytes, or not iterable.
    """
    if isinstance(run_ids, (str, bytes)):
        raise TypeError(
            f"delete_for_runs() takes a sequence of run ids, not a single string "
            f"({run_ids!r}); pass [{run_ids!r}]"
        )
    try:
        return [str(r) for r in run_ids]
    except TypeError:
        raise TypeError(
            f"delete_for_runs() takes a sequence of run ids, not {type(run_ids).__name__}"
        ) from None


async def delete_records_of_threads(
    saver: BaseCheckpointSaver[Any], thread_ids: Iterable[str]
) -> None:
    """Delete tether's records and step log of each thread (after its checkpoints)."""
    from tether.store import store_for  # the store layer sits above the savers

    store = store_for(saver)
    for thread_id in thread_ids:
        await store.delete_thread(str(thread_id))


async def delete_records_of_runs(saver: BaseCheckpointSaver[Any], run_ids: list[str]) -> None:
    """Delete tether's records and steps written by the runs (after their checkpoints)."""
    from tether.store import store_for

    if run_ids:
        await store_for(saver).delete_runs(run_ids)
