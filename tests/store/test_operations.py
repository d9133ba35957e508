"""Record-store operations as values: ``perform`` runs them as the methods do, sync or async."""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.backends import Backend
from tether import _flows
from tether.store import operations as ops
from tether.store import store_for


async def test_perform_does_what_the_method_does(backend: Backend) -> None:
    async with backend.open() as saver:
        store = store_for(saver)
        assert await store.perform(ops.Insert("tool", "k", {"v": 1}, "t")) is True
        assert await store.perform(ops.Insert("tool", "k", {"v": 2}, "t")) is False
        await store.perform(ops.Upsert("tool", "k2", {"v": 3}, "t"))
        index = await store.perform(ops.PutWithStep("tool", "k3", {"v": 4}, "t", {"s": 1}))
        assert index == 0
        assert await store.perform(ops.AppendStep("t", {"s": 2})) == 1
        record = await store.perform(ops.Get("tool", "k"))
        assert record == await store.get("tool", "k")
        assert record.value == {"v": 1}
        listed = await store.perform(ops.List("tool", "t"))
        assert [r.key for r in listed] == ["k", "k2", "k3"]
        assert await store.perform(ops.Steps("t")) == [{"s": 1}, {"s": 2}]
        assert await store.perform(ops.IndexedSteps("t")) == [(0, {"s": 1}), (1, {"s": 2})]
        assert await store.perform(ops.KeyedHash()) is None  # no encryption
        await store.perform(ops.DeleteThread("t"))
        assert await store.list("tool") == []


async def test_the_sync_twin_performs_the_same_operations(backend: Backend) -> None:
    async with backend.open() as saver:
        store = store_for(saver)

        def work() -> list[Any]:
            return [
                store.sync.perform(ops.Insert("tool", "k", {"v": 1}, "t")),
                store.sync.perform(ops.Insert("tool", "k", {"v": 2}, "t")),
                store.sync.perform(ops.Get("tool", "k")).value,
                store.sync.perform(ops.AppendStep("t", {"s": 1})),
                store.sync.perform(ops.Steps("t")),
            ]

        # From a worker thread, while this loop stays free to serve the backend.
        assert await asyncio.to_thread(work) == [True, False, {"v": 1}, 0, [{"s": 1}]]


@dataclass(frozen=True)
class LooksLikeUpsert:
    """Has every field of ``Upsert`` but is not one."""

    kind: str
    key: str
    value: dict[str, Any]
    thread_id: str
    run_id: str | None = None


async def test_an_object_that_is_not_an_operation_is_refused_not_guessed(
    backend: Backend,
) -> None:
    fake: Any = LooksLikeUpsert("tool", "k", {"v": 1}, "t")
    async with backend.open() as saver:
        store = store_for(saver)
        with pytest.raises(TypeError, match=r"LooksLikeUpsert.*is not an operation of the record"):
            await store.perform(fake)
        with pytest.raises(TypeError, match=r"LooksLikeUpsert.*is not an operation of the record"):
            await asyncio.to_thread(store.sync.perform, fake)
        assert await store.get("tool", "k") is None  # nothing was written


def test_an_error_is_thrown_into_the_flow_where_it_asked() -> None:
    asked: list[str] = []

    def flow() -> Generator[str, Any, str]:
        try:
            yield "fails"
        except ValueError as exc:
            asked.append(f"caught {exc}")
        answer = yield "works"
        return f"answer: {answer}"

    def perform(op: str) -> str:
        asked.append(op)
        if op == "fails":
            raise ValueError("no")
        return "yes"

    async def aperform(op: str) -> str:
        return perform(op)

    assert _flows.run_sync(flow(), perform) == "answer: yes"
    assert asyncio.run(_flows.run(flow(), aperform)) == "answer: yes"
    assert asked == ["fails", "caught no", "works"] * 2


def test_an_error_the_flow_does_not_catch_comes_out_of_the_interpreter() -> None:
    def flow() -> Generator[str, Any, None]:
        yield "fails"

    def perform(op: str) -> None:
        raise LookupError(op)

    with pytest.raises(LookupError, match="fails"):
        _flows.run_sync(flow(), perform)


async def test_a_sync_call_on_the_backends_own_loop_names_what_to_await(
    durable_backend: Backend,
) -> None:
    async with durable_backend.open() as saver:
        store = store_for(saver)
        with pytest.raises(asyncio.InvalidStateError, match=r"await RecordStore\.call\(\)"):
            store.sync.call(store.get("model", "k"))
        with pytest.raises(asyncio.InvalidStateError, match=r"await RecordStore\.insert\(\)"):
            store.sync.perform(ops.Insert("model", "k", {}, "t"))
        assert await store.get("model", "k") is None
