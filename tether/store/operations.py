"""The record store's operations as values, for protocols written as generators.

Each class describes one call of a :class:`~tether.store.RecordStore` method
with the same name and arguments (``method`` names it). A protocol that both
sync and async callers run (see :mod:`tether._flows`) yields these, and its
interpreters hand each one to ``await store.perform(op)`` or
``store.sync.perform(op)``: the store performs it exactly as the method would.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from tether.store._chain import ChainHead as Head

__all__ = [
    "AppendStep",
    "ChainHead",
    "DeleteRuns",
    "DeleteThread",
    "Get",
    "IndexedSteps",
    "Insert",
    "KeyedHash",
    "List",
    "Operation",
    "PutWithStep",
    "StepThreads",
    "Steps",
    "Upsert",
    "VerifyChain",
]


@dataclass(frozen=True)
class _Put:
    """The arguments of a write of one record."""

    kind: str
    key: str
    value: dict[str, Any]
    thread_id: str
    run_id: str | None = None


@dataclass(frozen=True)
class Insert(_Put):
    """:meth:`RecordStore.insert`: put-if-absent; ``True`` if this call stored ``value``."""

    method: ClassVar[str] = "insert"


@dataclass(frozen=True)
class Upsert(_Put):
    """:meth:`RecordStore.upsert`: store ``value``, replacing any earlier one."""

    method: ClassVar[str] = "upsert"


@dataclass(frozen=True)
class Get:
    """:meth:`RecordStore.get`: the record under ``(kind, key)``, or ``None``."""

    method: ClassVar[str] = "get"
    kind: str
    key: str


@dataclass(frozen=True)
class List:
    """:meth:`RecordStore.list`: every record of ``kind`` (of one thread, if given)."""

    method: ClassVar[str] = "list"
    kind: str
    thread_id: str | None = None


@dataclass(frozen=True)
class AppendStep:
    """:meth:`RecordStore.append_step`: the new step's index."""

    method: ClassVar[str] = "append_step"
    thread_id: str
    step: dict[str, Any]
    run_id: str | None = None


@dataclass(frozen=True)
class PutWithStep:
    """:meth:`RecordStore.put_with_step`: the step's index, or ``None`` if nothing was written."""

    method: ClassVar[str] = "put_with_step"
    kind: str
    key: str
    value: dict[str, Any]
    thread_id: str
    step: dict[str, Any]
    replace: bool = False
    run_id: str | None = None


@dataclass(frozen=True)
class Steps:
    """:meth:`RecordStore.steps`: the thread's step log, oldest first."""

    method: ClassVar[str] = "steps"
    thread_id: str


@dataclass(frozen=True)
class IndexedSteps:
    """:meth:`RecordStore.indexed_steps`: the log as ``(index, step)`` pairs."""

    method: ClassVar[str] = "indexed_steps"
    thread_id: str


@dataclass(frozen=True)
class DeleteThread:
    """:meth:`RecordStore.delete_thread`: delete every record and step of the thread."""

    method: ClassVar[str] = "delete_thread"
    thread_id: str


@dataclass(frozen=True)
class DeleteRuns:
    """:meth:`RecordStore.delete_runs`: delete every record and step the runs wrote."""

    method: ClassVar[str] = "delete_runs"
    run_ids: builtins.list[str]


@dataclass(frozen=True)
class KeyedHash:
    """:meth:`RecordStore.keyed_hash`: the keyed hash, or ``None`` without encryption."""

    method: ClassVar[str] = "keyed_hash"


@dataclass(frozen=True)
class VerifyChain:
    """:meth:`RecordStore.verify_chain`: a report on the thread's step-log hash chain."""

    method: ClassVar[str] = "verify_chain"
    thread_id: str
    expected_head: Head | None = None


@dataclass(frozen=True)
class ChainHead:
    """:meth:`RecordStore.chain_head`: the newest link of the thread's chain, or ``None``."""

    method: ClassVar[str] = "chain_head"
    thread_id: str


@dataclass(frozen=True)
class StepThreads:
    """:meth:`RecordStore.step_threads`: every thread with a step log, sorted."""

    method: ClassVar[str] = "step_threads"


Operation = (
    Insert
    | Upsert
    | Get
    | List
    | AppendStep
    | PutWithStep
    | Steps
    | IndexedSteps
    | DeleteThread
    | DeleteRuns
    | KeyedHash
    | VerifyChain
    | ChainHead
    | StepThreads
)
"""Any record-store operation."""
