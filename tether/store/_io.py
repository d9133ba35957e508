"""What the record store's protocol asks of the backend, performed sync or async.

The store's operations (:mod:`._protocol`) are flows (:mod:`tether._flows`):
they encode, yield the backend calls below, and decode what comes back. Every
backend call is a coroutine that must run on the backend's event loop:
:func:`run` awaits it there (hopping from another loop if need be), and
:func:`run_sync` hands it to that loop from the calling thread and waits. So
``RecordStore`` and ``SyncRecordStore`` run the same flow and differ only in
the interpreter.
"""

from __future__ import annotations

import builtins
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from tether import _flows
from tether.store._types import RawRecord, StepPayload

if TYPE_CHECKING:
    from tether.store._record import RecordStore

__all__ = ["BackendOp", "Flow", "run", "run_sync"]

T = TypeVar("T")


@dataclass(frozen=True)
class InsertRaw:
    """``driver.insert``: put-if-absent; ``True`` if this call stored the record."""

    raw: RawRecord


@dataclass(frozen=True)
class UpsertRaw:
    """``driver.upsert``: store the record, replacing any earlier one."""

    raw: RawRecord


@dataclass(frozen=True)
class GetRaw:
    """``driver.get``: the stored record under ``(kind, key)``, or ``None``."""

    kind: str
    key: str


@dataclass(frozen=True)
class ListRaw:
    """``driver.list``: the stored records of ``kind`` (of one thread, if given)."""

    kind: str
    thread_id: str | None


@dataclass(frozen=True)
class AppendRaw:
    """``driver.append_step``: the index the driver assigned."""

    thread_id: str
    step: StepPayload


@dataclass(frozen=True)
class PutRawWithStep:
    """``driver.put_with_step``: record and step in one transaction."""

    raw: RawRecord
    replace: bool
    step: StepPayload


@dataclass(frozen=True)
class StepsRaw:
    """``driver.steps``: ``(index, stored text)`` pairs, oldest first."""

    thread_id: str


@dataclass(frozen=True)
class ChainRaw:
    """``driver.chain``: every index of the thread's log with its chain entry."""

    thread_id: str


@dataclass(frozen=True)
class StepThreadsRaw:
    """``driver.step_threads``: every thread with a step log."""


@dataclass(frozen=True)
class DeleteThreadRaw:
    """``driver.delete_thread`` (of the data-key store's driver, if ``keys``)."""

    thread_id: str
    keys: bool = False


@dataclass(frozen=True)
class DeleteRunsRaw:
    """``driver.delete_runs``."""

    run_ids: builtins.list[str]


@dataclass(frozen=True)
class LoadKeyedHash:
    """``RecordStore.keyed_hash``: read (or create) the store's keyed-hash secret, and keep it."""


@dataclass(frozen=True)
class LoadDataKey:
    """``RecordStore.data_key``: read (or create) a thread's data key, and cache it."""

    thread_id: str
    create: bool
    want: str | None = None


BackendOp = (
    InsertRaw
    | UpsertRaw
    | GetRaw
    | ListRaw
    | AppendRaw
    | PutRawWithStep
    | StepsRaw
    | ChainRaw
    | StepThreadsRaw
    | DeleteThreadRaw
    | DeleteRunsRaw
    | LoadKeyedHash
    | LoadDataKey
)
Flow = _flows.Flow[BackendOp, T]


def backend_call(op: BackendOp, store: RecordStore) -> Coroutine[Any, Any, Any]:
    """The coroutine that performs ``op`` (to be run on the backend's loop)."""
    driver = store.driver
    coro: Coroutine[Any, Any, Any]
    match op:
        case InsertRaw():
            coro = driver.insert(op.raw)
        case UpsertRaw():
            coro = driver.upsert(op.raw)
        case GetRaw():
            coro = driver.get(op.kind, op.key)
        case ListRaw():
            coro = driver.list(op.kind, op.thread_id)
        case AppendRaw():
            coro = driver.append_step(op.thread_id, op.step)
        case PutRawWithStep():
            coro = driver.put_with_step(op.raw, op.replace, op.step)
        case StepsRaw():
            coro = driver.steps(op.thread_id)
        case ChainRaw() | StepThreadsRaw():
            coro = driver.chain(op.thread_id) if isinstance(op, ChainRaw) else driver.step_threads()
        case DeleteThreadRaw():
            target = (store.key_records or store).driver if op.keys else driver
            coro = target.delete_thread(op.thread_id)
        case DeleteRunsRaw():
            coro = driver.delete_runs(op.run_ids)
        case LoadKeyedHash() | LoadDataKey():
            coro = (
                store.keyed_hash()
                if isinstance(op, LoadKeyedHash)
                else store.data_key(op.thread_id, create=op.create, want=op.want)
            )
        case _:
            _flows.unknown_operation(op, "the record store's backend")
    return coro


async def run(flow: Flow[T], store: RecordStore) -> T:
    """Run ``flow``, awaiting each backend call on the backend's loop."""

    async def perform(op: BackendOp) -> Any:
        return await store.call(backend_call(op, store))

    return await _flows.run(flow, perform)


def run_sync(flow: Flow[T], store: RecordStore, name: str) -> T:
    """Run ``flow`` from sync code; ``name`` is the method the caller would await instead."""

    def perform(op: BackendOp) -> Any:
        return store.sync._wait(backend_call(op, store), name)

    return _flows.run_sync(flow, perform)
