"""In-process checkpointer: LangGraph's InMemorySaver plus the capabilities it lacks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

from tether.checkpointing.prune import check_prune_args
from tether.checkpointing.url import CheckpointerURL
from tether.errors import ConfigurationError

__all__ = ["MemorySaver", "open_memory"]


class MemorySaver(InMemorySaver):
    """``InMemorySaver`` with ``delete_for_runs``, ``copy_thread`` and ``prune``.

    State lives in this process only; use it for tests and notebooks.
    """

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete every checkpoint (and its writes) whose metadata ``run_id`` is listed."""
        wanted = set(run_ids)
        if not wanted:
            return
        for thread_id, namespaces in list(self.storage.items()):
            for ns, checkpoints in list(namespaces.items()):
                for checkpoint_id, (_, metadata_blob, _) in list(checkpoints.items()):
                    metadata = self.serde.loads_typed(metadata_blob)
                    if metadata.get("run_id") in wanted:
                        del checkpoints[checkpoint_id]
                        self.writes.pop((thread_id, ns, checkpoint_id), None)

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
        """Keep only the newest checkpoint per namespace, or delete everything.

        Args:
            thread_ids: Threads to prune.
            strategy: ``"keep_latest"`` or ``"delete"``.
        """
        for thread_id in check_prune_args(thread_ids, strategy):
            if strategy == "delete":
                self.delete_thread(thread_id)
                continue
            for ns, checkpoints in self.storage.get(thread_id, {}).items():
                if not checkpoints:
                    continue
                latest = max(checkpoints)
                for checkpoint_id in [c for c in checkpoints if c != latest]:
                    del checkpoints[checkpoint_id]
                    self.writes.pop((thread_id, ns, checkpoint_id), None)
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

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        self.delete_for_runs(run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.copy_thread(source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self.prune(thread_ids, strategy=strategy)


@asynccontextmanager
async def open_memory(url: CheckpointerURL, **options: Any) -> AsyncIterator[MemorySaver]:
    """Yield a fresh in-process saver (``memory://``); it takes no options."""
    if options:
        raise ConfigurationError(
            f"unknown option(s) for memory: {', '.join(sorted(options))}; it accepts none"
        )
    yield MemorySaver()
