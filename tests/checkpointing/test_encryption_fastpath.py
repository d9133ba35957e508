"""The sealing fast path keeps every binding: AAD prefixes, batched nonces, envelope reuse."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from tests.backends import Backend
from tests.checkpointing.encryption_helpers import CANARY, ring
from tether.checkpointing.encrypted import (
    SEALED_METADATA_KEY,
    EncryptedSaver,
    channel_aad,
    metadata_aad,
    write_aad,
)
from tether.checkpointing.encryption import NONCE_BYTES, TamperedCiphertextError, aad
from tether.checkpointing.memory import MemorySaver


def _config(thread_id: str, ns: str = "") -> Any:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}


def test_associated_data_is_byte_for_byte_the_documented_layout() -> None:
    """Envelopes written before the prefix cache must still open: same bytes as aad(...)."""
    assert aad("a", "b") + aad("c") == aad("a", "b", "c")
    places: list[tuple[Any, str]] = [("t", ""), ("t", "child:1"), (42, "")]
    for thread_id, ns in places:
        t = str(thread_id)
        version = "00002.0.5"
        assert channel_aad(thread_id, ns, "note", version) == aad("channel", t, ns, "note", version)
        assert channel_aad(thread_id, ns, "note", 3) == aad("channel", t, ns, "note", "3")
        assert channel_aad(t, ns, "note", None) == aad("channel", t, ns, "note", "")
        assert write_aad(t, ns, "c1", "task", "note") == aad("write", t, ns, "c1", "task", "note")
        assert metadata_aad(t, ns, "c1") == aad("metadata", t, ns, "c1")


def test_encrypt_many_gives_every_value_its_own_nonce_and_binding() -> None:
    r = ring("k1")
    assert r.encrypt_many([]) == []
    items = [(b"same plaintext", aad("value", str(i % 2))) for i in range(64)]
    blobs = r.encrypt_many(items)
    header = len(blobs[0]) - NONCE_BYTES - len(b"same plaintext") - 16
    nonces = {blob[header : header + NONCE_BYTES] for blob in blobs}
    assert len(nonces) == len(blobs), "a nonce was reused"
    for blob, (plaintext, data) in zip(blobs, items, strict=True):
        assert r.decrypt(blob, data) == plaintext
    with pytest.raises(TamperedCiphertextError):
        r.decrypt(blobs[0], items[1][1])


async def test_reused_envelopes_never_cross_threads_or_namespaces(backend: Backend) -> None:
    """The same value object at the same version in another thread gets its own envelope."""
    value = [CANARY]
    async with backend.open(encryption=ring("k1")) as saver:
        assert isinstance(saver, EncryptedSaver)
        version = saver.get_next_version(None, None)
        for thread_id, ns in (("a", ""), ("b", ""), ("a", "child:1")):
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"note": value}
            checkpoint["channel_versions"] = {"note": version}
            await saver.aput(
                _config(thread_id, ns), checkpoint, {"source": "loop", "step": 0}, {"note": version}
            )
        for thread_id, ns in (("a", ""), ("b", ""), ("a", "child:1")):
            tup = await saver.aget_tuple(_config(thread_id, ns))
            assert tup is not None
            assert tup.checkpoint["channel_values"]["note"] == value


async def test_empty_sealed_metadata_is_still_fresh_and_bound() -> None:
    """Metadata with nothing to hide is still sealed per checkpoint; moving it is refused."""
    saver = EncryptedSaver(MemorySaver(), ring("k1"))
    first = saver._seal_metadata("t", "", "c1", {"source": "loop", "step": 1})
    second = saver._seal_metadata("t", "", "c2", {"source": "loop", "step": 2})
    assert first[SEALED_METADATA_KEY] != second[SEALED_METADATA_KEY]  # type: ignore[literal-required]
    checkpoint = empty_checkpoint()
    stored = await saver.aput(_config("t"), checkpoint, {"source": "loop", "step": 1}, {})
    sealed = await saver.inner.aget_tuple(stored)
    assert sealed is not None
    moved = empty_checkpoint()
    await saver.inner.aput(_config("t"), moved, sealed.metadata, {})
    with pytest.raises(TamperedCiphertextError, match="metadata"):
        await saver.aget_tuple(_config("t"))


async def test_many_threads_evict_the_cache_without_losing_anything() -> None:
    saver = EncryptedSaver(MemorySaver(), ring("k1"))
    version = saver.get_next_version(None, None)
    threads = [f"t{i}" for i in range(300)]
    for round_ in range(2):
        for thread_id in threads:
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"note": f"{thread_id} {round_}"}
            checkpoint["channel_versions"] = {"note": f"{version}.{round_}"}
            new = {"note": checkpoint["channel_versions"]["note"]}
            await saver.aput(_config(thread_id), checkpoint, {"source": "loop"}, new)
    assert len(saver._scopes) <= 256
    for thread_id in threads:
        tup = await saver.aget_tuple(_config(thread_id))
        assert tup is not None
        assert tup.checkpoint["channel_values"]["note"] == f"{thread_id} 1"
