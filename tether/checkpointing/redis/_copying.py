"""Copying a thread's checkpoints, writes, registries and pointers to another thread."""

from __future__ import annotations

from langgraph.checkpoint.redis.base import REDIS_KEY_SEPARATOR
from langgraph.checkpoint.redis.util import to_storage_safe_id

from tether.checkpointing.redis._base import RedisBase, doc_field

__all__ = ["Copying"]


class Copying(RedisBase):
    """``acopy_thread``, in one transaction."""

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

        pairs = {(doc_field(d, "checkpoint_ns"), doc_field(d, "checkpoint_id")) for d in writes}
        pairs |= {
            (doc_field(d, "checkpoint_ns"), doc_field(d, "checkpoint_id")) for d in checkpoints
        }
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
