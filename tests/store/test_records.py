"""The record store on every backend: put-if-absent, upsert, order, deletion, sync twins."""

from __future__ import annotations

import asyncio

import pytest

from tests.backends import Backend
from tether.store import Record, RecordStoreError, store_for


async def test_insert_is_put_if_absent(backend: Backend) -> None:
    async with backend.open() as saver:
        store = store_for(saver)
        assert await store.insert("model", "k1", {"n": 1}, thread_id="t1") is True
        assert await store.insert("model", "k1", {"n": 2}, thread_id="t1") is False
        record = await store.get("model", "k1")
        assert isinstance(record, Record)
        assert (record.kind, record.key, record.thread_id, record.value) == (
            "model",
            "k1",
            "t1",
            {"n": 1},
        )
        assert record.created_at > 0
        assert await store.get("model", "missing") is None


async def test_concurrent_insert_of_one_key_has_one_winner(backend: Backend) -> None:
    async with backend.open() as saver:
        store = store_for(saver)
        results = await asyncio.gather(
            *(store.insert("intent", "same", {"by": i}, thread_id="t") for i in range(12))
        )
        assert sorted(results) == [False] * 11 + [True]
        winner = results.index(True)
        record = await store.get("intent", "same")
        assert record is not None
        assert record.value == {"by": winner}


async def test_upsert_replaces_value_and_keeps_order(backend: Backend) -> None:
    async with backend.open() as saver:
        store = store_for(saver)
        await store.upsert("budget", "a", {"v": 1}, thread_id="t")
        await store.insert("budget", "b", {"v": 1}, thread_id="t")
        await store.upsert("budget", "a", {"v": 2}, thread_id="t")
        listed = await store.list("budget")
        assert [(r.key, r.value) for r in listed] == [("a", {"v": 2}), ("b", {"v": 1})]


async def test_list_filters_by_thread_in_insertion_order(backend: Backend) -> None:
    async with backend.open() as saver:
        store = store_for(saver)
        for i, thread in enumerate(["t1", "t2", "t1", "t1", "t2"]):
            await store.insert("model", f"k{i}", {"i": i}, thread_id=thread)
        await store.insert("tool", "other", {}, thread_id="t1")
        assert [r.key for r in await store.list("model")] == ["k0", "k1", "k2", "k3", "k4"]
        assert [r.key for r in await store.list("model", thread_id="t1")] == ["k0", "k2", "k3"]
        assert await store.list("model", thread_id="nobody") == []


async def test_step_log_assigns_indexes_atomically(backend: Backend) -> None:
    async with backend.open() as saver:
        store = store_for(saver)
        indexes = await asyncio.gather(*(store.append_step("t", {"n": i}) for i in range(10)))
        assert sorted(indexes) == list(range(10))
        steps = await store.steps("t")
        assert len(steps) == 10
        # Each step sits at the index its append returned.
        assert [steps[idx]["n"] for idx in indexes] == list(range(10))
        assert await store.steps("other") == []


async def test_delete_thread_removes_records_and_steps(backend: Backend) -> None:
    async with backend.open() as saver:
        store = store_for(saver)
        await store.insert("model", "gone", {}, thread_id="t1")
        await store.insert("model", "kept", {}, thread_id="t2")
        await store.append_step("t1", {"x": 1})
        await store.append_step("t2", {"x": 2})
        await store.delete_thread("t1")
        assert await store.get("model", "gone") is None
        assert [r.key for r in await store.list("model")] == ["kept"]
        assert await store.list("model", thread_id="t1") == []
        assert await store.steps("t1") == []
        assert await store.steps("t2") == [{"x": 2}]
        # A deleted thread starts again from index 0.
        assert await store.append_step("t1", {"x": 3}) == 0


async def test_store_is_cached_per_saver(backend: Backend) -> None:
    async with backend.open() as saver:
        assert store_for(saver) is store_for(saver)


async def test_bad_input_is_refused_with_a_reason(backend: Backend) -> None:
    async with backend.open() as saver:
        store = store_for(saver)
        with pytest.raises(RecordStoreError, match="JSON-serializable"):
            await store.insert("model", "k", {"x": object()}, thread_id="t")
        with pytest.raises(RecordStoreError, match="must be dicts"):
            await store.upsert("model", "k", [1, 2], thread_id="t")  # type: ignore[arg-type]
        with pytest.raises(RecordStoreError, match="without ':'"):
            await store.insert("a:b", "k", {}, thread_id="t")
        # On Redis kind "a@b" would share the order key of kind "a" on thread "b".
        with pytest.raises(RecordStoreError, match="'@'"):
            await store.insert("model@t", "k", {}, thread_id="t")
        with pytest.raises(RecordStoreError, match="non-empty str"):
            await store.get("model", "")
        with pytest.raises(RecordStoreError, match="JSON-serializable"):
            await store.append_step("t", {"x": float("nan")})
        # Nothing was half-written by the refused calls.
        assert await store.get("model", "k") is None
        assert await store.steps("t") == []


async def test_sync_view_from_a_worker_thread(backend: Backend) -> None:
    async with backend.open() as saver:
        store = store_for(saver)
        out: dict[str, object] = {}

        def work() -> None:
            out["first"] = store.sync.insert("tool", "k", {"v": 1}, thread_id="t")
            out["second"] = store.sync.insert("tool", "k", {"v": 2}, thread_id="t")
            store.sync.upsert("tool", "k2", {"v": 3}, thread_id="t")
            out["index"] = store.sync.append_step("t", {"s": 1})
            out["got"] = store.sync.get("tool", "k")
            out["list"] = store.sync.list("tool", thread_id="t")
            out["steps"] = store.sync.steps("t")
            store.sync.delete_thread("t")
            out["after"] = store.sync.list("tool")

        # Run the sync calls in a worker thread while this loop stays free to serve them.
        await asyncio.to_thread(work)
        assert out["first"] is True
        assert out["second"] is False
        assert out["index"] == 0
        got = out["got"]
        assert isinstance(got, Record)
        assert got.value == {"v": 1}
        assert [r.key for r in out["list"]] == ["k", "k2"]  # type: ignore[attr-defined]
        assert out["steps"] == [{"s": 1}]
        assert out["after"] == []


async def test_sync_view_on_the_savers_own_loop_fails_clearly(durable_backend: Backend) -> None:
    async with durable_backend.open() as saver:
        with pytest.raises(asyncio.InvalidStateError, match=r"await RecordStore\.get"):
            store_for(saver).sync.get("model", "k")


async def test_put_with_step_writes_both_or_neither(backend: Backend) -> None:
    async with backend.open() as saver:
        store = store_for(saver)
        first = await store.put_with_step("model", "k", {"v": 1}, thread_id="t", step={"s": 1})
        again = await store.put_with_step("model", "k", {"v": 2}, thread_id="t", step={"s": 2})
        assert first == 0
        assert again is None  # the record existed: nothing written
        record = await store.get("model", "k")
        assert record is not None
        assert record.value == {"v": 1}
        replaced = await store.put_with_step(
            "model", "k", {"v": 3}, thread_id="t", step={"s": 3}, replace=True
        )
        assert replaced is not None
        record = await store.get("model", "k")
        assert record is not None
        assert record.value == {"v": 3}
        assert await store.steps("t") == [{"s": 1}, {"s": 3}]
        with pytest.raises(RecordStoreError, match="JSON-serializable"):
            await store.put_with_step("model", "bad", {"v": 1}, thread_id="t", step={"s": object()})
        assert await store.get("model", "bad") is None


async def test_concurrent_put_with_step_has_one_winner(backend: Backend) -> None:
    async with backend.open() as saver:
        store = store_for(saver)
        results = await asyncio.gather(
            *(
                store.put_with_step("tool", "same", {"by": i}, thread_id="t", step={"by": i})
                for i in range(8)
            )
        )
        winners = [r for r in results if r is not None]
        assert len(winners) == 1
        steps = await store.steps("t")
        assert len(steps) == 1
        record = await store.get("tool", "same")
        assert record is not None
        assert record.value == steps[0]


def test_every_async_operation_has_a_sync_twin() -> None:
    import inspect

    from tether.store import RecordStore, SyncRecordStore

    operations = {
        name
        for name, fn in inspect.getmembers(RecordStore, inspect.iscoroutinefunction)
        if not name.startswith("_")
    }
    twins = {name for name in dir(SyncRecordStore) if not name.startswith("_")}
    assert operations - twins == set()


def test_sync_indexed_steps_reads_the_log(backend: Backend) -> None:
    from tether import open_checkpointer_sync

    with open_checkpointer_sync(backend.url, **backend.options) as saver:
        store = store_for(saver)
        store.sync.append_step("t", {"n": 0})
        store.sync.append_step("t", {"n": 1})
        assert store.sync.indexed_steps("t") == [(0, {"n": 0}), (1, {"n": 1})]
