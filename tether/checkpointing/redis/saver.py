"""Redis checkpointer: LangGraph's AsyncRedisSaver, with its conformance gaps closed.

What :class:`RedisSaver` changes, and why (everything else is upstream code):

* ``alist`` treats ``checkpoint_ns=""`` as the root namespace (upstream lists
  every namespace), honours ``before`` for any checkpoint id (upstream only for
  ULIDs, while LangGraph makes UUIDv6 ids) and filters on any metadata key
  (upstream raises for keys other than ``source``, ``step`` and ``run_id``).
* ``aprune`` returns for an empty list, refuses a single ``str`` and keeps the
  latest checkpoint of each namespace with its writes, like upstream Postgres.
* ``adelete_for_runs`` and ``acopy_thread`` exist.
* The per-checkpoint write registry lives under the saver's prefix (upstream
  writes it to ``write_keys_zset:...`` whatever the prefix, so two prefixes read
  each other's pending writes), and ``adelete_thread`` removes every key of the
  thread, writes of unsaved checkpoints included.
* ``aget_tuple`` returns ``None``, not an empty tuple, for a checkpoint whose
  writes came before it, and ``alist`` shows those writes once it is saved.
* ``list``, ``delete_thread`` and ``put_writes`` (which upstream calls without
  ``task_path``) bridge to the event loop for sync callers.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, cast

import orjson
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointMetadata, CheckpointTuple, get_checkpoint_id
from langgraph.constants import TASKS

from tether.checkpointing._bridge import SyncBridge
from tether.checkpointing.prune import check_prune_args
from tether.checkpointing.url import CheckpointerURL, redact
from tether.errors import (
    BackendUnavailableError,
    ConfigurationError,
    MissingDependencyError,
    MissingRedisModuleError,
)

try:
    from langgraph.checkpoint.redis.aio import AsyncRedisSaver
    from langgraph.checkpoint.redis.base import CHECKPOINT_WRITE_PREFIX, REDIS_KEY_SEPARATOR
    from langgraph.checkpoint.redis.key_registry import AsyncCheckpointKeyRegistry
    from langgraph.checkpoint.redis.util import (
        from_storage_safe_id,
        from_storage_safe_str,
        to_storage_safe_id,
        to_storage_safe_str,
    )
    from redis.asyncio import Redis
    from redis.commands.search.document import Document
    from redis.exceptions import RedisError

    # redisvl ships no type information (no py.typed marker).
    from redisvl.index import AsyncSearchIndex  # type: ignore[import-untyped]
    from redisvl.query import FilterQuery  # type: ignore[import-untyped]
    from redisvl.query.filter import FilterExpression, Num, Tag  # type: ignore[import-untyped]
except ImportError as exc:
    raise MissingDependencyError("the Redis checkpointer", "redis") from exc

__all__ = ["RedisSaver", "open_redis", "required_modules"]

_OPTIONS = {"key_prefix", "ttl", "connect_timeout"}
# Module names as MODULE LIST reports them -> the name users know.
_REQUIRED_MODULES = {"search": "RediSearch", "ReJSON": "RedisJSON"}
_PAGE = 1000  # documents per FT.SEARCH page and keys per pipeline
# RediSearch stops a query after its TIMEOUT (500 ms by default) and, with its
# default ON_TIMEOUT policy, returns the partial result as if complete: a busy
# server would make a delete miss keys. Our queries ask for this long instead.
_SEARCH_TIMEOUT_MS = 60_000
_DELETE_ROUNDS = 5
# Metadata keys LangGraph writes on threads that use a DeltaChannel, whose value
# keep_latest could not rebuild once older checkpoints are gone.
_DELTA_MARKERS = ("counters_since_delta_snapshot", "delta_writes_versioned")


class _PrefixedKeyRegistry(AsyncCheckpointKeyRegistry):
    """Upstream's per-checkpoint write registry, with its keys under the saver's prefix."""

    def __init__(self, client: Any, prefix: str) -> None:
        super().__init__(client)
        self._prefix = prefix

    def make_write_keys_zset_key(  # type: ignore[override]  # instance, not static
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str
    ) -> str:
        return REDIS_KEY_SEPARATOR.join(
            [
                self._prefix,
                to_storage_safe_id(thread_id),
                to_storage_safe_str(checkpoint_ns),
                to_storage_safe_id(checkpoint_id),
            ]
        )


def _field(doc: Document, name: str) -> str:
    return str(getattr(doc, name, ""))


def _metadata_matches(raw: Any, wanted: dict[str, Any]) -> bool:
    metadata = orjson.loads(raw) if isinstance(raw, str | bytes) else raw or {}
    return all(metadata.get(key) == value for key, value in wanted.items())


def _chunks(items: Sequence[Any], size: int = _PAGE) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class RedisSaver(SyncBridge, AsyncRedisSaver):
    """``AsyncRedisSaver`` with tether's fixes for the official conformance suite.

    Works from async code directly and from sync code through
    :func:`tether.open_checkpointer_sync`.
    """

    async def asetup(self) -> None:
        """Create the indexes and the write registry (under the prefix when one is set)."""
        await super().asetup()
        if self._checkpoint_write_prefix != CHECKPOINT_WRITE_PREFIX:
            # With the default prefixes keep upstream's layout, so data an
            # upstream saver wrote stays readable.
            self._key_registry = _PrefixedKeyRegistry(
                self._redis, f"{self._checkpoint_write_prefix}_keys_zset"
            )

    def _zset_key(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> str:
        assert self._key_registry is not None, "asetup() has not run"
        return self._key_registry.make_write_keys_zset_key(thread_id, checkpoint_ns, checkpoint_id)

    # -- reading -----------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Upstream's ``aget_tuple``, but ``None`` for a checkpoint not saved yet.

        Upstream returns a tuple with an empty checkpoint, which is its own
        parent, for the stub document ``aput_writes`` leaves before ``aput``.
        """
        found = await super().aget_tuple(config)
        return found if found is None or "id" in found.checkpoint else None

    async def _search(
        self,
        index: AsyncSearchIndex,
        where: FilterExpression | str,
        fields: list[str],
        *,
        newest_first: bool = False,
        limit: int | None = None,
    ) -> list[Document]:
        """Every document ``where`` matches (upstream stops at 10,000), page by page."""
        docs: list[Document] = []
        while limit is None or len(docs) < limit:
            size = _PAGE if limit is None else min(_PAGE, limit - len(docs))
            query = FilterQuery(
                filter_expression=where,
                return_fields=fields,
                num_results=size,
                sort_by=("checkpoint_id", "DESC") if newest_first else None,
            )
            query.paging(len(docs), size).timeout(_SEARCH_TIMEOUT_MS)
            page = (await index.search(query)).docs
            docs.extend(page)
            if len(page) < size:
                break
        return docs

    def _thread_where(self, thread_id: str) -> FilterExpression:
        return Tag("thread_id") == to_storage_safe_id(thread_id)

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
            if _field(doc, "checkpoint_id")
            and not (before_id and from_storage_safe_id(_field(doc, "checkpoint_id")) >= before_id)
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

    async def _documents(self, keys: Sequence[str]) -> list[dict[str, Any] | None]:
        """The JSON documents at ``keys`` (``None`` for a missing one), in order."""
        docs: list[dict[str, Any] | None] = []
        for chunk in _chunks(keys):
            found: list[Any] = await self._redis.json().mget(list(chunk), "$")
            docs.extend(doc[0] if doc else None for doc in found)
        return docs

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

    # -- deleting ----------------------------------------------------------------

    async def _unlink(self, keys: Iterable[str]) -> None:
        for chunk in _chunks(sorted(set(keys))):
            await self._redis.unlink(*chunk)

    def _owned_keys(self, thread_id: str, pairs: Iterable[tuple[str, str]]) -> set[str]:
        """The write-registry keys of the (stored namespace, stored id) ``pairs``."""
        return {self._zset_key(thread_id, ns, cid) for ns, cid in pairs}

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, write, registry and pointer key of ``thread_id``.

        Searches again after each round, so that documents a run saved while
        the round ran go too (up to a few rounds).
        """
        where = self._thread_where(thread_id)
        fields = ["checkpoint_ns", "checkpoint_id"]
        for _ in range(_DELETE_ROUNDS):
            docs = await self._search(self.checkpoints_index, where, fields)
            docs += await self._search(self.checkpoint_writes_index, where, fields)
            if not docs:
                return
            pairs = {(_field(d, "checkpoint_ns"), _field(d, "checkpoint_id")) for d in docs}
            await self._unlink(
                {d.id for d in docs}
                | self._owned_keys(thread_id, pairs)
                # with the stubs aput_writes leaves where a checkpoint is not saved yet
                | {self._make_redis_checkpoint_key(thread_id, ns, cid) for ns, cid in pairs}
                | {self._make_redis_checkpoint_latest_key(thread_id, ns) for ns, _ in pairs}
            )

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints saved by the runs ``run_ids``, with their writes.

        A checkpoint belongs to the run its config's ``run_id`` names, or else its
        metadata's. A thread's latest-checkpoint pointer moves back to the newest
        checkpoint left in its namespace.

        Raises:
            TypeError: ``run_ids`` is a single string.
        """
        if isinstance(run_ids, str):
            raise TypeError("run_ids must be a sequence of run ids, not a single str")
        safe = [to_storage_safe_id(str(run_id)) for run_id in run_ids]
        doomed: dict[str, set[tuple[str, str]]] = defaultdict(set)
        for chunk in _chunks(safe, 100):
            for doc in await self._search(
                self.checkpoints_index,
                Tag("run_id") == list(chunk),
                ["thread_id", "checkpoint_ns", "checkpoint_id"],
            ):
                doomed[from_storage_safe_id(_field(doc, "thread_id"))].add(
                    (_field(doc, "checkpoint_ns"), _field(doc, "checkpoint_id"))
                )
        for thread_id, pairs in doomed.items():
            await self._delete_checkpoints(thread_id, pairs)
            await self._repoint_latest(thread_id, {ns for ns, _ in pairs})

    async def _delete_checkpoints(self, thread_id: str, pairs: set[tuple[str, str]]) -> None:
        """Delete the (stored namespace, stored id) checkpoints of a thread and what they own."""
        ids = sorted({cid for _, cid in pairs})
        keys = {self._make_redis_checkpoint_key(thread_id, ns, cid) for ns, cid in pairs}
        for chunk in _chunks(ids, 100):
            for doc in await self._search(
                self.checkpoint_writes_index,
                self._thread_where(thread_id) & (Tag("checkpoint_id") == list(chunk)),
                ["checkpoint_ns", "checkpoint_id"],
            ):
                if (_field(doc, "checkpoint_ns"), _field(doc, "checkpoint_id")) in pairs:
                    keys.add(doc.id)
        await self._unlink(keys | self._owned_keys(thread_id, pairs))

    async def _repoint_latest(
        self, thread_id: str, namespaces: Iterable[str], *, keep_valid: bool = True
    ) -> None:
        """Point each namespace's latest pointer at its newest checkpoint.

        With ``keep_valid``, a pointer whose checkpoint still exists is left alone.
        """
        for ns in namespaces:
            pointer = self._make_redis_checkpoint_latest_key(thread_id, ns)
            target = await self._redis.get(pointer) if keep_valid else None
            if target and await self._redis.exists(target):
                continue
            newest = await self._search(
                self.checkpoints_index,
                self._thread_where(thread_id) & (Tag("checkpoint_ns") == ns),
                ["checkpoint_id"],
                newest_first=True,
                limit=1,
            )
            if newest:
                await self._redis.set(pointer, newest[0].id, keepttl=True)
            else:
                await self._redis.unlink(pointer)

    # The base class's signature: upstream's extra keep_last/max_results are not offered.
    async def aprune(  # type: ignore[override]
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest"
    ) -> None:
        """Prune the checkpoints of ``thread_ids``.

        ``"delete"`` removes everything of the threads. ``"keep_latest"`` keeps
        each namespace's latest checkpoint (plus its parent when it predates
        checkpoint format v4 and has pending sends there) with its pending
        writes, and deletes the rest. A kept checkpoint whose parent is deleted
        is left with no parent. A subgraph call's namespace (one with ``:``) goes
        with the root checkpoint the call started from, once that one is saved
        and deleted. Pending writes of checkpoints not saved yet are kept: a run
        saves them before its checkpoint.

        Raises:
            TypeError: ``thread_ids`` is a single string.
            ConfigurationError: ``strategy`` is unknown.
            NotImplementedError: ``"keep_latest"`` on a thread that uses a
                ``DeltaChannel``; nothing is pruned then.
        """
        threads = check_prune_args(thread_ids, strategy)
        if strategy == "delete":
            for thread_id in threads:
                await self.adelete_thread(thread_id)
            return
        fields = [
            "checkpoint_ns",
            "checkpoint_id",
            "parent_checkpoint_id",
            "$.metadata",
            "$.checkpoint.v",
        ]
        found = {
            t: await self._search(self.checkpoints_index, self._thread_where(t), fields)
            for t in threads
        }
        delta = sorted(
            t
            for t, docs in found.items()
            for d in docs
            if any(
                m in orjson.loads(getattr(d, "$.metadata", "{}") or "{}") for m in _DELTA_MARKERS
            )
        )
        if delta:
            raise NotImplementedError(
                f"keep_latest can't prune threads that use a DeltaChannel: "
                f"{', '.join(dict.fromkeys(delta))}; use strategy='delete' or leave them"
            )
        for thread_id, docs in found.items():
            if docs:
                await self._keep_latest(thread_id, docs)

    async def _keep_latest(self, thread_id: str, docs: list[Document]) -> None:
        by_ns: dict[str, dict[str, Document]] = defaultdict(dict)
        for doc in docs:
            by_ns[_field(doc, "checkpoint_ns")][_field(doc, "checkpoint_id")] = doc
        heads = {ns: ids[max(ids)] for ns, ids in by_ns.items()}
        sends_from = await self._parents_with_sends(thread_id, heads)
        kept = {
            ns: {_field(h, "checkpoint_id")} | sends_from.get(ns, set()) for ns, h in heads.items()
        }
        root_ids, kept_roots = (
            set(by_ns.get(to_storage_safe_str(""), {})),
            kept.get(to_storage_safe_str(""), set()),
        )
        calls = set()
        for ns, head in heads.items():
            parents = orjson.loads(getattr(head, "$.metadata", "{}") or "{}").get("parents") or {}
            root = parents.get("")
            if ":" in ns and root in root_ids and root not in kept_roots:
                calls.add(ns)
        doomed = {
            (ns, cid)
            for ns, ids in by_ns.items()
            for cid in ids
            if ns in calls or cid not in kept[ns]
        }
        if not doomed:
            return
        await self._delete_checkpoints(thread_id, doomed)
        await self._unlink(self._make_redis_checkpoint_latest_key(thread_id, ns) for ns in calls)
        orphans = [
            kept_doc.id
            for ns, ids in kept.items()
            if ns not in calls
            for cid in ids
            if (kept_doc := by_ns[ns].get(cid)) is not None
            and (ns, _field(kept_doc, "parent_checkpoint_id")) in doomed
        ]
        for key in orphans:
            await self._redis.json().set(key, "$.parent_checkpoint_id", "")
        await self._repoint_latest(thread_id, set(kept) - calls)

    async def _parents_with_sends(
        self, thread_id: str, heads: dict[str, Document]
    ) -> dict[str, set[str]]:
        """Per namespace, the head's parent when the head predates v4 and reads sends there."""
        wanted = {
            ns: parent
            for ns, head in heads.items()
            if (parent := _field(head, "parent_checkpoint_id"))
            and int(getattr(head, "$.checkpoint.v", 4) or 4) < 4
        }
        if not wanted:
            return {}
        sends = await self._search(
            self.checkpoint_writes_index,
            self._thread_where(thread_id)
            & (Tag("channel") == TASKS)
            & (Tag("checkpoint_id") == sorted(set(wanted.values()))),
            ["checkpoint_ns", "checkpoint_id"],
        )
        have = {(_field(d, "checkpoint_ns"), _field(d, "checkpoint_id")) for d in sends}
        return {ns: {parent} for ns, parent in wanted.items() if (ns, parent) in have}

    # -- copying -----------------------------------------------------------------

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, pending write, registry and pointer of a thread.

        The target reads back like the source through ``aget_tuple`` and
        ``alist``. Checkpoints the target already has with the same namespace
        and id are overwritten; its others are kept, and then each namespace's
        latest pointer goes to its newest checkpoint. Copying a thread onto
        itself does nothing.
        """
        if source_thread_id == target_thread_id:
            return
        where = self._thread_where(source_thread_id)
        fields = ["checkpoint_ns", "checkpoint_id"]
        checkpoints = await self._search(self.checkpoints_index, where, fields)
        writes = await self._search(self.checkpoint_writes_index, where, fields)
        if not checkpoints and not writes:
            return
        src, dst = to_storage_safe_id(source_thread_id), to_storage_safe_id(target_thread_id)
        old_part = f"{REDIS_KEY_SEPARATOR}{src}{REDIS_KEY_SEPARATOR}"
        new_part = f"{REDIS_KEY_SEPARATOR}{dst}{REDIS_KEY_SEPARATOR}"

        def retarget(key: str | bytes) -> str:
            text = key.decode() if isinstance(key, bytes) else key
            head, _, rest = text.partition(old_part)
            return f"{head}{new_part}{rest}"

        pairs = {(_field(d, "checkpoint_ns"), _field(d, "checkpoint_id")) for d in writes}
        pairs |= {(_field(d, "checkpoint_ns"), _field(d, "checkpoint_id")) for d in checkpoints}
        keys = [d.id for d in writes + checkpoints]
        # aput_writes leaves a stub document where a checkpoint is not saved yet.
        keys += sorted(
            {self._make_redis_checkpoint_key(source_thread_id, ns, cid) for ns, cid in pairs}
            - set(keys)
        )
        zsets = sorted(self._owned_keys(source_thread_id, pairs))
        merging = await self._search(
            self.checkpoints_index, self._thread_where(target_thread_id), ["checkpoint_id"], limit=1
        )
        pointers = (
            sorted(
                {self._make_redis_checkpoint_latest_key(source_thread_id, ns) for ns, _ in pairs}
            )
            if not merging
            else []
        )
        read = self._redis.pipeline(transaction=False)
        for key in zsets:
            read.zrange(key, 0, -1, withscores=True)
        for key in pointers:
            read.get(key)
        indexes = await read.execute()
        write = self._redis.pipeline(transaction=True)
        created: list[str] = []
        for key, doc in zip(keys, await self._documents(keys), strict=True):
            if doc is not None:  # else deleted since the search
                created.append(retarget(key))
                write.json().set(
                    created[-1], "$", {**doc, "thread_id": dst} if "thread_id" in doc else doc
                )
        for key, found in zip(zsets + pointers, indexes, strict=True):
            if found and isinstance(found, list):
                created.append(retarget(key))
                write.zadd(created[-1], {retarget(member): score for member, score in found})
            elif found:
                created.append(retarget(key))
                write.set(created[-1], retarget(found))
        if self.ttl_config and "default_ttl" in self.ttl_config:
            for key in created:
                write.expire(key, int(self.ttl_config["default_ttl"] * 60))
        await write.execute()
        if merging:
            await self._repoint_latest(target_thread_id, {ns for ns, _ in pairs}, keep_valid=False)

    # -- sync twins upstream lacks -------------------------------------------------

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Sync twin of :meth:`alist` (reads the whole page, then yields it)."""

        async def collect() -> list[CheckpointTuple]:
            return [t async for t in self.alist(config, filter=filter, before=before, limit=limit)]

        return iter(self._run_sync(collect(), "list"))

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


async def required_modules(client: Redis) -> list[str]:
    """The names of the Redis modules the saver needs that ``client``'s server lacks."""
    info = await client.execute_command("MODULE LIST")
    loaded = set()
    for module in info:
        fields = (
            dict(zip(module[::2], module[1::2], strict=False))
            if isinstance(module, list)
            else module
        )
        name = fields.get(b"name", fields.get("name"))
        loaded.add(name.decode() if isinstance(name, bytes) else str(name))
    return [label for name, label in _REQUIRED_MODULES.items() if name not in loaded]


def _prefixes(key_prefix: str | None) -> dict[str, Any]:
    if key_prefix is None:
        return {}
    if not key_prefix or ":" in key_prefix or not key_prefix.isprintable():
        raise ConfigurationError(
            f"Redis key_prefix {key_prefix!r} must be non-empty printable text without ':' "
            "(the saver uses ':' to separate key parts)"
        )
    return {
        "checkpoint_prefix": f"{key_prefix}_checkpoint",
        "checkpoint_write_prefix": f"{key_prefix}_checkpoint_write",
    }


@asynccontextmanager
async def open_redis(url: CheckpointerURL, **options: Any) -> AsyncIterator[RedisSaver]:
    """Connect to the Redis server ``url`` names, check its modules, yield a set-up saver.

    Args:
        url: The parsed ``redis://`` or ``rediss://`` URL.
        **options: ``key_prefix`` (isolates several tether deployments in one
            Redis), ``ttl`` (passed to the saver), ``connect_timeout`` in seconds.
    """
    unknown = set(options) - _OPTIONS
    if unknown:
        raise ConfigurationError(
            f"unknown option(s) for redis: {', '.join(sorted(unknown))}; "
            f"accepted: {', '.join(sorted(_OPTIONS))}"
        )
    timeout = float(options.get("connect_timeout", 5))
    client = Redis.from_url(url.url, socket_connect_timeout=timeout)
    try:
        try:
            await client.ping()
        except (RedisError, OSError) as exc:
            raise BackendUnavailableError(
                f"cannot reach Redis at {url.where} ({redact(url.url)}): {exc}"
            ) from exc
        missing = await required_modules(client)
        if missing:
            raise MissingRedisModuleError(url.where, missing)
        saver = RedisSaver(
            redis_client=client, ttl=options.get("ttl"), **_prefixes(options.get("key_prefix"))
        )
        await saver.asetup()
        yield saver
    finally:
        await client.aclose()
