"""Reading checkpoints back: ``aget_tuple`` and ``alist`` with filters and ``before``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, cast

import orjson
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointMetadata, CheckpointTuple, get_checkpoint_id
from langgraph.checkpoint.redis.util import (
    from_storage_safe_id,
    from_storage_safe_str,
    to_storage_safe_id,
    to_storage_safe_str,
)

# redisvl ships no type information (no py.typed marker).
from redisvl.query.filter import FilterExpression, Num, Tag  # type: ignore[import-untyped]

from tether.checkpointing.redis.base import RedisBase, doc_field

__all__ = ["Listing"]


def _metadata_matches(raw: Any, wanted: dict[str, Any]) -> bool:
    metadata = orjson.loads(raw) if isinstance(raw, str | bytes) else raw or {}
    return all(metadata.get(key) == value for key, value in wanted.items())


class Listing(RedisBase):
    """``aget_tuple`` and ``alist`` that agree with the other backends."""

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Upstream's ``aget_tuple``, but ``None`` for a checkpoint not saved yet.

        Upstream returns a tuple with an empty checkpoint, which is its own
        parent, for the stub document ``aput_writes`` leaves before ``aput``.
        """
        found = await super().aget_tuple(config)
        return found if found is None or "id" in found.checkpoint else None

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """List checkpoints newest first.

        Args:
            config: ``thread_id``, and optionally ``checkpoint_ns`` (``""`` is the
                root namespace; absent means every namespace), ``checkpoint_id``
                and ``run_id`` to match.
            filter: Metadata that must be equal, key by key; any key works.
            before: Only checkpoints whose id sorts before this config's id.
            limit: The most checkpoints to return.
        """
        if limit is not None and limit <= 0:
            return
        before_id = get_checkpoint_id(before) if before else None
        fields = ["checkpoint_id"] + (["$.metadata"] if filter else [])
        docs = await self._search(
            self.checkpoints_index,
            self._list_where(config, filter),
            fields,
            newest_first=True,
            # A stub document (see _tuples) only matches a query without a thread.
            limit=None if filter or before_id or config is None else limit,
        )
        keys = [
            doc.id
            for doc in docs
            if doc_field(doc, "checkpoint_id")
            and not (
                before_id and from_storage_safe_id(doc_field(doc, "checkpoint_id")) >= before_id
            )
            and (not filter or _metadata_matches(getattr(doc, "$.metadata", None), filter))
        ][:limit]
        for tup in await self._tuples(keys):
            yield tup

    def _list_where(
        self, config: RunnableConfig | None, filter: dict[str, Any] | None
    ) -> FilterExpression | str:
        parts: list[FilterExpression] = []
        configurable = (config or {}).get("configurable", {})
        if (thread_id := configurable.get("thread_id")) is not None:
            parts.append(self._thread_where(str(thread_id)))
        if run_id := configurable.get("run_id"):
            parts.append(Tag("run_id") == to_storage_safe_id(run_id))
        if (checkpoint_ns := configurable.get("checkpoint_ns")) is not None:
            parts.append(Tag("checkpoint_ns") == to_storage_safe_str(checkpoint_ns))
        if config and (checkpoint_id := get_checkpoint_id(config)):
            parts.append(Tag("checkpoint_id") == to_storage_safe_id(checkpoint_id))
        # aput copies source and step to indexed fields only when the metadata
        # has both, so only a filter on both can use them; the metadata itself
        # is checked afterwards in every case (TAG matching ignores case).
        source, step = (filter or {}).get("source"), (filter or {}).get("step")
        if isinstance(source, str) and source and type(step) is int:
            parts += [Tag("source") == source, Num("step") == step]
        if not parts:
            return "*"
        where = parts[0]
        for part in parts[1:]:
            where &= part
        return where

    async def _tuples(self, keys: Sequence[str]) -> list[CheckpointTuple]:
        """Checkpoint tuples of the checkpoint documents at ``keys``, in order."""
        # Skips the {"has_writes": true} stub aput_writes leaves for a checkpoint
        # not saved yet.
        docs = [doc for doc in await self._documents(keys) if doc and "checkpoint" in doc]
        rows = [
            (
                from_storage_safe_id(d["thread_id"]),
                from_storage_safe_str(d["checkpoint_ns"]),
                from_storage_safe_id(d["checkpoint_id"]),
                from_storage_safe_id(d.get("parent_checkpoint_id") or ""),
                d,
            )
            for d in docs
        ]
        sends = await self._abatch_load_pending_sends(
            [(t, ns, parent) for t, ns, _, parent, _ in rows if parent]
        )
        writes = await self._abatch_load_pending_writes(
            # Not only where has_writes is set: aput clears it when writes came first.
            [(t, ns, cid) for t, ns, cid, _, _ in rows]
        )
        tuples = []
        for thread_id, ns, cid, parent, doc in rows:
            checkpoint = doc.get("checkpoint") or {}
            raw = doc.get("metadata") or "{}"
            metadata = orjson.loads(raw) if isinstance(raw, str) else raw
            metadata = {
                k.replace("\u0000", ""): v.replace("\u0000", "") if isinstance(v, str) else v
                for k, v in metadata.items()
            }
            channel_values = self._recursive_deserialize(checkpoint.get("channel_values", {}))
            tuples.append(
                CheckpointTuple(
                    config={
                        "configurable": {
                            "thread_id": thread_id,
                            "checkpoint_ns": ns,
                            "checkpoint_id": cid,
                        }
                    },
                    checkpoint=self._load_checkpoint(
                        checkpoint, channel_values, sends.get((thread_id, ns, parent), [])
                    ),
                    metadata=cast(CheckpointMetadata, metadata),
                    parent_config={
                        "configurable": {
                            "thread_id": thread_id,
                            "checkpoint_ns": ns,
                            "checkpoint_id": parent,
                        }
                    }
                    if parent
                    else None,
                    pending_writes=writes.get((thread_id, ns, cid), []),
                )
            )
        return tuples
