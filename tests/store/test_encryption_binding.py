"""Records and steps are bound to (thread, kind, key) and (thread, index) without ambiguity.

Version 1 joined the parts with ``"|"``: a record moved from thread ``a|tool|b``, key
``c`` to thread ``a``, key ``b|tool|c`` decrypted, and so did a step moved into a record
of kind ``step``. Records and steps written by version 1 still read, and rotation
rewrites them to the current version.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.backends import Backend
from tests.checkpointing.encryption_helpers import key, ring
from tests.checkpointing.envelopes_v1 import (
    envelope_version,
    record_payload_v1,
    step_payload_v1,
)
from tether.checkpointing._encrypted import EncryptedSaver
from tether.checkpointing.encryption import KeyRing, MissingKeyError, TamperedCiphertextError
from tether.checkpointing.rotation import rotate_keys
from tether.store import RecordStore, store_for
from tether.store._record import RawRecord, StepPayload


async def _move(store: RecordStore, kind: str, key: str, to_key: str, to_thread: str) -> None:
    raw = await store.driver.get(kind, key)
    assert raw is not None
    await store.driver.insert(RawRecord(kind, to_key, to_thread, raw.payload, raw.created_at))


async def test_a_record_moved_to_a_colliding_thread_and_key_is_refused(backend: Backend) -> None:
    async with backend.open(encryption=ring("k1")) as saver:
        store = store_for(saver)
        await store.insert("tool", "c", {"refund": 10}, thread_id="a|tool|b")
        await _move(store, "tool", "c", to_key="b|tool|c", to_thread="a")
        # Thread "a" has no data key of its own: the value names another thread's.
        with pytest.raises(TamperedCiphertextError, match=r"data key 'd[0-9a-f]{16}'"):
            await store.get("tool", "b|tool|c")
        assert (await store.get("tool", "c")).value == {"refund": 10}  # type: ignore[union-attr]


async def test_a_step_moved_into_a_record_is_refused(backend: Backend) -> None:
    async with backend.open(encryption=ring("k1")) as saver:
        store = store_for(saver)
        await store.append_step("t", {"kind": "tool", "output": "refund 10"})
        ((index, payload),) = await store.driver.steps("t")
        await store.driver.insert(RawRecord("step", str(index), "t", payload, 0.0))
        with pytest.raises(TamperedCiphertextError):
            await store.get("step", str(index))


async def test_records_and_steps_of_version_1_still_read_and_rotate_to_the_current_version(
    backend: Backend,
) -> None:
    async with backend.open(encryption=ring("k1")) as saver:
        store = store_for(saver)
        text = json.dumps({"state": "done", "output": "refund 10"})
        payload = record_payload_v1("k1", text, "t", "tool", "t||task|tool.refund.1")
        await store.driver.insert(RawRecord("tool", "t||task|tool.refund.1", "t", payload, 0.0))
        step = step_payload_v1("k1", json.dumps({"kind": "tool"}), "t", 0)
        await store.driver.append_step("t", StepPayload(lambda i: step, step))

        record = await store.get("tool", "t||task|tool.refund.1")
        assert record is not None
        assert record.value == {"state": "done", "output": "refund 10"}
        assert await store.steps("t") == [{"kind": "tool"}]

        report = await rotate_keys(saver)
        assert report.records == 1
        assert report.steps == 1
        raw = await store.driver.get("tool", "t||task|tool.refund.1")
        assert raw is not None
        assert envelope_version(raw.payload) == 2
        ((_, stored_step),) = await store.driver.steps("t")
        assert envelope_version(stored_step) == 2
        assert (await store.get("tool", "t||task|tool.refund.1")).value == record.value  # type: ignore[union-attr]
        assert await store.steps("t") == [{"kind": "tool"}]
        again = await rotate_keys(saver)
        assert (again.records, again.steps) == (0, 0)


async def test_an_encrypted_record_read_without_a_key_names_the_variable(
    backend: Backend,
) -> None:
    async with backend.open(encryption=ring("k1")) as saver:
        await store_for(saver).insert("model", "k", {"secret": "card 4242"}, thread_id="t")
        plain = store_for(saver.inner)  # type: ignore[attr-defined]
        assert not plain.encrypted
        with pytest.raises(MissingKeyError, match="TETHER_ENCRYPTION_KEYS"):
            await plain.get("model", "k")
        with pytest.raises(MissingKeyError, match="TETHER_ENCRYPTION_KEYS"):
            await plain.list("model", thread_id="t")


class _CountingRing(KeyRing):
    """The real ring, counting the values it seals (each one spends a nonce of the key)."""

    sealed = 0

    def encrypt(self, plaintext: bytes, aad: bytes, *, data_key: Any = None) -> bytes:
        type(self).sealed += 1
        return super().encrypt(plaintext, aad, data_key=data_key)


async def test_a_step_spends_exactly_one_nonce(backend: Backend) -> None:
    """Each envelope uses up one of the key's 2^32 random nonces: none is sealed for nothing."""
    async with backend.open(encryption=False) as plain:
        counting = _CountingRing([("k1", key("k1"))])
        store = store_for(EncryptedSaver(plain, counting))
        await store.keyed_hash()  # the store's secret (sealed once, when it is created)
        await store.data_key("t", create=True)  # the thread's data key (sealed once)
        before = _CountingRing.sealed
        await store.append_step("t", {"kind": "tool"})
        assert _CountingRing.sealed - before == 1
        await store.put_with_step("tool", "k", {"v": 1}, thread_id="t", step={"kind": "tool"})
        assert _CountingRing.sealed - before == 3  # the record and its step
