"""Ciphertexts are bound to where they were written; every failure has its own error."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint

from tests.backends import Backend
from tests.checkpointing.encryption_helpers import CANARY, ring, run_graph
from tests.checkpointing.raw_rows import edit_row
from tether.checkpointing._encrypted import SEALED_METADATA_KEY, EncryptedSaver
from tether.checkpointing.encryption import (
    EncryptionError,
    KeyRing,
    PlaintextRefusedError,
    TamperedCiphertextError,
    UnknownKeyError,
    WrongKeyError,
)
from tether.errors import TetherError

DATA_KEY = r"data key 'd[0-9a-f]{16}'"  # values are sealed under their thread's data key


def _config(thread_id: str, checkpoint_id: str | None = None) -> Any:
    conf = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


async def _put_one(saver: BaseCheckpointSaver[Any], thread_id: str) -> Any:
    """One checkpoint with a str channel and one pending write, through ``saver``."""
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"note": CANARY}
    checkpoint["channel_versions"] = {"note": saver.get_next_version(None, None)}
    stored = await saver.aput(
        _config(thread_id),
        checkpoint,
        {"source": "input", "step": -1, "parents": {}},
        checkpoint["channel_versions"],
    )
    await saver.aput_writes(stored, [("note", f"write {CANARY}")], "task-1")
    return stored


def test_error_classes_share_one_base() -> None:
    for cls in (PlaintextRefusedError, TamperedCiphertextError, UnknownKeyError, WrongKeyError):
        assert issubclass(cls, EncryptionError)
    assert issubclass(EncryptionError, TetherError)


async def test_ciphertext_replayed_onto_another_thread_is_refused(backend: Backend) -> None:
    """Upstream #9004: the inner saver stores thread A's envelopes under thread B."""
    async with backend.open(encryption=ring("k1")) as saver:
        assert isinstance(saver, EncryptedSaver)
        stored = await _put_one(saver, "thread-a")
        sealed = await saver.inner.aget_tuple(stored)
        assert sealed is not None
        assert isinstance(sealed.checkpoint["channel_values"]["note"], bytes)
        await saver.inner.aput(
            _config("thread-b"),
            sealed.checkpoint,
            sealed.metadata,
            sealed.checkpoint["channel_versions"],
        )
        with pytest.raises(TamperedCiphertextError, match=rf"thread 'thread-b'.*{DATA_KEY}"):
            await saver.aget_tuple(_config("thread-b"))
        # The original is untouched and still reads.
        tup = await saver.aget_tuple(stored)
        assert tup is not None
        assert tup.checkpoint["channel_values"]["note"] == CANARY
        assert tup.pending_writes == [("task-1", "note", f"write {CANARY}")]


async def test_raw_storage_copy_is_refused_and_copy_thread_reencrypts(backend: Backend) -> None:
    async with backend.open(encryption=ring("k1")) as saver:
        assert isinstance(saver, EncryptedSaver)
        await run_graph(saver, "source")
        await saver.inner.acopy_thread("source", "raw-copy")  # bytes copied as they are
        with pytest.raises(TamperedCiphertextError, match="raw-copy"):
            await saver.aget_tuple({"configurable": {"thread_id": "raw-copy"}})
        await saver.acopy_thread("source", "proper-copy")  # through the layer
        src = [t async for t in saver.alist({"configurable": {"thread_id": "source"}})]
        dst = [t async for t in saver.alist({"configurable": {"thread_id": "proper-copy"}})]
        assert [t.checkpoint["channel_values"] for t in src] == [
            t.checkpoint["channel_values"] for t in dst
        ]
        assert [t.metadata for t in src] == [t.metadata for t in dst]
        assert [t.pending_writes for t in src] == [t.pending_writes for t in dst]


async def test_write_replayed_under_another_task_is_refused(backend: Backend) -> None:
    async with backend.open(encryption=ring("k1")) as saver:
        assert isinstance(saver, EncryptedSaver)
        stored = await _put_one(saver, "t")
        sealed = await saver.inner.aget_tuple(stored)
        assert sealed is not None
        assert sealed.pending_writes
        envelope = sealed.pending_writes[0][2]
        await saver.inner.aput_writes(stored, [("note", envelope)], "task-2")
        with pytest.raises(TamperedCiphertextError, match="task 'task-2'"):
            await saver.aget_tuple(stored)


async def test_tampered_ciphertext_is_refused(backend: Backend) -> None:
    async with backend.open(encryption=ring("k1")) as saver:
        assert isinstance(saver, EncryptedSaver)
        stored = await _put_one(saver, "t")
        cid = stored["configurable"]["checkpoint_id"]

        def flip(checkpoint: dict[str, Any], clear: dict[str, Any]) -> None:
            envelope = bytearray(base64.b64decode(clear[SEALED_METADATA_KEY]))
            envelope[-1] ^= 0x01  # one bit of the tag
            clear[SEALED_METADATA_KEY] = base64.b64encode(bytes(envelope)).decode()

        await edit_row(backend, saver, "t", cid, flip)
        with pytest.raises(TamperedCiphertextError, match=rf"{DATA_KEY} failed authentication"):
            await saver.aget_tuple(_config("t"))


async def test_wrong_key_and_unknown_key_are_refused(backend: Backend) -> None:
    async with backend.open(encryption=ring("k1")) as saver:
        await _put_one(saver, "t")
        assert isinstance(saver, EncryptedSaver)
        impostor = EncryptedSaver(saver.inner, KeyRing([("k1", b"\x07" * 32)]))
        with pytest.raises(WrongKeyError, match=r"thread 't'.*different key.*id 'k1'"):
            await impostor.aget_tuple(_config("t"))
        unknown = EncryptedSaver(saver.inner, ring("k2"))
        with pytest.raises(UnknownKeyError, match=r"thread 't'.*key 'k1'.*not in the key ring"):
            await unknown.aget_tuple(_config("t"))


async def test_plaintext_is_refused_unless_migration_mode(backend: Backend) -> None:
    """Upstream #8938: a row written in clear is not accepted silently."""
    async with backend.open(encryption=False) as plain:
        stored = await _put_one(plain, "legacy")
        strict = EncryptedSaver(plain, ring("k1"))
        with pytest.raises(PlaintextRefusedError, match=r"thread 'legacy'.*in clear"):
            await strict.aget_tuple(stored)
        migrating = EncryptedSaver(plain, ring("k1", allow_plaintext=True))
        tup = await migrating.aget_tuple(stored)
        assert tup is not None
        assert tup.checkpoint["channel_values"]["note"] == CANARY
        assert tup.pending_writes == [("task-1", "note", f"write {CANARY}")]
        # New state written in migration mode is encrypted.
        await _put_one(migrating, "new")
        sealed = await plain.aget_tuple(_config("new"))
        assert sealed is not None
        assert migrating.encryption.is_envelope(sealed.checkpoint["channel_values"]["note"])


async def test_plaintext_write_under_an_encrypted_checkpoint_is_refused(
    backend: Backend,
) -> None:
    async with backend.open(encryption=ring("k1")) as saver:
        assert isinstance(saver, EncryptedSaver)
        stored = await _put_one(saver, "t")
        await saver.inner.aput_writes(stored, [("note", "slipped in clear")], "task-9")
        with pytest.raises(PlaintextRefusedError, match=r"task 'task-9'"):
            await saver.aget_tuple(stored)


async def test_migration_resumes_a_plaintext_thread(backend: Backend) -> None:
    """A thread interrupted before encryption was turned on resumes in migration mode."""
    from langgraph.types import Command

    from tests.checkpointing.encryption_helpers import build_graph, graph_config, graph_input

    config = graph_config("legacy")
    async with backend.open(encryption=False) as plain:
        await build_graph(plain).ainvoke(graph_input(), config)
        migrating = EncryptedSaver(plain, ring("k1", allow_plaintext=True))
        graph = build_graph(migrating)
        result = await graph.ainvoke(Command(resume="approved"), config)
        assert result["note"] == f"customer wrote from {CANARY}"
        assert result["messages"][-1].content == "reviewer said: approved"
        # The newest checkpoint is fully encrypted: it reads with migration mode off.
        strict = EncryptedSaver(plain, ring("k1"))
        latest = await strict.aget_tuple({"configurable": {"thread_id": "legacy"}})
        assert latest is not None
        assert latest.checkpoint["channel_values"]["note"] == result["note"]
        with pytest.raises(PlaintextRefusedError):
            _ = [t async for t in strict.alist({"configurable": {"thread_id": "legacy"}})]
