"""Durable records beside the checkpoints: the :class:`RecordStore` every backend shares.

A record store keeps small JSON documents (recorded model calls, tool intents,
budgets, version pins, approvals) and an append-only step log per thread, on the
same backend and connection as the checkpointer. Each backend implements a
:class:`RecordDriver` that moves opaque text; the store owns everything else:
JSON encoding and encryption with associated data (:mod:`._codec`), and the
bridge that lets sync code (LangGraph runs sync nodes in worker threads) reach
the saver's event loop.

Every operation is written once, as a flow (:mod:`._protocol`), and described
by a value of :mod:`tether.store.operations`. :class:`RecordStore` awaits it
and :class:`SyncRecordStore` runs it from the calling thread (:mod:`._io`); the
named methods of both are shorthands for :meth:`RecordStore.perform` (but
:meth:`RecordStore.keyed_hash`, which the operation runs).
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Coroutine
from typing import Any, TypeVar

from tether._loops import wait_on_loop
from tether.boundaries import current_guard
from tether.checkpointing import DataKey
from tether.store import _io
from tether.store import operations as ops
from tether.store._chain import ChainHead, ChainReport
from tether.store._codec import RecordCodec
from tether.store._data_keys import cache_for, load_data_key, ring_only
from tether.store._keyed import KeyedHash, load_keyed_hash
from tether.store._protocol import flow_for
from tether.store._types import (
    Cipher,
    RawRecord,
    Record,
    RecordDriver,
    RecordStoreError,
    StepPayload,
)

__all__ = [
    "Cipher",
    "RawRecord",
    "Record",
    "RecordDriver",
    "RecordStore",
    "RecordStoreError",
    "StepPayload",
    "SyncRecordStore",
]

T = TypeVar("T")

# Writes a stale worker must not make: under a run guard (a worker executing a
# run), each first checks that the worker still holds the run. When the run
# store shares the records' database (``guard.same_database``) the driver checks
# inside the write's own transaction instead (see tether.checkpointing's
# fencing), which leaves no window between the check and the write.
_WRITES = (ops.Insert, ops.Upsert, ops.AppendStep, ops.PutWithStep)


def _verifying() -> bool:
    """Whether a write here must first ask the run store (one round trip)."""
    guard = current_guard()
    return guard is not None and not guard.same_database


async def _fence() -> None:
    """Raise ``LeaseLostError`` if a worker executes this code for a run it lost."""
    guard = current_guard()
    if guard is not None and not guard.same_database:
        await guard.verify()


class RecordStore:
    """Records and step logs on a checkpointer's backend (see :func:`tether.store.store_for`).

    Every method is a coroutine; :attr:`sync` offers the same methods for sync code.

    Args:
        driver: The backend's storage operations.
        cipher: The encryption layer's cipher, or ``None`` to store plain JSON.
        key_driver: The data-key store's driver, when the threads' data keys
            are kept apart from this backend (``data_keys_url``).
    """

    def __init__(
        self,
        driver: RecordDriver,
        cipher: Cipher | None = None,
        key_driver: RecordDriver | None = None,
    ) -> None:
        self._driver = driver
        self._codec = RecordCodec(cipher)
        self._keyed: KeyedHash | None = None
        self._data_keys = cache_for(driver, cipher)
        self._key_records = None if key_driver is None else RecordStore(key_driver, cipher)
        self.sync = SyncRecordStore(self)

    @property
    def key_records(self) -> RecordStore | None:
        """The data-key store, or ``None`` when data keys are kept in this store."""
        return self._key_records

    @property
    def durable(self) -> bool:
        """Whether records outlive this process (all backends but ``memory://``)."""
        return bool(getattr(self._driver, "durable", True))

    @property
    def driver(self) -> RecordDriver:
        """The backend's storage operations (key rotation rewrites through the backend)."""
        return self._driver

    @property
    def encrypted(self) -> bool:
        """Whether values are stored encrypted."""
        return self._codec.cipher is not None

    async def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` on the backend's event loop, hopping there from another loop.

        For code built on the store (or on its checkpointer) that may run on a
        loop other than the one the backend's connection lives on.
        """
        loop = self._driver.loop
        if loop is None or loop is asyncio.get_running_loop():
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))

    async def perform(self, op: ops.Operation) -> Any:
        """Perform one operation of :mod:`tether.store.operations`, as its method would.

        Raises:
            TypeError: ``op`` is not a record-store operation.
        """
        if isinstance(op, _WRITES):
            await _fence()
        return await _io.run(flow_for(self, op), self)

    async def insert(
        self,
        kind: str,
        key: str,
        value: dict[str, Any],
        *,
        thread_id: str,
        run_id: str | None = None,
    ) -> bool:
        """Store ``value`` under ``(kind, key)`` unless a record is already there.

        On the SQLite backend this commit is fully synced: put-if-absent is
        how a tool claims its call before the outside effect, and a claim must
        outlive a power loss as the effect does.

        Args:
            kind: The record's kind.
            key: The record's key.
            value: The record's value.
            thread_id: The thread it belongs to (deleted with it).
            run_id: The run that writes it; by default the run of the LangGraph
                node this is called from (see :func:`ambient_run_id`).

        Returns:
            ``True`` if this call inserted the record, ``False`` if one existed.
        """
        inserted: bool = await self.perform(ops.Insert(kind, key, value, thread_id, run_id))
        return inserted

    async def upsert(
        self,
        kind: str,
        key: str,
        value: dict[str, Any],
        *,
        thread_id: str,
        run_id: str | None = None,
    ) -> None:
        """Store ``value`` under ``(kind, key)``, replacing any earlier value.

        The record keeps the run id it was first written with.
        """
        await self.perform(ops.Upsert(kind, key, value, thread_id, run_id))

    async def get(self, kind: str, key: str) -> Record | None:
        """The record under ``(kind, key)``, or ``None``."""
        record: Record | None = await self.perform(ops.Get(kind, key))
        return record

    async def list(self, kind: str, *, thread_id: str | None = None) -> builtins.list[Record]:
        """Every record of ``kind`` (of one thread, if given), in insertion order."""
        records: builtins.list[Record] = await self.perform(ops.List(kind, thread_id))
        return records

    async def append_step(
        self, thread_id: str, step: dict[str, Any], *, run_id: str | None = None
    ) -> int:
        """Append ``step`` to the thread's step log.

        Returns:
            The step's 0-based index, assigned atomically.
        """
        index: int = await self.perform(ops.AppendStep(thread_id, step, run_id))
        return index

    async def put_with_step(
        self,
        kind: str,
        key: str,
        value: dict[str, Any],
        *,
        thread_id: str,
        step: dict[str, Any],
        replace: bool = False,
        run_id: str | None = None,
    ) -> int | None:
        """Store a record and append a step to its thread's log, in one transaction.

        Either both are written or neither, so a crash cannot leave a record
        whose step is missing from the log.

        Args:
            kind: The record's kind.
            key: The record's key.
            value: The record's value.
            thread_id: The thread of both the record and the step.
            step: The step to append.
            replace: Replace an existing record (upsert) instead of leaving it.
            run_id: The run that writes both (see :meth:`insert`).

        Returns:
            The step's index, or ``None`` if ``replace`` is false and a record
            was already there (then nothing was written).
        """
        op = ops.PutWithStep(kind, key, value, thread_id, step, replace, run_id)
        index: int | None = await self.perform(op)
        return index

    async def steps(self, thread_id: str) -> builtins.list[dict[str, Any]]:
        """The thread's step log, oldest first."""
        steps: builtins.list[dict[str, Any]] = await self.perform(ops.Steps(thread_id))
        return steps

    async def indexed_steps(self, thread_id: str) -> builtins.list[tuple[int, dict[str, Any]]]:
        """The thread's step log as ``(index, step)`` pairs, oldest first.

        An index can be missing if a process died while appending to a Redis log.
        """
        rows: builtins.list[tuple[int, dict[str, Any]]] = await self.perform(
            ops.IndexedSteps(thread_id)
        )
        return rows

    async def verify_chain(
        self, thread_id: str, *, expected_head: ChainHead | None = None
    ) -> ChainReport:
        """Check the thread's step-log hash chain (see :func:`tether.steps.verify_chain`)."""
        report: ChainReport = await self.perform(ops.VerifyChain(thread_id, expected_head))
        return report

    async def chain_head(self, thread_id: str) -> ChainHead | None:
        """The newest link of the thread's step-log chain, or ``None``."""
        head: ChainHead | None = await self.perform(ops.ChainHead(thread_id))
        return head

    async def step_threads(self) -> builtins.list[str]:
        """Every thread with a step log (or the links of one), sorted."""
        threads: builtins.list[str] = await self.perform(ops.StepThreads())
        return threads

    async def delete_thread(self, thread_id: str) -> None:
        """Delete every record and step of the thread, and forget cached state of it."""
        await self.perform(ops.DeleteThread(thread_id))

    async def delete_runs(self, run_ids: builtins.list[str]) -> None:
        """Delete every record and step written by the given runs.

        Raises:
            IdArgumentError: ``run_ids`` is a single string, or not a collection.
        """
        await self.perform(ops.DeleteRuns(run_ids))

    async def data_key(
        self, thread_id: str, *, create: bool = False, want: str | None = None
    ) -> DataKey | None:
        """The thread's own data key (see :mod:`tether.store._data_keys`), ``None`` without one.

        Args:
            thread_id: The thread.
            create: Create the key if the thread has none yet (to write).
            want: The key id a ciphertext names: a cached key with another id is
                read again from the store.

        Returns ``None`` without encryption, for the store's own thread, and when
        the thread has no key and ``create`` is false.
        """
        thread = str(thread_id)
        if self._codec.cipher is None or ring_only(thread):
            return None
        cache = self._data_keys
        key = cache.get(thread, want)
        if key is not None:
            return key
        # LangGraph saves a checkpoint and its writes concurrently: one load per
        # thread at a time on this loop, the others wait for it.
        loop = asyncio.get_running_loop()
        flight = (id(loop), thread)
        pending = cache.flights.get(flight)
        if pending is not None:
            key = await asyncio.shield(pending)
            if key is not None and (want is None or key.key_id == want):
                return key
            if key is None and not create and want is None:
                return None
        done: asyncio.Future[DataKey | None] = loop.create_future()
        cache.flights[flight] = done
        key = None
        try:
            key = await load_data_key(self, thread, create=create)
        finally:
            done.set_result(key)  # None after a failure: a waiter then loads it itself
            if cache.flights.get(flight) is done:
                del cache.flights[flight]
        return key

    async def keyed_hash(self) -> KeyedHash | None:
        """The keyed hash for identifiers stored in clear, or ``None`` without encryption.

        Its key is a random secret kept encrypted in this store (created on
        first use), so it is the same on every worker and across key rotation.

        Not a flow like the other operations: the secret is loaded by
        :func:`~tether.store._keyed.load_keyed_hash`, which is built on them;
        ``sync.keyed_hash()`` and ``perform(KeyedHash())`` run this coroutine
        on the backend's loop until it is loaded, then answer from memory.
        """
        if self._codec.cipher is None:
            return None
        if self._keyed is None:
            self._keyed = await load_keyed_hash(self)
        return self._keyed


class SyncRecordStore:
    """The same operations as :class:`RecordStore`, for sync code (e.g. sync graph nodes).

    Not for the backend's own event loop: waiting there would deadlock, so such
    a call raises ``asyncio.InvalidStateError`` naming the method to await.
    """

    def __init__(self, store: RecordStore) -> None:
        self._store = store

    def _wait(self, coro: Coroutine[Any, Any, T], name: str) -> T:
        """Run ``coro`` on the backend's loop and wait; ``name``: the method to await instead."""
        loop = self._store.driver.loop
        if loop is None:
            return _run_inline(coro)
        return wait_on_loop(
            coro,
            loop,
            deadlock_message=(
                f"RecordStore.sync.{name}() was called from the checkpointer's own event loop, "
                f"which would deadlock; await RecordStore.{name}() instead"
            ),
        )

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """See :meth:`RecordStore.call`: run ``coro`` on the backend's loop and wait for it."""
        return self._wait(coro, "call")

    def perform(self, op: ops.Operation) -> Any:
        """See :meth:`RecordStore.perform`."""
        if isinstance(op, _WRITES) and _verifying():
            self.call(_fence())
        flow = flow_for(self._store, op)
        return _io.run_sync(flow, self._store, op.method)

    def insert(
        self,
        kind: str,
        key: str,
        value: dict[str, Any],
        *,
        thread_id: str,
        run_id: str | None = None,
    ) -> bool:
        """See :meth:`RecordStore.insert`."""
        inserted: bool = self.perform(ops.Insert(kind, key, value, thread_id, run_id))
        return inserted

    def upsert(
        self,
        kind: str,
        key: str,
        value: dict[str, Any],
        *,
        thread_id: str,
        run_id: str | None = None,
    ) -> None:
        """See :meth:`RecordStore.upsert`."""
        self.perform(ops.Upsert(kind, key, value, thread_id, run_id))

    def get(self, kind: str, key: str) -> Record | None:
        """See :meth:`RecordStore.get`."""
        record: Record | None = self.perform(ops.Get(kind, key))
        return record

    def list(self, kind: str, *, thread_id: str | None = None) -> builtins.list[Record]:
        """See :meth:`RecordStore.list`."""
        records: builtins.list[Record] = self.perform(ops.List(kind, thread_id))
        return records

    def append_step(
        self, thread_id: str, step: dict[str, Any], *, run_id: str | None = None
    ) -> int:
        """See :meth:`RecordStore.append_step`."""
        index: int = self.perform(ops.AppendStep(thread_id, step, run_id))
        return index

    def put_with_step(
        self,
        kind: str,
        key: str,
        value: dict[str, Any],
        *,
        thread_id: str,
        step: dict[str, Any],
        replace: bool = False,
        run_id: str | None = None,
    ) -> int | None:
        """See :meth:`RecordStore.put_with_step`."""
        index: int | None = self.perform(
            ops.PutWithStep(kind, key, value, thread_id, step, replace, run_id)
        )
        return index

    def steps(self, thread_id: str) -> builtins.list[dict[str, Any]]:
        """See :meth:`RecordStore.steps`."""
        steps: builtins.list[dict[str, Any]] = self.perform(ops.Steps(thread_id))
        return steps

    def indexed_steps(self, thread_id: str) -> builtins.list[tuple[int, dict[str, Any]]]:
        """See :meth:`RecordStore.indexed_steps`."""
        rows: builtins.list[tuple[int, dict[str, Any]]] = self.perform(ops.IndexedSteps(thread_id))
        return rows

    def verify_chain(
        self, thread_id: str, *, expected_head: ChainHead | None = None
    ) -> ChainReport:
        """See :meth:`RecordStore.verify_chain`."""
        report: ChainReport = self.perform(ops.VerifyChain(thread_id, expected_head))
        return report

    def chain_head(self, thread_id: str) -> ChainHead | None:
        """See :meth:`RecordStore.chain_head`."""
        head: ChainHead | None = self.perform(ops.ChainHead(thread_id))
        return head

    def step_threads(self) -> builtins.list[str]:
        """See :meth:`RecordStore.step_threads`."""
        threads: builtins.list[str] = self.perform(ops.StepThreads())
        return threads

    def delete_thread(self, thread_id: str) -> None:
        """See :meth:`RecordStore.delete_thread`."""
        self.perform(ops.DeleteThread(thread_id))

    def delete_runs(self, run_ids: builtins.list[str]) -> None:
        """See :meth:`RecordStore.delete_runs`."""
        self.perform(ops.DeleteRuns(run_ids))

    def keyed_hash(self) -> KeyedHash | None:
        """See :meth:`RecordStore.keyed_hash` (no hop to the loop once loaded)."""
        keyed: KeyedHash | None = self.perform(ops.KeyedHash())
        return keyed

    def data_key(
        self, thread_id: str, *, create: bool = False, want: str | None = None
    ) -> DataKey | None:
        """See :meth:`RecordStore.data_key`."""
        key: DataKey | None = self._wait(
            self._store.data_key(thread_id, create=create, want=want), "data_key"
        )
        return key


def _run_inline(coro: Coroutine[Any, Any, T]) -> T:
    """Drive a coroutine that never suspends (the in-memory driver) to completion."""
    try:
        coro.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    coro.close()
    raise RuntimeError("in-memory record store operation unexpectedly suspended")
