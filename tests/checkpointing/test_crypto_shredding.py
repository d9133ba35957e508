"""Crypto-shredding: each thread's values are sealed under its own data key, which erasure destroys.

A raw copy of the store (a backup file, a row dump, Redis DUMPs) is taken before
a thread is deleted; the copy's rows of that thread, all but its wrapped data
key, are written back afterwards, as a replica or a partial restore would. None
of them can be read with the key ring: checkpoints, writes, records and steps
all fail with ``ErasedDataKeyError``.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest

from tests.backends import Backend
from tests.checkpointing.encryption_helpers import CANARY, build_graph, graph_config, ring
from tests.checkpointing.encryption_helpers import graph_input as first_input
from tests.checkpointing.raw_copies import restore_thread, take_copy
from tests.checkpointing.shredding_helpers import ERASED, conf, reads_of, seed_thread
from tether.checkpointing import binding
from tether.checkpointing._encrypted import EncryptedSaver
from tether.checkpointing.encryption import (
    ErasedDataKeyError,
    KeyRing,
    TamperedCiphertextError,
    WrongKeyError,
)
from tether.checkpointing.rotation import rotate_keys
from tether.store import RecordStoreError, store_for
from tether.store._data_keys import THREAD_KEY_KIND, key_record, load_data_key
from tether.store._record import RawRecord, StepPayload


async def test_a_copy_taken_before_erasure_cannot_decrypt_the_erased_thread(
    backend: Backend,
) -> None:
    async with backend.open(encryption=ring("k1")) as saver:
        await seed_thread(saver, "gone")
        await seed_thread(saver, "kept")
        store = store_for(saver)
        assert await store.driver.get(THREAD_KEY_KIND, key_record("gone")) is not None
        kept_before = await reads_of(saver, "kept")
        copied = await take_copy(backend, saver)

        await saver.adelete_thread("gone")  # what `tether erase` does to each thread
        assert await store.driver.get(THREAD_KEY_KIND, key_record("gone")) is None
        assert await restore_thread(backend, saver, copied, "gone") > 3
        # The ciphertext is back, the key is not: nothing of the thread opens.
        assert await saver.inner.aget_tuple(conf("gone")) is not None
        with pytest.raises(ErasedDataKeyError, match=ERASED):
            await saver.aget_tuple(conf("gone"))
        with pytest.raises(ErasedDataKeyError, match=r"record 'tool' 'gone\|refund'"):
            await store.get("tool", "gone|refund")
        with pytest.raises(ErasedDataKeyError, match=r"step 0 of thread 'gone'"):
            await store.steps("gone")
        assert await reads_of(saver, "kept") == kept_before  # other threads are untouched

    # Another process, with the same key ring, cannot read it either.
    async with backend.open(encryption=ring("k1")) as other:
        if backend.name != "memory":
            with pytest.raises(ErasedDataKeyError):
                await other.aget_tuple(conf("gone"))
            assert await reads_of(other, "kept") == kept_before


async def test_the_copy_itself_holds_only_a_wrapped_key_that_the_rotated_ring_cannot_open(
    backend: Backend,
) -> None:
    """A full backup still holds the wrapped key: after rotation its old key opens nothing."""
    if backend.name != "sqlite":
        pytest.skip("the file copy is SQLite's; the other backends' copies are rows")
    async with backend.open(encryption=ring("k1")) as saver:
        await seed_thread(saver, "gone")
        copied = await take_copy(backend, saver)
        await saver.adelete_thread("gone")
        assert isinstance(saver, EncryptedSaver)
        await rotate_keys(EncryptedSaver(saver.inner, ring("k2", "k1")))
    wrapped = copied.data.execute(
        "SELECT value FROM tether_records WHERE kind = ? AND key = ?",
        (THREAD_KEY_KIND, key_record("gone")),
    ).fetchone()[0]
    blob = base64.b64decode(wrapped.removeprefix("enc1:"))
    current = ring("k2")  # the old key dropped after the rotation
    with pytest.raises(Exception, match="key 'k1', which is not in the key ring"):
        current.decrypt(blob, binding.record("gone", THREAD_KEY_KIND, key_record("gone")))


async def test_a_thread_written_again_after_erasure_gets_a_new_key(backend: Backend) -> None:
    async with backend.open(encryption=ring("k1")) as saver:
        store = store_for(saver)
        await seed_thread(saver, "t")
        first = await store.data_key("t")
        copied = await take_copy(backend, saver)
        await saver.adelete_thread("t")
        await seed_thread(saver, "t")  # the same objects again: no envelope of the old key reused
        second = await store.data_key("t")
        assert first is not None
        assert second is not None
        assert second.key_id != first.key_id
        reads = await reads_of(saver, "t")
        assert reads[1].value == {"card": CANARY}
        # The pre-erasure copy's rows do not open under the new key either.
        await saver.adelete_thread("t")
        await store.data_key("t", create=True)
        await restore_thread(backend, saver, copied, "t")
        with pytest.raises(TamperedCiphertextError, match="written before the thread was erased"):
            await saver.aget_tuple(conf("t"))


async def test_values_written_before_data_keys_still_read_and_rotate(backend: Backend) -> None:
    """Version-2 envelopes (under a ring key) beside version-3 ones; both read after rotation."""
    async with backend.open(encryption=ring("k1")) as saver:
        assert isinstance(saver, EncryptedSaver)
        old = EncryptedSaver(saver.inner, saver.encryption)

        async def no_data_key(*args: Any, **kwargs: Any) -> None:
            return None

        old._data_key = no_data_key  # type: ignore[method-assign]  # as before this change
        graph = build_graph(old)
        await graph.ainvoke(first_input(), graph_config("legacy"))
        raw = await old.inner.aget_tuple(conf("legacy"))
        assert raw is not None
        assert {v[4] for v in raw.checkpoint["channel_values"].values()} == {2}
        store = store_for(saver)
        text = json.dumps({"card": CANARY})
        sealed = saver.encryption.encrypt(
            text.encode(), binding.record("legacy", "tool", "legacy|refund")
        )
        payload = "enc1:" + base64.b64encode(sealed).decode()
        await store.driver.insert(RawRecord("tool", "legacy|refund", "legacy", payload, 0.0))
        step = saver.encryption.encrypt(b'{"kind":"tool"}', binding.step("legacy", 0))
        step_text = "enc1:" + base64.b64encode(step).decode()
        await store.driver.append_step("legacy", StepPayload(lambda i: step_text, step_text))
        assert await store.driver.get(THREAD_KEY_KIND, key_record("legacy")) is None

        # Resumed by this version: new values under the thread's data key, old ones still read.
        result = await build_graph(saver).ainvoke(
            _resume(), {"configurable": {"thread_id": "legacy"}}
        )
        assert result["messages"][-1].content == "reviewer said: yes"
        assert await store.driver.get(THREAD_KEY_KIND, key_record("legacy")) is not None
        before = await reads_of(saver, "legacy")
        assert before[1].value == {"card": CANARY}
        assert before[2] == [{"kind": "tool"}]

        report = await rotate_keys(EncryptedSaver(saver.inner, ring("k2", "k1")))
        assert report.data_keys == 1
        assert report.records >= 2  # the data key and the old record
        assert report.steps == 1  # the old step; the new ones are under the data key
        again = await rotate_keys(EncryptedSaver(saver.inner, ring("k2", "k1")))
        assert (again.rewrapped, again.data_keys) == (0, 0)
        assert await reads_of(EncryptedSaver(saver.inner, ring("k2")), "legacy") == before


def _resume() -> Any:
    from langgraph.types import Command

    return Command(resume="yes")


async def test_two_writers_creating_a_threads_key_at_once_agree(backend: Backend) -> None:
    async with backend.open(encryption=ring("k1")) as saver:
        a = store_for(saver)
        b = store_for(EncryptedSaver(saver.inner, ring("k1")))  # another layer, same ring
        keys = await asyncio.gather(*(load_data_key(s, "race", create=True) for s in [a, b] * 4))
        assert len({k.key_id for k in keys if k is not None}) == 1
        assert len(await a.list(THREAD_KEY_KIND, thread_id="race")) == 1


async def test_a_bad_data_key_record_is_refused_with_a_clear_error(backend: Backend) -> None:
    async with backend.open(encryption=ring("k1")) as saver:
        store = store_for(saver)
        await store.insert(
            THREAD_KEY_KIND, key_record("t"), {"id": "d1", "key": "not base64!"}, thread_id="t"
        )
        with pytest.raises(RecordStoreError, match=r"data key of thread 't'.*malformed"):
            await store.append_step("t", {"kind": "tool"})
        with pytest.raises(RecordStoreError, match=r"data key of thread 't'.*malformed"):
            await saver.aput(
                {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
                _empty(),
                {},
                {},
            )


async def test_a_ring_that_did_not_wrap_the_key_cannot_use_it(backend: Backend) -> None:
    async with backend.open(encryption=ring("k1")) as saver:
        await seed_thread(saver, "t")
        impostor = EncryptedSaver(saver.inner, KeyRing([("k1", b"\x07" * 32)]))
        with pytest.raises(WrongKeyError, match=r"record 'thread_key' 'thread:t'.*different key"):
            await impostor.aget_tuple(conf("t"))


def _empty() -> Any:
    from langgraph.checkpoint.base import empty_checkpoint

    return empty_checkpoint()


async def test_a_deleted_threads_step_log_starts_again_at_zero(backend: Backend) -> None:
    """An encrypted step is sealed for a guessed index; a guess past a deleted log is dropped."""
    async with backend.open(encryption=ring("k1")) as saver:
        store = store_for(saver)
        for n in range(3):
            assert await store.append_step("t", {"n": n}) == n
        await saver.adelete_thread("t")
        assert await store.append_step("t", {"n": 0}) == 0
        assert await store.steps("t") == [{"n": 0}]


async def test_tether_erase_destroys_the_threads_data_key(
    backend: Backend, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the runtime's erasure (`tether erase`): the copy's rows of the thread stay sealed."""
    from tests.checkpointing.encryption_helpers import spec
    from tests.retention.world import NOW, open_world, seed
    from tether.retention import erase

    monkeypatch.setenv("TETHER_ENCRYPTION_KEYS", spec("k1"))
    async with open_world(backend, tmp_path) as world:
        await seed(world, "gone", "success", days=3)
        await seed(world, "kept", "success", days=3)
        saver = await world.saver()
        assert isinstance(await _encrypted(saver), EncryptedSaver)
        store = store_for(saver)
        assert await store.driver.get(THREAD_KEY_KIND, key_record("gone")) is not None
        copied = await take_copy(backend, saver)
        receipt = await erase(world.runtime, thread="gone", now=NOW)
        assert receipt.counts["checkpoints"] == 3
        assert await store.driver.get(THREAD_KEY_KIND, key_record("gone")) is None
        assert await store.driver.get(THREAD_KEY_KIND, key_record("kept")) is not None
        assert await restore_thread(backend, saver, copied, "gone") > 3
        with pytest.raises(ErasedDataKeyError, match=ERASED):
            await saver.aget_tuple(conf("gone"))
        with pytest.raises(ErasedDataKeyError):
            await store.steps("gone")
        assert await saver.aget_tuple(conf("kept")) is not None


async def _encrypted(saver: Any) -> Any:
    from tether.checkpointing.rotation import encrypted_layer

    return encrypted_layer(saver)


async def test_concurrent_first_writes_of_a_thread_load_its_key_once(backend: Backend) -> None:
    """A checkpoint and its writes saved at once (as LangGraph does) share one key load."""
    async with backend.open(encryption=ring("k1")) as saver:
        store = store_for(saver)
        loads = 0
        load = load_data_key

        async def counting(*args: Any, **kwargs: Any) -> Any:
            nonlocal loads
            loads += 1
            return await load(*args, **kwargs)

        import tether.store._record as record_module

        original = record_module.load_data_key
        record_module.load_data_key = counting  # type: ignore[assignment]
        try:
            keys = await asyncio.gather(*(store.data_key("new", create=True) for _ in range(6)))
        finally:
            record_module.load_data_key = original  # type: ignore[assignment]
        assert loads == 1
        assert len({k.key_id for k in keys if k is not None}) == 1
