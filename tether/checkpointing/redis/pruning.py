"""Pruning threads: delete them, or keep each namespace's latest checkpoint."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import orjson
from langgraph.checkpoint.redis.util import to_storage_safe_str
from langgraph.constants import TASKS
from redis.commands.search.document import Document

# redisvl ships no type information (no py.typed marker).
from redisvl.query.filter import Tag  # type: ignore[import-untyped]

from tether.checkpointing.prune import check_prune_args
from tether.checkpointing.redis.base import doc_field
from tether.checkpointing.redis.deleting import Deleting

__all__ = ["Pruning"]

# Metadata keys LangGraph writes on threads that use a DeltaChannel, whose value
# keep_latest could not rebuild once older checkpoints are gone.
_DELTA_MARKERS = ("counters_since_delta_snapshot", "delta_writes_versioned")


class Pruning(Deleting):
    """``aprune`` with the ``"delete"`` and ``"keep_latest"`` strategies."""

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
            by_ns[doc_field(doc, "checkpoint_ns")][doc_field(doc, "checkpoint_id")] = doc
        heads = {ns: ids[max(ids)] for ns, ids in by_ns.items()}
        sends_from = await self._parents_with_sends(thread_id, heads)
        kept = {
            ns: {doc_field(h, "checkpoint_id")} | sends_from.get(ns, set())
            for ns, h in heads.items()
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
            and (ns, doc_field(kept_doc, "parent_checkpoint_id")) in doomed
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
            if (parent := doc_field(head, "parent_checkpoint_id"))
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
        have = {(doc_field(d, "checkpoint_ns"), doc_field(d, "checkpoint_id")) for d in sends}
        return {ns: {parent} for ns, parent in wanted.items() if (ns, parent) in have}
