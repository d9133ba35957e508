"""A checkpointer that forwards every call to another one.

Layers that change what is stored (encryption) or observe it (the crash
harness's crash points) subclass :class:`DelegatingSaver` and override only the
async methods they care about; the sync methods reach them through the inner
saver's own sync bridge, so there is still one implementation per operation.
Each layer closes the listing beneath it as soon as its own ends, however it
ends (see :func:`~tether.checkpointing._bridge.closing_listing`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Coroutine, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)

from tether._loops import shared_loop, wait_on_loop
from tether.checkpointing._bridge import _deadlock_message, closing_listing, read_all

__all__ = ["DelegatingSaver", "innermost"]

T = TypeVar("T")


def innermost(saver: BaseCheckpointSaver[Any]) -> BaseCheckpointSaver[Any]:
    """The backend saver beneath any number of delegating layers."""
    while isinstance(saver, DelegatingSaver):
        saver = saver.inner
    return saver


class DelegatingSaver(BaseCheckpointSaver[Any]):
    """Forwards everything to ``inner``; subclasses override the ``a*`` methods they wrap.

    Args:
        inner: The saver that actually stores checkpoints.
    """

    def __init__(self, inner: BaseCheckpointSaver[Any]) -> None:
        super().__init__(serde=inner.serde)
        self.inner = inner

    @property
    def settles_records(self) -> bool:
        """Whether the saver that stores the writes settles record writes in flight first."""
        return getattr(self.inner, "settles_records", False) is True

    @property
    def config_specs(self) -> list[Any]:
        return self.inner.config_specs

    @property
    def loop(self) -> Any:
        return getattr(self.inner, "loop", None)

    def get_next_version(self, current: Any, channel: None) -> Any:
        return self.inner.get_next_version(current, channel)

    # -- async: the real implementations --------------------------------
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self.inner.aget_tuple(config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        listing = self.inner.alist(config, filter=filter, before=before, limit=limit)
        async with closing_listing(listing) as items:
            async for item in items:
                yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self.inner.aput(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self.inner.aput_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await self.inner.adelete_thread(thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self.inner.adelete_for_runs(run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self.inner.acopy_thread(source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self.inner.aprune(thread_ids, strategy=strategy)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        # The base implementation walks aget_tuple, so it sees this layer's view.
        return await BaseCheckpointSaver.aget_delta_channel_history(
            self, config=config, channels=channels
        )

    # -- sync: bridged to this layer's own async methods --------------------
    # Going through the a* methods (not inner's sync ones) keeps a subclass's
    # transformation on the sync path too.
    def _call(self, coro: Coroutine[Any, Any, T], name: str) -> T:
        # The in-memory saver has no loop of its own; its calls take the shared one.
        loop = self.loop or shared_loop()
        return wait_on_loop(coro, loop, deadlock_message=_deadlock_message(self, name))

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._call(self.aget_tuple(config), "get_tuple")

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        listing = self.alist(config, filter=filter, before=before, limit=limit)
        return iter(self._call(read_all(listing), "list"))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._call(self.aput(config, checkpoint, metadata, new_versions), "put")

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._call(self.aput_writes(config, writes, task_id, task_path), "put_writes")

    def delete_thread(self, thread_id: str) -> None:
        self._call(self.adelete_thread(thread_id), "delete_thread")

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._call(self.adelete_for_runs(run_ids), "delete_for_runs")

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._call(self.acopy_thread(source_thread_id, target_thread_id), "copy_thread")

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._call(self.aprune(thread_ids, strategy=strategy), "prune")

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return self._call(
            self.aget_delta_channel_history(config=config, channels=channels),
            "get_delta_channel_history",
        )
