"""Durable records beside the checkpoints: the :class:`RecordStore` every backend shares.

A record store keeps small JSON documents (recorded model calls, tool intents,
budgets, version pins, approvals) and an append-only step log per thread, on the
same backend and connection as the checkpointer. Each backend implements a
:class:`RecordDriver` that moves opaque text; this module owns everything else:
JSON encoding, encryption with associated data, and the bridge that lets sync
code (LangGraph runs sync nodes in worker threads) reach the saver's event loop.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import json
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from tether._loops import wait_on_loop
from tether.checkpointing import binding
from tether.checkpointing.cascade import check_run_ids
from tether.checkpointing.encryption import ENV_KEYS, MissingKeyError
from tether.errors import TetherError
from tether.store.keyed import KeyedHash, load_keyed_hash
from tether.store.ownership import forget as _forget
from tether.store.ownership import resolve_run_id as _run

__all__ = [
    "Cipher",
    "Record",
    "RecordDriver",
    "RecordStore",
    "RecordStoreError",
    "StepPayload",
    "SyncRecordStore",
]

T = TypeVar("T")

# Marks a stored value as ciphertext; plain JSON always starts with "{".
_ENCRYPTED = "enc1:"


class RecordStoreError(TetherError):
    """A record could not be stored or read back as written."""


class Cipher(Protocol):
    """What the encryption layer offers (a :class:`~tether.checkpointing.encryption.KeyRing`).

    Authenticated encryption with associated data; ``v1_aad`` is the binding an
    envelope of format version 1 was sealed with, where it differs.
    """

    def encrypt(self, plaintext: bytes, aad: bytes) -> bytes: ...

    def decrypt(
        self, blob: bytes, aad: bytes, where: str = "", *, v1_aad: bytes | None = None
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
    """

    encode: Callable[[int], str]
    fixed: str | None
    run_id: str | None = None


class RecordDriver(Protocol):
    """The storage operations a backend provides; all values are opaque text."""

    loop: asyncio.AbstractEventLoop | None

    async def insert(self, raw: RawRecord) -> bool: ...

    async def upsert(self, raw: RawRecord) -> None: ...

    async def get(self, kind: str, key: str) -> RawRecord | None: ...

    async def list(self, kind: str, thread_id: str | None) -> builtins.list[RawRecord]: ...

    async def append_step(self, thread_id: str, step: StepPayload) -> int: ...

    async def steps(self, thread_id: str) -> builtins.list[tuple[int, str]]: ...

    async def delete_thread(self, thread_id: str) -> None: ...

    async def delete_runs(self, run_ids: builtins.list[str]) -> None: ...

    async def put_with_step(
        self, raw: RawRecord, replace: bool, step: StepPayload
    ) -> int | None: ...


def _check_names(kind: str, key: str) -> None:
    # ':' and '@' separate a kind from the key and thread in Redis key names.
    if not isinstance(kind, str) or not kind or any(c in kind for c in ":|@"):
        raise RecordStoreError(
            f"record kind {kind!r} must be a non-empty str without ':', '|' or '@' "
            "(use a short identifier such as 'model' or 'budget')"
        )
    if not isinstance(key, str) or not key:
        raise RecordStoreError(f"record key {key!r} must be a non-empty str")


class RecordStore:
    """Records and step logs on a checkpointer's backend (see :func:`tether.store.store_for`).

    Every method is a coroutine; :attr:`sync` offers the same methods for sync code.

    Args:
        driver: The backend's storage operations.
        cipher: The encryption layer's cipher, or ``None`` to store plain JSON.
    """

    def __init__(self, driver: RecordDriver, cipher: Cipher | None = None) -> None:
        self._driver = driver
        self._cipher = cipher
        self._keyed: KeyedHash | None = None
        self.sync = SyncRecordStore(self)

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
        return self._cipher is not None

    # -- encoding -------------------------------------------------------------
    # Associated data (tether.checkpointing.binding): a record is bound to its
    # thread, kind and key, a step to its thread and index, each under its own
    # domain label; version-1 envelopes were bound to "|"-joined text.
    def _encode(self, value: dict[str, Any], aad: bytes) -> str:
        return self._seal(self._json(value), aad)

    @staticmethod
    def _json(value: dict[str, Any]) -> str:
        if not isinstance(value, dict):
            raise RecordStoreError(f"record values must be dicts, got {type(value).__name__}")
        try:
            return json.dumps(value, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise RecordStoreError(
                f"record value is not JSON-serializable ({exc}); store only str, numbers, "
                "bools, None, lists and dicts"
            ) from exc

    def _seal(self, text: str, aad: bytes) -> str:
        if self._cipher is None:
            return text
        blob = self._cipher.encrypt(text.encode(), aad)
        return _ENCRYPTED + base64.b64encode(blob).decode("ascii")

    def _decode(self, payload: str, aad: bytes, v1_aad: bytes, what: str) -> dict[str, Any]:
        if payload.startswith(_ENCRYPTED):
            if self._cipher is None:
                raise MissingKeyError(
                    f"{what} is encrypted but the checkpointer was opened without a key; set "
                    f"{ENV_KEYS} to the key ring the store was written with (or pass "
                    "encryption=KeyRing(...))"
                )
            blob = base64.b64decode(payload[len(_ENCRYPTED) :])
            text = self._cipher.decrypt(blob, aad, what, v1_aad=v1_aad)
            value: dict[str, Any] = json.loads(text)
            return value
        if self._cipher is not None and not getattr(self._cipher, "allow_plaintext", False):
            raise RecordStoreError(
                f"{what} is stored in plaintext but encryption is on; refusing to "
                "trust an unauthenticated value (it may have been written by hand)"
            )
        plain: dict[str, Any] = json.loads(payload)
        return plain

    def _record_payload(self, value: dict[str, Any], thread: str, kind: str, key: str) -> str:
        return self._encode(value, binding.record(thread, kind, key))

    def _step(self, thread: str, step: dict[str, Any], run_id: str | None) -> StepPayload:
        text = self._json(step)  # refuses bad input before anything is written
        if self._cipher is None:
            return StepPayload(lambda index: text, text, run_id)
        # Sealed once the index is known (it is bound); nothing is sealed before.
        return StepPayload(
            lambda index: self._seal(text, binding.step(thread, index)), None, run_id
        )

    def _record(self, raw: RawRecord) -> Record:
        thread, kind, key = raw.thread_id, raw.kind, raw.key
        value = self._decode(
            raw.payload,
            binding.record(thread, kind, key),
            binding.record_v1(thread, kind, key),
            f"record {kind!r} {key!r} of thread {thread!r}",
        )
        return Record(kind, key, thread, value, raw.created_at, raw.run_id)

    def _step_value(self, thread: str, index: int, payload: str) -> dict[str, Any]:
        return self._decode(
            payload,
            binding.step(thread, index),
            binding.step_v1(thread, index),
            f"step {index} of thread {thread!r}",
        )

    # -- loop bridging ----------------------------------------------------------
    async def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the backend's loop, hopping there if we are on another one."""
        loop = self._driver.loop
        if loop is None or loop is asyncio.get_running_loop():
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))

    def _run_sync(self, coro: Coroutine[Any, Any, T], name: str) -> T:
        loop = self._driver.loop
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

    # -- the API ------------------------------------------------------------------
    def _raw(
        self, kind: str, key: str, value: dict[str, Any], thread_id: str, run_id: str | None
    ) -> RawRecord:
        _check_names(kind, key)
        thread = str(thread_id)
        payload = self._record_payload(value, thread, kind, key)
        return RawRecord(kind, key, thread, payload, time.time(), _run(run_id))

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
        raw = self._raw(kind, key, value, thread_id, run_id)
        return await self._call(self._driver.insert(raw))

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
        raw = self._raw(kind, key, value, thread_id, run_id)
        await self._call(self._driver.upsert(raw))

    async def get(self, kind: str, key: str) -> Record | None:
        """The record under ``(kind, key)``, or ``None``."""
        _check_names(kind, key)
        raw = await self._call(self._driver.get(kind, key))
        return None if raw is None else self._record(raw)

    async def list(self, kind: str, *, thread_id: str | None = None) -> builtins.list[Record]:
        """Every record of ``kind`` (of one thread, if given), in insertion order."""
        _check_names(kind, "-")
        raws = await self._call(
            self._driver.list(kind, None if thread_id is None else str(thread_id))
        )
        return [self._record(raw) for raw in raws]

    async def append_step(
        self, thread_id: str, step: dict[str, Any], *, run_id: str | None = None
    ) -> int:
        """Append ``step`` to the thread's step log.

        Returns:
            The step's 0-based index, assigned atomically.
        """
        thread = str(thread_id)
        payload = self._step(thread, step, _run(run_id))
        return await self._call(self._driver.append_step(thread, payload))

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
        raw = self._raw(kind, key, value, thread_id, run_id)
        payload = self._step(raw.thread_id, step, raw.run_id)
        return await self._call(self._driver.put_with_step(raw, replace, payload))

    async def steps(self, thread_id: str) -> builtins.list[dict[str, Any]]:
        """The thread's step log, oldest first."""
        return [step for _, step in await self.indexed_steps(thread_id)]

    async def indexed_steps(self, thread_id: str) -> builtins.list[tuple[int, dict[str, Any]]]:
        """The thread's step log as ``(index, step)`` pairs, oldest first.

        An index can be missing if a process died while appending to a Redis log.
        """
        thread = str(thread_id)
        rows = await self._call(self._driver.steps(thread))
        return [(index, self._step_value(thread, index, payload)) for index, payload in rows]

    async def delete_thread(self, thread_id: str) -> None:
        """Delete every record and step of the thread, and forget cached state of it."""
        thread = str(thread_id)
        await self._call(self._driver.delete_thread(thread))
        _forget([thread])

    async def delete_runs(self, run_ids: builtins.list[str]) -> None:
        """Delete every record and step written by the given runs.

        Raises:
            IdArgumentError: ``run_ids`` is a single string, or not a collection.
        """
        runs = check_run_ids(run_ids, "delete_runs")
        if runs:
            await self._call(self._driver.delete_runs(runs))
            _forget(None)

    async def keyed_hash(self) -> KeyedHash | None:
        """The keyed hash for identifiers stored in clear, or ``None`` without encryption.

        Its key is a random secret kept encrypted in this store (created on
        first use), so it is the same on every worker and across key rotation.
        """
        if self._cipher is None:
            return None
        if self._keyed is None:
            self._keyed = await load_keyed_hash(self)
        return self._keyed


class SyncRecordStore:
    """The same operations as :class:`RecordStore`, for sync code (e.g. sync graph nodes)."""

    def __init__(self, store: RecordStore) -> None:
        self._store = store

    # The run id is read here, in the caller's context: the coroutine runs on
    # the backend's loop thread, where the node's config is not visible.
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
        run = _run(run_id)
        return self._store._run_sync(
            self._store.insert(kind, key, value, thread_id=thread_id, run_id=run), "insert"
        )

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
        run = _run(run_id)
        self._store._run_sync(
            self._store.upsert(kind, key, value, thread_id=thread_id, run_id=run), "upsert"
        )

    def get(self, kind: str, key: str) -> Record | None:
        """See :meth:`RecordStore.get`."""
        return self._store._run_sync(self._store.get(kind, key), "get")

    def list(self, kind: str, *, thread_id: str | None = None) -> builtins.list[Record]:
        """See :meth:`RecordStore.list`."""
        return self._store._run_sync(self._store.list(kind, thread_id=thread_id), "list")

    def append_step(
        self, thread_id: str, step: dict[str, Any], *, run_id: str | None = None
    ) -> int:
        """See :meth:`RecordStore.append_step`."""
        run = _run(run_id)
        return self._store._run_sync(
            self._store.append_step(thread_id, step, run_id=run), "append_step"
        )

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
        run = _run(run_id)
        return self._store._run_sync(
            self._store.put_with_step(
                kind, key, value, thread_id=thread_id, step=step, replace=replace, run_id=run
            ),
            "put_with_step",
        )

    def steps(self, thread_id: str) -> builtins.list[dict[str, Any]]:
        """See :meth:`RecordStore.steps`."""
        return self._store._run_sync(self._store.steps(thread_id), "steps")

    def indexed_steps(self, thread_id: str) -> builtins.list[tuple[int, dict[str, Any]]]:
        """See :meth:`RecordStore.indexed_steps`."""
        return self._store._run_sync(self._store.indexed_steps(thread_id), "indexed_steps")

    def delete_thread(self, thread_id: str) -> None:
        """See :meth:`RecordStore.delete_thread`."""
        self._store._run_sync(self._store.delete_thread(thread_id), "delete_thread")

    def delete_runs(self, run_ids: builtins.list[str]) -> None:
        """See :meth:`RecordStore.delete_runs`."""
        self._store._run_sync(self._store.delete_runs(run_ids), "delete_runs")

    def keyed_hash(self) -> KeyedHash | None:
        """See :meth:`RecordStore.keyed_hash`."""
        store = self._store
        if store._cipher is None or store._keyed is not None:  # no hop to the loop
            return store._keyed
        return store._run_sync(store.keyed_hash(), "keyed_hash")


def _run_inline(coro: Coroutine[Any, Any, T]) -> T:
    """Drive a coroutine that never suspends (the in-memory driver) to completion."""
    try:
        coro.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    coro.close()
    raise RuntimeError("in-memory record store operation unexpectedly suspended")
