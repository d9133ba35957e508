"""Values stored encrypted, bound to their thread, kind and key (or step index)."""

from __future__ import annotations

import os
from typing import Any

import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from tests.backends import Backend
from tether.checkpointing.delegating import DelegatingSaver
from tether.store import RecordStoreError, store_for
from tether.store.record import RawRecord


class AesGcmTestCipher:
    """A real AES-256-GCM cipher with the encryption layer's interface."""

    def __init__(self) -> None:
        self._aead = AESGCM(AESGCM.generate_key(bit_length=256))

    def encrypt(self, plaintext: bytes, aad: bytes) -> bytes:
        nonce = os.urandom(12)
        return nonce + self._aead.encrypt(nonce, plaintext, aad)

    def decrypt(self, blob: bytes, aad: bytes) -> bytes:
        return self._aead.decrypt(blob[:12], blob[12:], aad)


class EncryptingLayer(DelegatingSaver):
    """A delegating layer that exposes a cipher, as tether's encryption layer does."""

    def __init__(self, inner: Any, cipher: AesGcmTestCipher) -> None:
        super().__init__(inner)
        self.encryption = cipher


async def test_values_and_steps_are_stored_encrypted(backend: Backend) -> None:
    async with backend.open() as saver:
        layered = EncryptingLayer(saver, AesGcmTestCipher())
        store = store_for(layered)
        assert store.encrypted
        assert not store_for(saver).encrypted
        await store.insert("model", "k", {"secret": "card 4242"}, thread_id="t")
        await store.append_step("t", {"secret": "step text"})
        assert (await store.get("model", "k")).value == {"secret": "card 4242"}  # type: ignore[union-attr]
        assert await store.steps("t") == [{"secret": "step text"}]
        raw = await store._driver.get("model", "k")
        assert raw is not None
        assert "card" not in raw.payload
        assert raw.payload.startswith("enc1:")
        # The plain view of the same backend refuses ciphertext instead of guessing.
        with pytest.raises(RecordStoreError, match="opened without encryption"):
            await store_for(saver).get("model", "k")


async def test_ciphertext_moved_to_another_key_does_not_decrypt(backend: Backend) -> None:
    async with backend.open() as saver:
        store = store_for(EncryptingLayer(saver, AesGcmTestCipher()))
        await store.insert("tool", "k1", {"v": 1}, thread_id="t")
        raw = await store._driver.get("tool", "k1")
        assert raw is not None
        await store._driver.insert(RawRecord("tool", "k2", "t", raw.payload, raw.created_at))
        with pytest.raises(InvalidTag):
            await store.get("tool", "k2")


async def test_plaintext_record_is_refused_when_encryption_is_on(backend: Backend) -> None:
    async with backend.open() as saver:
        await store_for(saver).insert("model", "k", {"v": 1}, thread_id="t")
        store = store_for(EncryptingLayer(saver, AesGcmTestCipher()))
        with pytest.raises(RecordStoreError, match="plaintext but encryption is on"):
            await store.get("model", "k")
