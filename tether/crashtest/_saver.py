"""``CrashPointSaver``: puts crash points around every checkpoint write.

The crash harness wraps the target's checkpointer in this layer, so that a run
can be killed just before or just after each ``aput`` and ``aput_writes``,
which are the moments where LangGraph's own durability is decided.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata

from tether._crashpoints import crash_point
from tether.checkpointing import DelegatingSaver

__all__ = ["CrashPointSaver"]


class CrashPointSaver(DelegatingSaver):
    """Calls ``checkpoint.put.before/after`` and ``checkpoint.put_writes.before/after``."""

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        crash_point("checkpoint.put.before")
        result = await self.inner.aput(config, checkpoint, metadata, new_versions)
        crash_point("checkpoint.put.after")
        return result

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        crash_point("checkpoint.put_writes.before")
        await self.inner.aput_writes(config, writes, task_id, task_path)
        crash_point("checkpoint.put_writes.after")
