"""``RedisSaver``: the capabilities assembled, plus the sync twins upstream lacks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig

from tether.checkpointing._bridge import SyncBridge
from tether.checkpointing._cascade import (
    check_run_ids,
    delete_records_of_runs,
    delete_records_of_threads,
)
from tether.checkpointing._settling import SettlesRecordWrites
from tether.checkpointing.redis._copying import Copying
from tether.checkpointing.redis._listing import Listing
from tether.checkpointing.redis._pruning import Pruning
from tether.checkpointing.redis._saving import Saving

__all__ = ["RedisSaver"]


# mypy compares SyncBridge's declared aprune with the upstream one Listing and
# Copying inherit; Pruning's, ahead of upstream in the MRO, is the one that runs.
class RedisSaver(SettlesRecordWrites, SyncBridge, Saving, Listing, Pruning, Copying):  # type: ignore[misc]
    """``AsyncRedisSaver`` with tether's fixes for the official conformance suite.

    Works from async code directly and from sync code through
    :func:`tether.open_checkpointer_sync`.
    """

    # Its public path (in reprs and pickles), as before the module became a
    # package; code that goes by the backend's module name still sees "redis".
    __module__ = "tether.checkpointing.redis"

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete every key of the thread, then tether's records of it (also for prune)."""
        await super().adelete_thread(thread_id)
        await delete_records_of_threads(self, [thread_id])

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the runs' checkpoints and writes, then the records and steps they wrote."""
        ids = check_run_ids(run_ids)
        await super().adelete_for_runs(ids)
        await delete_records_of_runs(self, ids)

    def delete_thread(self, thread_id: str) -> None:
        """Sync twin of :meth:`adelete_thread`."""
        return self._run_sync(self.adelete_thread(thread_id), "delete_thread")

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Sync twin of ``aput_writes`` that, unlike upstream's, passes ``task_path`` on."""
        return self._run_sync(self.aput_writes(config, writes, task_id, task_path), "put_writes")

    # Upstream has no sync list. Assigned last: the name would shadow the
    # builtin ``list`` in annotations below it.
    list = SyncBridge._bridged_list
