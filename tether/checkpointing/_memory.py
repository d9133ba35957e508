"""In-process checkpointer: LangGraph's InMemorySaver plus the capabilities it lacks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.constants import TASKS

from tether.checkpointing._cascade import check_run_ids, check_thread_ids
from tether.checkpointing._prune import (
    CheckpointRow,
    check_prune_args,
    latest_per_namespace,
    plan_keep_latest,
    refuse_delta_threads,
    sends_parent_candidates,
    uses_delta_channel,
)
from tether.checkpointing._url import CheckpointerURL
from tether.errors import ConfigurationError

__all__ = ["MemorySaver", "open_memory"]


class MemorySaver(InMemorySaver):
    """``InMemorySaver`` with ``delete_for_runs``, ``copy_thread`` and ``prune``.

    State lives in this process only; use it for tests and notebooks.
    """

    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread's checkpoints, writes and blobs, then tether's records of it."""
        from tether.store import store_for  # the store layer sits above the savers

        super().delete_thread(thread_id)
        store_for(self).sync.delete_thread(str(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete every checkpoint (and its writes) whose metadata ``run_id`` is listed.

        Records and steps those runs wrote go too.
        """
        from tether.store import store_for

        wanted = set(check_run_ids(run_ids))
        if not wanted:
            return
        for thread_id, namespaces in list(self.storage.items()):
            for ns, checkpoints in list(namespaces.items()):
                for checkpoint_id, (_, metadata_blob, _) in list(checkpoints.items()):
                    metadata = self.serde.loads_typed(metadata_blob)
                    if metadata.get("run_id") in wanted:
                        del checkpoints[checkpoint_id]
                        self.writes.pop((thread_id, ns, checkpoint_id), None)
        store_for(self).sync.delete_runs(sorted(wanted))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, write and blob of one thread to another."""
        for ns, checkpoints in self.storage.get(source_thread_id, {}).items():
            self.storage[target_thread_id][ns].update(checkpoints)
        for (thread_id, ns, checkpoint_id), writes in list(self.writes.items()):
            if thread_id == source_thread_id:
                self.writes[(target_thread_id, ns, checkpoint_id)] = dict(writes)
        for (thread_id, ns, channel, version), blob in list(self.blobs.items()):
            if thread_id == source_thread_id:
                self.blobs[(target_thread_id, ns, channel, version)] = blob

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Delete threads, or keep each namespace's latest checkpoint.

        ``"keep_latest"`` follows the rules in :mod:`tether.checkpointing._prune`,
        the same on every backend.

        Args:
            thread_ids: Threads to prune.
            strategy: ``"keep_latest"`` or ``"delete"``.

        Raises:
            IdArgumentError: ``thread_ids`` is a single string, or not a collection.
            ConfigurationError: ``strategy`` is unknown.
            NotImplementedError: ``"keep_latest"`` on a thread that uses a
                ``DeltaChannel``; nothing is pruned then.
        """
        threads = check_prune_args(check_thread_ids(thread_ids), strategy)
        if strategy == "delete":
            for thread_id in threads:
                self.delete_thread(thread_id)
            return
        rows = {t: self._prune_rows(t) for t in threads}
        refuse_delta_threads(t for t, (_, delta) in rows.items() if delta)
        for thread_id, (thread_rows, _) in rows.items():
            if thread_rows:
                self._keep_latest(thread_id, thread_rows)

    def _prune_rows(self, thread_id: str) -> tuple[list[CheckpointRow], bool]:
        """The thread's checkpoints as prune rows, and whether it uses a DeltaChannel."""
        rows, delta = [], False
        for ns, checkpoints in self.storage.get(thread_id, {}).items():
            for checkpoint_id, (_, metadata_blob, parent_id) in checkpoints.items():
                metadata = self.serde.loads_typed(metadata_blob)
                delta = delta or uses_delta_channel(metadata)
                rows.append(CheckpointRow.from_metadata(ns, checkpoint_id, parent_id, metadata))
        return rows, delta

    def _keep_latest(self, thread_id: str, rows: list[CheckpointRow]) -> None:
        namespaces = self.storage[thread_id]
        heads = latest_per_namespace(rows)
        versions = {
            ns: int(self.serde.loads_typed(namespaces[ns][h.checkpoint_id][0]).get("v", 4))
            for ns, h in heads.items()
        }
        sends = {
            ns: parent
            for ns, parent in sends_parent_candidates(heads, versions).items()
            if any(w[1] == TASKS for w in self.writes.get((thread_id, ns, parent), {}).values())
        }
        plan = plan_keep_latest(rows, sends)
        for ns in plan.dropped_namespaces:
            namespaces.pop(ns, None)
            for key in [k for k in self.writes if k[0] == thread_id and k[1] == ns]:
                del self.writes[key]
        for ns, checkpoint_id in plan.deleted:
            del namespaces[ns][checkpoint_id]
            self.writes.pop((thread_id, ns, checkpoint_id), None)
        for ns, checkpoint_id in plan.orphaned:
            checkpoint_blob, metadata_blob, _ = namespaces[ns][checkpoint_id]
            namespaces[ns][checkpoint_id] = (checkpoint_blob, metadata_blob, None)
        self._drop_unreferenced_blobs(thread_id)

    def _drop_unreferenced_blobs(self, thread_id: str) -> None:
        live: set[tuple[str, str, str, str | int | float]] = set()
        for ns, checkpoints in self.storage.get(thread_id, {}).items():
            for checkpoint_blob, _, _ in checkpoints.values():
                checkpoint = self.serde.loads_typed(checkpoint_blob)
                for channel, version in checkpoint["channel_versions"].items():
                    live.add((thread_id, ns, channel, version))
        for key in [k for k in self.blobs if k[0] == thread_id and k not in live]:
            del self.blobs[key]

    async def adelete_thread(self, thread_id: str) -> None:
        self.delete_thread(thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        self.delete_for_runs(run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.copy_thread(source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self.prune(thread_ids, strategy=strategy)

    # Last in the class: the name would shadow the builtin in the annotations below it.
    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Upstream's ``list``, with the page read before the first item.

        Upstream's is a generator over the live storage dicts (``alist`` yields
        from it too): a write between two items broke it ("dictionary changed
        size during iteration"), and one left half-read stayed open. Reading
        the page first, as every other backend does, closes it at once.
        """
        return iter([*super().list(config, filter=filter, before=before, limit=limit)])


@asynccontextmanager
async def open_memory(url: CheckpointerURL, **options: Any) -> AsyncIterator[MemorySaver]:
    """Yield a fresh in-process saver (``memory://``); it takes no options."""
    if options:
        raise ConfigurationError(
            f"unknown option(s) for memory: {', '.join(sorted(options))}; it accepts none"
        )
    yield MemorySaver()
