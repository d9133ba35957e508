"""Pruning threads: delete them, or keep each namespace's latest checkpoint."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from langgraph.checkpoint.redis.util import (
    from_storage_safe_id,
    from_storage_safe_str,
    to_storage_safe_str,
)
from langgraph.constants import TASKS
from redis.commands.search.document import Document

from tether.checkpointing._cascade import check_thread_ids
from tether.checkpointing._prune import (
    CheckpointRow,
    check_prune_args,
    latest_per_namespace,
    plan_keep_latest,
    refuse_delta_threads,
    sends_parent_candidates,
    uses_delta_channel,
)
from tether.checkpointing.redis._base import doc_field
from tether.checkpointing.redis._deleting import Deleting
from tether.checkpointing.redis._matching import Match

__all__ = ["Pruning"]


class Pruning(Deleting):
    """``aprune`` with the ``"delete"`` and ``"keep_latest"`` strategies."""

    # The base class's signature: upstream's extra keep_last/max_results are not offered.
    async def aprune(  # type: ignore[override]
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest"
    ) -> None:
        """Prune the checkpoints of ``thread_ids``.

        ``"delete"`` removes everything of the threads. ``"keep_latest"``
        follows the rules in :mod:`tether.checkpointing._prune`, the same on
        every backend.

        Raises:
            IdArgumentError: ``thread_ids`` is a single string, or not a collection.
            ConfigurationError: ``strategy`` is unknown.
            NotImplementedError: ``"keep_latest"`` on a thread that uses a
                ``DeltaChannel``; nothing is pruned then.
        """
        threads = check_prune_args(check_thread_ids(thread_ids), strategy)
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
        refuse_delta_threads(
            t for t, docs in found.items() for d in docs if uses_delta_channel(_metadata(d))
        )
        for thread_id, docs in found.items():
            await self._keep_latest(thread_id, docs)

    async def _keep_latest(self, thread_id: str, docs: list[Document]) -> None:
        # The rules are the shared planner's; this method only maps Redis documents to
        # rows (real namespaces, so the planner can tell the root and subgraph calls
        # apart) and the plan back to stored keys.
        by_row = {
            CheckpointRow.from_metadata(
                from_storage_safe_str(doc_field(d, "checkpoint_ns")),
                doc_field(d, "checkpoint_id"),
                from_storage_safe_id(doc_field(d, "parent_checkpoint_id")) or None,
                _metadata(d),
            ): d
            for d in docs
        }
        rows = list(by_row)
        heads = latest_per_namespace(rows)
        versions = {
            ns: int(getattr(by_row[head], "$.checkpoint.v", 4) or 4) for ns, head in heads.items()
        }
        sends = await self._parents_with_sends(thread_id, sends_parent_candidates(heads, versions))
        plan = plan_keep_latest(rows, sends)
        if not plan:
            return
        stored = to_storage_safe_str
        dropped = {stored(ns) for ns in plan.dropped_namespaces}
        doomed = {(stored(ns), cid) for ns, cid in plan.deleted} | {
            (stored(r.ns), r.checkpoint_id) for r in rows if r.ns in plan.dropped_namespaces
        }
        await self._delete_checkpoints(thread_id, doomed)
        await self._unlink(self._make_redis_checkpoint_latest_key(thread_id, ns) for ns in dropped)
        keys = {(r.ns, r.checkpoint_id): d.id for r, d in by_row.items()}
        for orphan in plan.orphaned:
            await self._redis.json().set(keys[orphan], "$.parent_checkpoint_id", "")
        await self._repoint_latest(thread_id, {stored(ns) for ns in heads} - dropped)

    async def _parents_with_sends(self, thread_id: str, wanted: dict[str, str]) -> dict[str, str]:
        """Of the candidate parents (per namespace), those holding pending sends."""
        if not wanted:
            return {}
        sends = await self._search(
            self.checkpoint_writes_index,
            self._thread_where(thread_id)
            & Match.tag("channel", TASKS)
            & Match.tag("checkpoint_id", wanted.values()),
            ["checkpoint_ns", "checkpoint_id"],
        )
        have = {
            (from_storage_safe_str(doc_field(d, "checkpoint_ns")), doc_field(d, "checkpoint_id"))
            for d in sends
        }
        return {ns: parent for ns, parent in wanted.items() if (ns, parent) in have}


def _metadata(doc: Document) -> dict[str, Any]:
    loaded: dict[str, Any] = orjson.loads(getattr(doc, "$.metadata", "{}") or "{}")
    return loaded
