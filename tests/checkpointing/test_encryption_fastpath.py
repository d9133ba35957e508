"""The sealing fast path keeps every binding: AAD prefixes, batched nonces, envelope reuse."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from tests.backends import Backend
from tests.checkpointing.encryption_helpers import CANARY, ring
from tether.checkpointing._encrypted import SEALED_METADATA_KEY, EncryptedSaver
from tether.checkpointing._memory import MemorySaver
from tether.checkpointing.encryption import (
    NONCE_BYTES,
    TamperedCiphertextError,
    aad,
    data_key_named,
)
from tether.store import store_for


def _config(thread_id: str, ns: str = "") -> Any:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}


def _part(text: str) -> bytes:
    raw = text.encode()
    return len(raw).to_bytes(4, "big") + raw


def _bound(*parts: str) -> bytes:
    return b"".join(_part(p) for p in parts)


async def test_the_real_path_binds_the_documented_bytes() -> None:
    """Envelopes the saver and the record store write open with the documented layout."""
    r = ring("k1")
    saver = EncryptedSaver(MemorySaver(), r)
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"note": CANARY, "count": 3}
    checkpoint["channel_versions"] = {"note": "00002.0.5", "count": "00001.0.7", "gone": "9"}
    new = {"note": "00002.0.5", "count": "00001.0.7"}
    stored = await saver.aput(_config("t", "ns:1"), checkpoint, {"source": "loop"}, new)
    await saver.aput_writes(stored, [("note", "w")], "task-1")
    cid = stored["configurable"]["checkpoint_id"]
    raw = await saver.inner.aget_tuple(stored)
    assert raw is not None
    note = raw.checkpoint["channel_values"]["note"]
    assert note[4] == 3  # envelope version: sealed under the thread's data key
    store = store_for(saver)
    dk = await store.data_key("t")
    assert dk is not None
    assert data_key_named(note) == dk.key_id
    r.decrypt(note, _bound("channel", "t", "ns:1", "note", "00002.0.5"), data_key=dk)
    sealed = base64.b64decode(raw.metadata[SEALED_METADATA_KEY])  # type: ignore[literal-required]
    versions = ("3", "count", "00001.0.7", "gone", "9", "note", "00002.0.5")  # sorted by name
    r.decrypt(sealed, _bound("metadata", "t", "ns:1", cid, *versions), data_key=dk)
    with pytest.raises(TamperedCiphertextError):  # the version-1 binding no longer opens it
        r.decrypt(sealed, _bound("metadata", "t", "ns:1", cid), data_key=dk)
    (_, _, write) = raw.pending_writes[0]  # type: ignore[index]
    r.decrypt(write, _bound("write", "t", "ns:1", cid, "task-1", "note"), data_key=dk)

    await store.insert("tool", "k|1", {"v": 1}, thread_id="t")
    await store.append_step("t", {"kind": "tool"})
    record = await store._driver.get("tool", "k|1")
    assert record is not None
    sealed_record = base64.b64decode(record.payload.removeprefix("enc1:"))
    r.decrypt(sealed_record, _bound("record", "t", "tool", "k|1"), data_key=dk)
    ((index, step),) = await store._driver.steps("t")
    r.decrypt(
        base64.b64decode(step.removeprefix("enc1:")), _bound("step", "t", str(index)), data_key=dk
    )
    # The data key itself is a record sealed by the ring (version 2), bound to its thread.
    wrapped = await store._driver.get("thread_key", "thread:t")
    assert wrapped is not None
    opened = r.decrypt(
        base64.b64decode(wrapped.payload.removeprefix("enc1:")),
        _bound("record", "t", "thread_key", "thread:t"),
    )
    assert dk.key_id in opened.decode()


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
    first = await saver.aput(_config("t"), empty_checkpoint(), {"source": "loop", "step": 1}, {})
    second = await saver.aput(_config("t"), empty_checkpoint(), {"source": "loop", "step": 2}, {})
    raw = [await saver.inner.aget_tuple(c) for c in (first, second)]
    assert raw[0] is not None
    assert raw[1] is not None
    sealed = [t.metadata[SEALED_METADATA_KEY] for t in raw]  # type: ignore[union-attr, literal-required]
    assert sealed[0] != sealed[1]
    moved = empty_checkpoint()
    await saver.inner.aput(_config("t"), moved, raw[0].metadata, {})
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
