"""Turning stored checkpoint documents into checkpoint tuples, with their writes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, cast

import orjson
from langgraph.checkpoint.base import (
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    writes_sort_key,
)
from langgraph.checkpoint.redis.util import from_storage_safe_id, from_storage_safe_str
from langgraph.constants import TASKS

from tether.checkpointing.redis._base import RedisBase
from tether.checkpointing.redis._serde import TYPED_VALUES, load_values

__all__ = ["Reading", "StoredId"]


class StoredId(NamedTuple):
    """A checkpoint's ids as stored (empty values replaced by upstream's sentinels)."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str


class Reading(RedisBase):
    """Checkpoint tuples from documents; writes found through each checkpoint's registry."""

    async def _tuples(
        self, keys: Sequence[str], *, owner: tuple[str, str] | None = None
    ) -> list[CheckpointTuple]:
        """Checkpoint tuples of the checkpoint documents at ``keys``, in order.

        Args:
            keys: Checkpoint document keys.
            owner: If given, the (stored) thread and namespace every document
                must name; others are skipped.
        """
        # Skips the {"has_writes": true} stub aput_writes leaves for a checkpoint
        # not saved yet.
        docs = [
            doc
            for doc in await self._documents(keys)
            if doc
            and "checkpoint" in doc
            and (owner is None or (doc.get("thread_id"), doc.get("checkpoint_ns")) == owner)
        ]
        ids = [StoredId(d["thread_id"], d["checkpoint_ns"], d["checkpoint_id"]) for d in docs]
        parents = [
            StoredId(i.thread_id, i.checkpoint_ns, d["parent_checkpoint_id"])
            for i, d in zip(ids, docs, strict=True)
            if d.get("parent_checkpoint_id")
        ]
        # Not only where has_writes is set: aput clears it when writes came first.
        writes = await self._write_docs([*ids, *parents])
        return [
            self._tuple(doc, stored, writes.get(stored, []), writes.get(_parent(stored, doc), []))
            for stored, doc in zip(ids, docs, strict=True)
        ]

    def _tuple(
        self,
        doc: dict[str, Any],
        stored: StoredId,
        writes: list[dict[str, Any]],
        parent_writes: list[dict[str, Any]],
    ) -> CheckpointTuple:
        thread_id = from_storage_safe_id(stored.thread_id)
        ns = from_storage_safe_str(stored.checkpoint_ns)
        parent = from_storage_safe_id(doc.get("parent_checkpoint_id") or "")
        raw = doc.get("metadata") or "{}"
        metadata = orjson.loads(raw) if isinstance(raw, str) else raw
        metadata = {
            k.replace("\u0000", ""): v.replace("\u0000", "") if isinstance(v, str) else v
            for k, v in metadata.items()
        }
        # Checkpoints before format v4 read their pending sends from the parent's writes.
        sends = [
            (w.get("type", ""), w.get("blob", ""))
            for w in sorted(filter(_is_send, parent_writes), key=_write_order)
        ]

        def config(checkpoint_id: str) -> Any:
            return {
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": ns,
                    "checkpoint_id": checkpoint_id,
                }
            }

        return CheckpointTuple(
            config=config(from_storage_safe_id(stored.checkpoint_id)),
            checkpoint=self._checkpoint(doc, sends),
            metadata=cast(CheckpointMetadata, metadata),
            parent_config=config(parent) if parent else None,
            pending_writes=self._pending_writes(writes),
        )

    def _checkpoint(self, doc: dict[str, Any], sends: list[tuple[str, str]]) -> Checkpoint:
        """The checkpoint a document holds, with its values loaded."""
        stored = doc.get("checkpoint") or {}
        if doc.get("values") != TYPED_VALUES:  # upstream's layout, read as upstream does
            values = self._recursive_deserialize(stored.get("channel_values", {}))
            return self._load_checkpoint(stored, values, sends)
        checkpoint: Any = {
            **stored,
            "channel_values": load_values(self._serde, stored["channel_values"]),
        }
        if checkpoint.get("v", 4) < 4 and sends:
            # As PostgresSaver migrates them: the parent's sends become the tasks channel.
            versions = checkpoint["channel_versions"] = dict(checkpoint["channel_versions"])
            checkpoint["channel_values"][TASKS] = [
                self.serde.loads_typed((t, self._decode_blob(b))) for t, b in sends
            ]
            first = self.get_next_version(None, cast(Any, None))  # the channel is unused
            versions[TASKS] = max(versions.values()) if versions else first
        loaded: Checkpoint = checkpoint
        return loaded

    def _pending_writes(self, docs: list[dict[str, Any]]) -> list[PendingWrite]:
        # One write per (task, idx), in the order LangGraph applies them (as every
        # other saver returns them), whatever order they were saved in.
        latest = {(d.get("task_id", ""), str(d.get("idx", 0))): d for d in docs}
        ordered = sorted(latest.values(), key=_write_order)
        return [
            (
                d.get("task_id", ""),
                d.get("channel", ""),
                self.serde.loads_typed((d.get("type", ""), self._decode_blob(d.get("blob", "")))),
            )
            for d in ordered
        ]

    async def _write_docs(self, checkpoints: Sequence[StoredId]) -> dict[StoredId, list[Any]]:
        """The write documents of each checkpoint, in registry order.

        Read through each checkpoint's write registry (exact keys, no search), and
        only documents that name the same thread, namespace and checkpoint count:
        key parts are joined with ``:``, which ids may contain.
        """
        wanted: list[StoredId] = list(dict.fromkeys(checkpoints))
        if not wanted:
            return {}
        pipe = self._redis.pipeline(transaction=False)
        for stored in wanted:
            pipe.zrange(self._zset_key(*stored), 0, -1)
        members: list[list[Any]] = await pipe.execute()
        owners: list[StoredId] = [
            s for s, found in zip(wanted, members, strict=True) for _ in found
        ]
        keys = [_text(k) for found in members for k in found]
        grouped: dict[StoredId, list[Any]] = {}
        for owner, doc in zip(owners, await self._documents(keys), strict=True):
            if doc is not None and _names(doc) == tuple(owner):
                grouped.setdefault(owner, []).append(doc)
        return grouped

    async def _refresh_ttl(self, key: str, stored: StoredId, *, latest: bool) -> None:
        """With ``refresh_on_read``, give a checkpoint that expires its full TTL again.

        Its writes, their registry and (when read as the latest) the pointer too,
        as upstream does, so they expire together.
        """
        ttl = self.ttl_config or {}
        if not ttl.get("refresh_on_read") or "default_ttl" not in ttl:
            return
        if await self._redis.ttl(key) <= 0:  # gone, or kept without expiry
            return
        registry = self._zset_key(*stored)
        members = cast(list[str | bytes], await self._redis.zrange(registry, 0, -1))
        keys = [key, registry, *(_text(k) for k in members)]
        if latest:
            keys.append(self._make_redis_checkpoint_latest_key(*stored[:2]))
        pipe = self._redis.pipeline(transaction=False)
        for name in keys:
            pipe.expire(name, int(ttl["default_ttl"] * 60))
        await pipe.execute()


def _names(doc: dict[str, Any]) -> tuple[Any, Any, Any]:
    return doc.get("thread_id"), doc.get("checkpoint_ns"), doc.get("checkpoint_id")


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _parent(stored: StoredId, doc: dict[str, Any]) -> StoredId:
    return StoredId(stored.thread_id, stored.checkpoint_ns, doc.get("parent_checkpoint_id") or "")


def _is_send(write: dict[str, Any]) -> bool:
    return bool(write.get("channel") == TASKS)


def _write_order(write: dict[str, Any]) -> tuple[str, str, int]:
    return writes_sort_key(
        write.get("task_path", ""), write.get("task_id", ""), int(write.get("idx", 0))
    )
