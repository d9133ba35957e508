"""The document access every capability of the Redis saver builds on."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from langgraph.checkpoint.redis.aio import AsyncRedisSaver
from langgraph.checkpoint.redis.base import CHECKPOINT_WRITE_PREFIX
from langgraph.checkpoint.redis.util import to_storage_safe_id, to_storage_safe_str
from redis.commands.search.document import Document

# redisvl ships no type information (no py.typed marker).
from redisvl.index import AsyncSearchIndex  # type: ignore[import-untyped]
from redisvl.query import FilterQuery  # type: ignore[import-untyped]

from tether.checkpointing.redis._keys import PrefixedKeyRegistry
from tether.checkpointing.redis._matching import Match
from tether.checkpointing.redis._serde import RedisSerde

__all__ = ["RedisBase", "chunks", "doc_field"]

# KEYS: a latest pointer. ARGV: the value it was read with ("" for none), the key
# to point at, the expiry in seconds ("" for none). Moves the pointer only if no
# save moved it since it was read.
_REPOINT = """
local current = redis.call('GET', KEYS[1])
if (current or '') ~= ARGV[1] then return 0 end
if current then
  redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
elseif ARGV[3] ~= '' then
  redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
else
  redis.call('SET', KEYS[1], ARGV[2])
end
return 1
"""
_PAGE = 1000  # documents per FT.SEARCH page and keys per pipeline
# RediSearch stops a query after its TIMEOUT (500 ms by default) and, with its
# default ON_TIMEOUT policy, returns the partial result as if complete: a busy
# server would make a delete miss keys. Our queries ask for this long instead.
_SEARCH_TIMEOUT_MS = 60_000


def doc_field(doc: Document, name: str) -> str:
    """The field ``name`` of a search result, ``""`` when it was not returned."""
    return str(getattr(doc, name, ""))


def chunks(items: Sequence[Any], size: int = _PAGE) -> Iterator[Sequence[Any]]:
    """``items`` in slices of at most ``size``."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


class RedisBase(AsyncRedisSaver):
    """``AsyncRedisSaver`` with paged searches, bulk reads and the prefixed write registry."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # LangGraph's default serializer, as PostgresSaver's (see serde).
        self._serde = RedisSerde()
        self.serde = self._serde

    async def asetup(self) -> None:
        """Create the indexes and the write registry (under the prefix when one is set)."""
        await super().asetup()
        self._repoint_script = self._redis.register_script(_REPOINT)
        if self._checkpoint_write_prefix != CHECKPOINT_WRITE_PREFIX:
            # With the default prefixes keep upstream's layout, so data an
            # upstream saver wrote stays readable.
            self._key_registry = PrefixedKeyRegistry(
                self._redis, f"{self._checkpoint_write_prefix}_keys_zset"
            )

    @property
    def _ttl_seconds(self) -> int | None:
        ttl = self.ttl_config or {}
        return int(ttl["default_ttl"] * 60) if "default_ttl" in ttl else None

    async def _move_pointer(self, pointer: str, seen: str | None, key: str) -> None:
        """Point ``pointer`` at ``key`` unless it changed since it was read as ``seen``."""
        seconds = self._ttl_seconds
        args = [seen or "", key, "" if seconds is None else str(seconds)]
        await self._repoint_script(keys=[pointer], args=args)

    def _zset_key(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> str:
        assert self._key_registry is not None, "asetup() has not run"
        return self._key_registry.make_write_keys_zset_key(thread_id, checkpoint_ns, checkpoint_id)

    def _owned_keys(self, thread_id: str, pairs: Iterable[tuple[str, str]]) -> set[str]:
        """The write-registry keys of the (stored namespace, stored id) ``pairs``."""
        return {self._zset_key(thread_id, ns, cid) for ns, cid in pairs}

    def _thread_where(self, thread_id: str) -> Match:
        """The documents of exactly ``thread_id``."""
        return Match.tag("thread_id", to_storage_safe_id(thread_id))

    def _ns_where(self, checkpoint_ns: str) -> Match:
        """The documents of exactly the namespace ``checkpoint_ns``."""
        return Match.tag("checkpoint_ns", to_storage_safe_str(checkpoint_ns))

    async def _search(
        self,
        index: AsyncSearchIndex,
        where: Match,
        fields: list[str],
        *,
        newest_first: bool = False,
        limit: int | None = None,
    ) -> list[Document]:
        """Every document ``where`` matches exactly (upstream stops at 10,000), page by page.

        The query may return near-twins (see :mod:`~tether.checkpointing.redis._matching`);
        they are dropped here, so ``limit`` counts exact matches only.
        """
        found: list[Document] = []
        offset = 0
        returned = sorted(set(fields) | set(where.fields))
        while limit is None or len(found) < limit:
            size = _PAGE if limit is None else min(_PAGE, max(limit - len(found), 10))
            query = FilterQuery(
                filter_expression=where.query,
                return_fields=returned,
                num_results=size,
                sort_by=("checkpoint_id", "DESC") if newest_first else None,
            )
            query.paging(offset, size).timeout(_SEARCH_TIMEOUT_MS)
            page = (await index.search(query)).docs
            offset += len(page)
            found.extend(doc for doc in page if where.accepts(doc))
            if len(page) < size:
                break
        return found if limit is None else found[:limit]

    async def _documents(self, keys: Sequence[str]) -> list[dict[str, Any] | None]:
        """The JSON documents at ``keys`` (``None`` for a missing one), in order."""
        docs: list[dict[str, Any] | None] = []
        for chunk in chunks(keys):
            found: list[Any] = await self._redis.json().mget(list(chunk), "$")
            docs.extend(doc[0] if doc else None for doc in found)
        return docs

    async def _unlink(self, keys: Iterable[str]) -> None:
        for chunk in chunks(sorted(set(keys))):
            await self._redis.unlink(*chunk)

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
                self._thread_where(thread_id) & Match.tag("checkpoint_ns", ns),
                ["checkpoint_id"],
                newest_first=True,
                limit=1,
            )
            if newest:
                await self._redis.set(pointer, newest[0].id, keepttl=True)
            else:
                await self._redis.unlink(pointer)
