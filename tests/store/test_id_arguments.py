"""A bare string where the record store takes a collection of ids is refused on every backend.

``"abc"`` iterates as the runs ``a``, ``b`` and ``c``: deleting those would be
silent data loss, so each backend refuses it the same way, before anything is
deleted.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.backends import Backend
from tether.errors import TetherError
from tether.store import store_for


@pytest.mark.parametrize("bad", ["abc", b"abc"])
async def test_delete_runs_refuses_a_bare_string(backend: Backend, bad: object) -> None:
    async with backend.open() as saver:
        store = store_for(saver)
        for run in ("a", "b", "c", "abc"):
            await store.insert("model", run, {}, thread_id="t", run_id=run)
            await store.append_step("t", {"run": run}, run_id=run)

        with pytest.raises(TypeError, match=r"delete_runs\(\) argument run_ids") as caught:
            await store.delete_runs(bad)  # type: ignore[arg-type]

        assert isinstance(caught.value, TetherError)
        assert f"not a single string ({bad!r}); pass [{bad!r}]" in str(caught.value)
        assert [r.key for r in await store.list("model")] == ["a", "b", "c", "abc"]
        assert len(await store.steps("t")) == 4


async def test_sync_delete_runs_refuses_a_bare_string(backend: Backend) -> None:
    async with backend.open() as saver:
        store = store_for(saver)
        await store.insert("model", "a", {}, thread_id="t", run_id="a")
        with pytest.raises(TypeError, match=r"pass \['abc'\]"):
            await asyncio.to_thread(store.sync.delete_runs, "abc")  # type: ignore[arg-type]
        assert [r.key for r in await store.list("model")] == ["a"]


async def test_delete_runs_refuses_what_is_not_a_collection(backend: Backend) -> None:
    async with backend.open() as saver:
        store = store_for(saver)
        with pytest.raises(TypeError, match=r"run_ids .*not int"):
            await store.delete_runs(7)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"run_ids .*not NoneType"):
            await store.delete_runs(None)  # type: ignore[arg-type]


async def test_delete_runs_takes_any_collection_of_ids(backend: Backend) -> None:
    async with backend.open() as saver:
        store = store_for(saver)
        for run in ("a", "b", "c"):
            await store.insert("model", run, {}, thread_id="t", run_id=run)
        await store.delete_runs(("a",))
        await store.delete_runs({"b"})
        await store.delete_runs(run for run in ["nobody"])
        assert [r.key for r in await store.list("model")] == ["c"]
