"""The checkpointer a worker compiles its graphs with: fenced writes, tenant-checked reads.

:class:`RunSaver` sits on top of whatever the checkpoints live on (any of the
four backends, encrypted or not). While a run executes under a guard
(:func:`tether.boundaries.current_guard`), every write (``aput``,
``aput_writes``, deletes) is refused once another worker holds the run: the
worker writes nothing more and stops with
:class:`~tether.boundaries.LeaseLostError` (LangGraph neither retries it nor
records an error for the task). Where that is checked depends on where the
checkpoints live:

* **the run store's own database** (``guard.same_database``: the checkpoints
  URL is the run store's PostgreSQL database or SQLite file): the backend
  saver checks the fence *inside the write's transaction*
  (``tether_assert_fence`` on PostgreSQL, TEMP triggers on SQLite; see
  :mod:`tether.checkpointing`). There is no window: a write either commits
  before the takeover or is refused after it. This layer adds nothing.
* **anywhere else** (Redis, another database, ``memory://``): this layer asks
  the run store first, in one round trip, whether the worker still holds the
  run (``guard.verify()``), then writes. The window is that round trip: a
  worker stopped exactly between the two can store one more checkpoint after a
  takeover. The in-memory lease check before every effect
  (``boundary("tool.before")``) and the step log's put-if-absent records bound
  what such a write can do: it can add a checkpoint the new holder's next write
  supersedes, never an effect.

Every checkpoint read is checked against the run's tenant: a checkpoint
stamped with another tenant raises :class:`TenantMismatchError` instead of
being loaded. Outside a run (the API reading state, a person's decision) it is
a plain pass-through.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)

from tether.boundaries import current_guard
from tether.checkpointing import DelegatingSaver
from tether.runtime.errors import TenantMismatchError

__all__ = ["TENANT_KEY", "RunSaver"]

TENANT_KEY = "tenant_id"


class RunSaver(DelegatingSaver):
    """Fences writes and checks tenants for the run executing in the current context."""

    async def _fenced(self) -> None:
        """Verify the claim first, unless the backend checks it in the write's transaction."""
        guard = current_guard()
        if guard is not None and not guard.same_database:
            await guard.verify()

    def _check_tenant(self, item: CheckpointTuple | None) -> None:
        guard = current_guard()
        if guard is None or item is None:
            return
        stamped = (item.metadata or {}).get(TENANT_KEY)
        if stamped is not None and stamped != guard.tenant:
            guard.note("tenant.mismatch", {"checkpoint_id": item.checkpoint["id"]})
            raise TenantMismatchError(
                f"thread {item.config['configurable'].get('thread_id')!r}: checkpoint "
                f"{item.checkpoint['id']} belongs to another tenant than run "
                f"{guard.fence.run_id}; refusing to load it"
            )

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        item = await self.inner.aget_tuple(config)
        self._check_tenant(item)
        return item

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        async for item in super().alist(config, filter=filter, before=before, limit=limit):
            self._check_tenant(item)
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        await self._fenced()
        return await self.inner.aput(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self._fenced()
        await self.inner.aput_writes(config, writes, task_id, task_path)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._fenced()
        await self.inner.adelete_for_runs(run_ids)
