"""The store used from a different event loop or a sync-opened checkpointer."""

from __future__ import annotations

import asyncio

from tests.backends import Backend
from tether import open_checkpointer_sync
from tether.store import store_for


def test_sync_opened_saver_serves_async_and_sync_callers(backend: Backend) -> None:
    with open_checkpointer_sync(backend.url, **backend.options) as saver:
        store = store_for(saver)
        assert store.sync.insert("model", "k", {"v": 1}, thread_id="t") is True

        async def from_another_loop() -> list[int]:
            # This loop is not the saver's: calls hop onto the saver's loop.
            first = await store.insert("model", "k", {"v": 2}, thread_id="t")
            assert first is False
            return [await store.append_step("t", {"i": i}) for i in range(3)]

        assert asyncio.run(from_another_loop()) == [0, 1, 2]
        assert store.sync.steps("t") == [{"i": 0}, {"i": 1}, {"i": 2}]
