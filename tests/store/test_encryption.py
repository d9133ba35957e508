"""Values stored encrypted, bound to their thread, kind and key (or step index)."""

from __future__ import annotations

import pytest

from tests.backends import Backend
from tests.checkpointing.encryption_helpers import ring
from tether.checkpointing._encrypted import EncryptedSaver
from tether.checkpointing.encryption import MissingKeyError, TamperedCiphertextError
from tether.store import RecordStoreError, store_for
from tether.store._record import RawRecord


async def test_values_and_steps_are_stored_encrypted(backend: Backend) -> None:
    async with backend.open(encryption=ring("k1")) as saver:
        assert isinstance(saver, EncryptedSaver)
        store = store_for(saver)
        assert store.encrypted
        assert not store_for(saver.inner).encrypted
        await store.insert("model", "k", {"secret": "card 4242"}, thread_id="t")
        await store.append_step("t", {"secret": "step text"})
        assert (await store.get("model", "k")).value == {"secret": "card 4242"}  # type: ignore[union-attr]
        assert await store.steps("t") == [{"secret": "step text"}]
        raw = await store.driver.get("model", "k")
        assert raw is not None
        assert "card" not in raw.payload
        assert raw.payload.startswith("enc1:")
        ((_, step),) = await store.driver.steps("t")
        assert "step text" not in step
        # The plain view of the same backend refuses ciphertext instead of guessing.
        with pytest.raises(MissingKeyError, match="opened without a key"):
            await store_for(saver.inner).get("model", "k")


async def test_ciphertext_moved_to_another_key_does_not_decrypt(backend: Backend) -> None:
    async with backend.open(encryption=ring("k1")) as saver:
        store = store_for(saver)
        await store.insert("tool", "k1", {"v": 1}, thread_id="t")
        raw = await store.driver.get("tool", "k1")
        assert raw is not None
        await store.driver.insert(RawRecord("tool", "k2", "t", raw.payload, raw.created_at))
        with pytest.raises(TamperedCiphertextError, match="record 'tool' 'k2'"):
            await store.get("tool", "k2")


async def test_plaintext_record_is_refused_when_encryption_is_on(backend: Backend) -> None:
    async with backend.open(encryption=False) as saver:
        await store_for(saver).insert("model", "k", {"v": 1}, thread_id="t")
        store = store_for(EncryptedSaver(saver, ring("k1")))
        with pytest.raises(RecordStoreError, match="plaintext but encryption is on"):
            await store.get("model", "k")
        migrating = store_for(EncryptedSaver(saver, ring("k1", allow_plaintext=True)))
        assert (await migrating.get("model", "k")).value == {"v": 1}  # type: ignore[union-attr]
