"""Saving a checkpoint: its document, its namespace's "latest" pointer and expiries in one step."""

from __future__ import annotations

import time
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.redis.util import to_storage_safe_id, to_storage_safe_str

from tether._in_flight import before_checkpoint
from tether.checkpointing.redis._base import RedisBase
from tether.checkpointing.redis._serde import TYPED_VALUES, dump_values

__all__ = ["Saving"]


class Saving(RedisBase):
    """``aput`` as one MULTI/EXEC transaction, once the thread's record writes landed."""

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        stream_mode: str = "values",
    ) -> RunnableConfig:
        """Save ``checkpoint`` and make it its namespace's latest, atomically.

        Upstream writes the document, then the pointer, then the expiries, in
        separate round trips: a process killed in between leaves the pointer on
        the previous checkpoint, and LangGraph resumes from there. Here the
        three go in one transaction, so a save is whole or absent. (Upstream's
        partial save on cancellation is gone for the same reason.)

        Args:
            config: The thread, namespace and parent checkpoint.
            checkpoint: The checkpoint to save.
            metadata: Its metadata.
            new_versions: The channel versions new in it (all values are stored
                inline, so unused).
            stream_mode: Accepted for upstream's signature; unused (upstream
                used it only for its partial save on cancellation).

        Returns:
            The saved checkpoint's config.
        """
        configurable = config["configurable"]
        thread_id = configurable["thread_id"]
        await before_checkpoint(config)
        ns = configurable.get("checkpoint_ns", "")
        checkpoint_id = checkpoint["id"]
        # Upstream's rule: the config's checkpoint is the parent unless it is this one.
        parent = configurable.get("checkpoint_id")
        # As PostgresSaver: the config's metadata and extra configurable keys too.
        metadata = get_serializable_checkpoint_metadata(config, metadata)
        # The run a checkpoint belongs to is its stored metadata's (as delete_for_runs
        # reads it on PostgreSQL), which includes config["metadata"]["run_id"].
        run_id = metadata.get("run_id", configurable.get("run_id"))
        stored = {
            **checkpoint,
            "channel_values": dump_values(self._serde, checkpoint["channel_values"]),
        }
        doc: dict[str, Any] = {
            "thread_id": to_storage_safe_id(thread_id),
            "run_id": to_storage_safe_id(run_id) if run_id else "",
            "checkpoint_ns": to_storage_safe_str(ns),
            "checkpoint_id": to_storage_safe_id(checkpoint_id),
            "parent_checkpoint_id": (
                to_storage_safe_id(parent) if parent and parent != checkpoint_id else ""
            ),
            "checkpoint_ts": time.time() * 1000,
            "checkpoint": stored,
            "values": TYPED_VALUES,
            "metadata": self._metadata_json(metadata),
            "has_writes": False,
        }
        if "source" in metadata and "step" in metadata:
            # Indexed copies, for list(filter=...) on both.
            doc["source"], doc["step"] = metadata["source"], metadata["step"]
        key = self._make_redis_checkpoint_key(thread_id, ns, checkpoint_id)
        pointer = self._make_redis_checkpoint_latest_key(thread_id, ns)
        save = self._redis.pipeline(transaction=True)
        save.json().set(key, "$", doc)
        save.set(pointer, key)
        if (seconds := self._ttl_seconds) is not None:
            save.expire(key, seconds)
            save.expire(pointer, seconds)
        await save.execute()
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint_id,
            }
        }

    def _metadata_json(self, metadata: CheckpointMetadata) -> str:
        """Metadata as upstream stores it: JSON text, without NUL characters."""
        _, data = self._serde.legacy.dumps_typed(metadata)
        return data.decode().replace("\\u0000", "")
