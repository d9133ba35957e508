"""What the record store keeps and what a backend provides (re-exported by :mod:`.record`).

A record is a small JSON document under ``(kind, key)``, filed under a thread
(and the run that wrote it); a step is a JSON document appended to a thread's
log. A backend stores both as opaque text through a :class:`RecordDriver`.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from tether.errors import TetherError
from tether.store._chain import ChainRow

__all__ = ["Cipher", "RawRecord", "Record", "RecordDriver", "RecordStoreError", "StepPayload"]


class RecordStoreError(TetherError):
    """A record could not be stored or read back as written."""


class Cipher(Protocol):
    """What the encryption layer offers (a :class:`~tether.checkpointing.encryption.KeyRing`).

    Authenticated encryption with associated data; ``v1_aad`` is the binding an
    envelope of format version 1 was sealed with, where it differs.
    """

    def encrypt(self, plaintext: bytes, aad: bytes, *, data_key: Any = None) -> bytes: ...

    def decrypt(
        self,
        blob: bytes,
        aad: bytes,
        where: str = "",
        *,
        v1_aad: bytes | None = None,
        data_key: Any = None,
    ) -> bytes: ...


@dataclass(frozen=True)
class Record:
    """One stored record.

    Attributes:
        kind: The record family, e.g. ``"model"`` or ``"budget"``.
        key: Unique within ``kind``.
        thread_id: The thread the record belongs to (deleted with it).
        value: The JSON document.
        created_at: Unix time of the first write.
        run_id: The run that wrote it (deleted with the run's checkpoints by
            ``delete_for_runs``), or ``None`` outside a run.
    """

    kind: str
    key: str
    thread_id: str
    value: dict[str, Any]
    created_at: float
    run_id: str | None = None


@dataclass(frozen=True)
class RawRecord:
    """A record as a driver stores it: the value is still encoded text."""

    kind: str
    key: str
    thread_id: str
    payload: str
    created_at: float
    run_id: str | None = None


@dataclass(frozen=True)
class StepPayload:
    """A step as a driver stores it.

    Attributes:
        encode: The stored text for a given index (ciphertexts are bound to it).
        fixed: The stored text when it does not depend on the index (no
            encryption), so a driver may assign the index inside one statement.
        run_id: The run that appended it, or ``None`` outside a run.
        digest: The step's chain digest (see :mod:`tether.store._chain`); the
            driver stores it and the link it computes from it in the same write.
    """

    encode: Callable[[int], str]
    fixed: str | None
    run_id: str | None = None
    digest: str = ""


class RecordDriver(Protocol):
    """The storage operations a backend provides; all values are opaque text."""

    loop: asyncio.AbstractEventLoop | None

    async def insert(self, raw: RawRecord) -> bool: ...

    async def upsert(self, raw: RawRecord) -> None: ...

    async def get(self, kind: str, key: str) -> RawRecord | None: ...

    async def list(self, kind: str, thread_id: str | None) -> builtins.list[RawRecord]: ...

    async def append_step(self, thread_id: str, step: StepPayload) -> int: ...

    async def steps(self, thread_id: str) -> builtins.list[tuple[int, str]]: ...

    async def chain(self, thread_id: str) -> builtins.list[ChainRow]:
        """Every index of the thread's log with its stored text and chain entry, ordered."""
        ...

    async def step_threads(self) -> builtins.list[str]:
        """Every thread that has a step log (or what remains of one), sorted."""
        ...

    async def delete_thread(self, thread_id: str) -> None: ...

    async def delete_runs(self, run_ids: builtins.list[str]) -> None: ...

    async def put_with_step(
        self, raw: RawRecord, replace: bool, step: StepPayload
    ) -> int | None: ...
