"""Reading checkpoints back: ``aget_tuple`` and ``alist`` with filters and ``before``."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import orjson
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple, get_checkpoint_id
from langgraph.checkpoint.redis.util import (
    from_storage_safe_id,
    to_storage_safe_id,
    to_storage_safe_str,
)
from redis.commands.search.document import Document

from tether.checkpointing.redis._base import doc_field
from tether.checkpointing.redis._matching import EVERYTHING, Match
from tether.checkpointing.redis._reading import Reading, StoredId

__all__ = ["Listing", "uuid6_millis"]

# Saves by other workers are found even if their clocks run this far behind.
_CLOCK_SKEW_MS = 10_000
# 100-ns intervals from the UUID epoch (1582-10-15) to the Unix epoch.
_UUID_EPOCH_OFFSET = 0x01B21DD213814000


def uuid6_millis(checkpoint_id: str) -> float | None:
    """The Unix time in milliseconds a UUIDv6 (LangGraph's checkpoint ids) was made at."""
    try:
        parsed = uuid.UUID(checkpoint_id)
    except ValueError:
        return None
    if parsed.version != 6:
        return None
    value = parsed.int
    ticks = ((value >> 96) << 28) | (((value >> 80) & 0xFFFF) << 12) | ((value >> 64) & 0x0FFF)
    return (ticks - _UUID_EPOCH_OFFSET) / 10_000


def _metadata_matches(raw: Any, wanted: dict[str, Any]) -> bool:
    metadata = orjson.loads(raw) if isinstance(raw, str | bytes) else raw or {}
    return all(metadata.get(key) == value for key, value in wanted.items())


class Listing(Reading):
    """``aget_tuple`` and ``alist`` that agree with the other backends."""

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names, or its namespace's latest; ``None`` if absent.

        Only a checkpoint stored under exactly this thread and namespace is
        returned (key parts are joined with ``:``, which ids may contain), and
        not the stub document ``aput_writes`` leaves before ``aput``.
        """
        conf = config["configurable"]
        thread_id, ns = str(conf["thread_id"]), conf.get("checkpoint_ns", "")
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id:
            key = self._make_redis_checkpoint_key(thread_id, ns, checkpoint_id)
        else:
            latest = await self._latest_key(thread_id, ns)
            if latest is None:
                return None
            key = latest
        wanted = (to_storage_safe_id(thread_id), to_storage_safe_str(ns))
        found = await self._tuples([key], owner=wanted)
        if not found:
            return None
        stored = StoredId(
            *wanted, to_storage_safe_id(found[0].config["configurable"]["checkpoint_id"])
        )
        await self._refresh_ttl(key, stored, latest=not checkpoint_id)
        return found[0]

    async def _latest_key(self, thread_id: str, ns: str) -> str | None:
        """The key of the namespace's newest checkpoint; repairs a pointer left behind.

        The newest checkpoint id wins, as on the other backends. Saves are atomic
        now, but a process killed mid-save by an earlier version (or by upstream's
        saver) left the pointer on the checkpoint before: such a thread recovers
        on its next read, and the pointer moves forward (unless a save moved it
        meanwhile).

        RediSearch sorts in time linear in the checkpoints it matched (about 40 ms
        at 10,000), so only those saved since the pointed one was made are
        sorted: a checkpoint id is a UUIDv6, which carries its time. Without a
        usable pointer the whole namespace is.
        """
        pointer = self._make_redis_checkpoint_latest_key(thread_id, ns)
        found = await self._redis.get(pointer)
        seen = found.decode() if isinstance(found, bytes) else found
        where = self._thread_where(thread_id) & self._ns_where(ns)
        newest = await self._newest_since(where, seen) if seen else None
        if newest is None:
            docs = await self._search(
                self.checkpoints_index, where, ["checkpoint_id"], newest_first=True, limit=1
            )
            newest = docs[0] if docs else None
        if newest is None:
            return None
        if newest.id != seen:
            await self._move_pointer(pointer, seen, newest.id)
        key: str = newest.id
        return key

    async def _newest_since(self, where: Match, pointed: str) -> Document | None:
        """The newest checkpoint saved since the pointed one was made.

        Every checkpoint newer than the pointed one was saved after it was made
        (by clocks no further apart than ``_CLOCK_SKEW_MS``). ``None`` when the
        pointed id carries no time, or nothing was saved since (the pointed one
        is gone): then only a search of the whole namespace can tell.
        """
        made = uuid6_millis(pointed.rsplit(":", 1)[-1])
        if made is None:
            return None
        docs = await self._search(
            self.checkpoints_index,
            where & Match.at_least("checkpoint_ts", made - _CLOCK_SKEW_MS),
            ["checkpoint_id"],
            newest_first=True,
            limit=1,
        )
        return docs[0] if docs else None

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

    def _list_where(self, config: RunnableConfig | None, filter: dict[str, Any] | None) -> Match:
        where = EVERYTHING
        configurable = (config or {}).get("configurable", {})
        if (thread_id := configurable.get("thread_id")) is not None:
            where &= self._thread_where(str(thread_id))
        if run_id := configurable.get("run_id"):
            where &= Match.tag("run_id", to_storage_safe_id(run_id))
        if (checkpoint_ns := configurable.get("checkpoint_ns")) is not None:
            where &= self._ns_where(checkpoint_ns)
        if config and (checkpoint_id := get_checkpoint_id(config)):
            where &= Match.tag("checkpoint_id", to_storage_safe_id(checkpoint_id))
        # aput copies source and step to indexed fields only when the metadata
        # has both, so only a filter on both can use them; the metadata itself
        # is checked afterwards in every case.
        source, step = (filter or {}).get("source"), (filter or {}).get("step")
        if isinstance(source, str) and source and type(step) is int:
            where &= Match.tag("source", source) & Match.numeric("step", step)
        return where
