"""Records for the in-memory checkpointer: plain dicts guarded by a thread lock."""

from __future__ import annotations

import asyncio
import builtins
import threading

from tether.store._chain import GENESIS, ChainRow, chain_link, merge_rows
from tether.store._record import RawRecord, StepPayload

__all__ = ["MemoryDriver"]


class MemoryDriver:
    """Keeps records and step logs in this process; nothing survives it.

    Every method finishes without suspending, so sync callers drive the
    coroutines directly, from any thread.
    """

    loop: asyncio.AbstractEventLoop | None = None
    durable = False  # nothing outlives the process

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[tuple[str, str], RawRecord] = {}
        # thread -> index -> (stored text, run id); deleting a run's steps leaves gaps.
        self._steps: dict[str, dict[int, tuple[str, str | None]]] = {}
        self._next_step: dict[str, int] = {}
        # thread -> index -> (digest, link): the hash chain, kept when a run's steps go.
        self._chain: dict[str, dict[int, tuple[str, str]]] = {}

    def _append(self, thread_id: str, step: StepPayload) -> int:
        index = self._next_step.get(thread_id, 0)
        self._next_step[thread_id] = index + 1
        self._steps.setdefault(thread_id, {})[index] = (step.encode(index), step.run_id)
        chain = self._chain.setdefault(thread_id, {})
        # Indexes only grow, so the last link inserted is the newest (no scan of the log).
        prev = next(reversed(chain.values()))[1] if chain else GENESIS
        chain[index] = (step.digest, chain_link(prev, index, step.digest))
        return index

    async def insert(self, raw: RawRecord) -> bool:
        with self._lock:
            if (raw.kind, raw.key) in self._records:
                return False
            self._records[(raw.kind, raw.key)] = raw
            return True

    async def upsert(self, raw: RawRecord) -> None:
        with self._lock:
            old = self._records.get((raw.kind, raw.key))
            if old is None:
                self._records[(raw.kind, raw.key)] = raw
            else:  # keeps its place in insertion order and its creation time
                self._records[(raw.kind, raw.key)] = RawRecord(
                    raw.kind, raw.key, old.thread_id, raw.payload, old.created_at, old.run_id
                )

    async def get(self, kind: str, key: str) -> RawRecord | None:
        with self._lock:
            return self._records.get((kind, key))

    async def list(self, kind: str, thread_id: str | None) -> builtins.list[RawRecord]:
        with self._lock:
            return [
                r
                for r in self._records.values()
                if r.kind == kind and (thread_id is None or r.thread_id == thread_id)
            ]

    async def append_step(self, thread_id: str, step: StepPayload) -> int:
        with self._lock:
            return self._append(thread_id, step)

    async def put_with_step(self, raw: RawRecord, replace: bool, step: StepPayload) -> int | None:
        with self._lock:
            old = self._records.get((raw.kind, raw.key))
            if old is not None and not replace:
                return None
            if old is not None:
                raw = RawRecord(
                    raw.kind, raw.key, old.thread_id, raw.payload, old.created_at, old.run_id
                )
            self._records[(raw.kind, raw.key)] = raw
            return self._append(raw.thread_id, step)

    async def steps(self, thread_id: str) -> builtins.list[tuple[int, str]]:
        with self._lock:
            log = self._steps.get(thread_id, {})
            return [(index, text) for index, (text, _) in sorted(log.items())]

    async def chain(self, thread_id: str) -> builtins.list[ChainRow]:
        with self._lock:
            log = self._steps.get(thread_id, {})
            links = self._chain.get(thread_id, {})
            return merge_rows(
                [(i, text) for i, (text, _) in log.items()],
                [(i, digest, link) for i, (digest, link) in links.items()],
            )

    async def step_threads(self) -> builtins.list[str]:
        with self._lock:
            return sorted(self._steps.keys() | self._chain.keys())

    async def delete_thread(self, thread_id: str) -> None:
        with self._lock:
            self._chain.pop(thread_id, None)
            self._steps.pop(thread_id, None)
            self._next_step.pop(thread_id, None)
            for k in [k for k, r in self._records.items() if r.thread_id == thread_id]:
                del self._records[k]

    async def delete_runs(self, run_ids: builtins.list[str]) -> None:
        runs = set(run_ids)
        with self._lock:
            for k in [k for k, r in self._records.items() if r.run_id in runs]:
                del self._records[k]
            for log in self._steps.values():
                for index in [i for i, (_, run) in log.items() if run in runs]:
                    del log[index]
