"""Rotation in memory: the saver's dicts and the record store's, under the driver's lock."""

from __future__ import annotations

import dataclasses
from typing import Any

from tether.checkpointing import binding
from tether.checkpointing._rotators import Rotator, ThreadPass, secret_slot

__all__ = ["MemoryRotator"]


class MemoryRotator(Rotator):
    """Rewrites an ``InMemorySaver``'s dicts and its in-process record store."""

    async def sealed(self) -> str | None:
        with self.records._lock:
            if secret_slot() in self.records._records:
                return "its keyed-hash secret"
        return None

    async def threads(self) -> list[str]:
        saver, records = self.saver, self.records
        found = set(saver.storage) | {k[0] for k in saver.writes} | {k[0] for k in saver.blobs}
        with records._lock:
            found |= {r.thread_id for r in records._records.values()} | set(records._steps)
        return sorted(found)

    async def rewrite(self, one: ThreadPass) -> None:
        saver = self.saver
        serde, thread_id = saver.serde, one.thread_id
        updates: list[tuple[dict[Any, Any], Any, Any]] = []
        for key, (type_, blob) in list(saver.blobs.items()):
            if key[0] == thread_id and type_ != "empty":
                new = one.rewrap(
                    blob if type_ == "bytes" else None,
                    binding.channel(*key),
                    f"namespace {key[1]!r}, channel {key[2]!r}",
                )
                if new is not None:
                    updates.append((saver.blobs, key, ("bytes", new)))
        for ns, checkpoints in saver.storage.get(thread_id, {}).items():
            for cid, (checkpoint_typed, metadata_typed, parent) in list(checkpoints.items()):
                metadata = serde.loads_typed(metadata_typed)
                versions = serde.loads_typed(checkpoint_typed).get("channel_versions", {})
                if one.rewrap_metadata(metadata, ns, cid, versions):
                    value = (checkpoint_typed, serde.dumps_typed(metadata), parent)
                    updates.append((checkpoints, cid, value))
        for (tid, ns, cid), writes in saver.writes.items():
            if tid != thread_id:
                continue
            for inner_key, (task_id, ch, typed, path) in list(writes.items()):
                new = one.rewrap_write(typed, ns, cid, task_id, ch)
                if new is not None:
                    updates.append((writes, inner_key, (task_id, ch, ("bytes", new), path)))
        for target, key, value in updates:  # all opened: now swap them in
            target[key] = value
        self._rewrite_records(one)

    def _rewrite_records(self, one: ThreadPass) -> None:
        driver = self.records
        with driver._lock:  # the driver's own lock: no write interleaves
            for slot, raw in list(driver._records.items()):
                if raw.thread_id == one.thread_id:
                    new = one.rewrap_record(raw.kind, raw.key, raw.payload)
                    if new is not None:
                        driver._records[slot] = dataclasses.replace(raw, payload=new)
            log = driver._steps.get(one.thread_id, {})
            for index, (payload, run_id) in list(log.items()):
                new = one.rewrap_step(index, payload)
                if new is not None:
                    log[index] = (new, run_id)
