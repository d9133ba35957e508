"""Deleting a whole thread, or the checkpoints of some runs, with all they own."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from langgraph.checkpoint.redis.util import from_storage_safe_id, to_storage_safe_id

from tether.checkpointing.redis._base import RedisBase, chunks, doc_field
from tether.checkpointing.redis._matching import Match

__all__ = ["Deleting"]

_DELETE_ROUNDS = 5


class Deleting(RedisBase):
    """``adelete_thread`` that leaves no key behind, and ``adelete_for_runs``."""

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
            pairs = {(doc_field(d, "checkpoint_ns"), doc_field(d, "checkpoint_id")) for d in docs}
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
        checkpoint left in its namespace. ``run_ids`` is checked by the public
        method (:meth:`RedisSaver.adelete_for_runs`).
        """
        safe = [to_storage_safe_id(str(run_id)) for run_id in run_ids]
        doomed: dict[str, set[tuple[str, str]]] = defaultdict(set)
        for chunk in chunks(safe, 100):
            for doc in await self._search(
                self.checkpoints_index,
                Match.tag("run_id", chunk),
                ["thread_id", "checkpoint_ns", "checkpoint_id"],
            ):
                doomed[from_storage_safe_id(doc_field(doc, "thread_id"))].add(
                    (doc_field(doc, "checkpoint_ns"), doc_field(doc, "checkpoint_id"))
                )
        for thread_id, pairs in doomed.items():
            await self._delete_checkpoints(thread_id, pairs)
            await self._repoint_latest(thread_id, {ns for ns, _ in pairs})

    async def _delete_checkpoints(self, thread_id: str, pairs: set[tuple[str, str]]) -> None:
        """Delete the (stored namespace, stored id) checkpoints of a thread and what they own."""
        ids = sorted({cid for _, cid in pairs})
        keys = {self._make_redis_checkpoint_key(thread_id, ns, cid) for ns, cid in pairs}
        for chunk in chunks(ids, 100):
            for doc in await self._search(
                self.checkpoint_writes_index,
                self._thread_where(thread_id) & Match.tag("checkpoint_id", chunk),
                ["checkpoint_ns", "checkpoint_id"],
            ):
                if (doc_field(doc, "checkpoint_ns"), doc_field(doc, "checkpoint_id")) in pairs:
                    keys.add(doc.id)
        await self._unlink(keys | self._owned_keys(thread_id, pairs))
