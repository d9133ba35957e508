"""Stopping a ``list`` / ``alist`` early leaves the saver usable, on every backend.

LangGraph itself stops early: its replay code returns from inside
``for saved in checkpointer.list(..., limit=1)``. A listing that kept a lock or
a pooled connection while suspended made every later call wait forever (SQLite
sync: a lock never released), so each follow-up call here runs under a short
deadline and a hang fails fast. PostgreSQL is opened with one pooled
connection, so a listing that keeps its connection shows the same way.

The last tests check that every layer closes the listing beneath it at once
(not whenever the garbage collector gets to it), through a probe layer that
counts the listings still open under it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import aclosing, contextmanager
from typing import Any, TypeVar

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from tests.backends import Backend
from tests.checkpointing.encryption_helpers import ring
from tether import open_checkpointer_sync
from tether.checkpointing._delegating import DelegatingSaver
from tether.checkpointing._encrypted import EncryptedSaver
from tether.checkpointing.encryption import PlaintextRefusedError
from tether.crashtest._saver import CrashPointSaver

# A backstop; the deadlines below fail a hang much sooner.
pytestmark = pytest.mark.timeout(120)

T = TypeVar("T")
DEADLINE = 10.0
THREAD: RunnableConfig = {"configurable": {"thread_id": "abandon"}}


@pytest.fixture(params=[False, True], ids=["plain", "enc"])
def encrypted(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def _options(backend: Backend, encrypted: bool) -> dict[str, Any]:
    options: dict[str, Any] = {**backend.options, "encryption": ring("k1") if encrypted else False}
    if backend.name == "postgres":
        options["max_size"] = 1  # a listing that keeps its connection blocks the next call
    return options


def _within(call: Callable[[], T], what: str) -> T:
    """``call()`` in a thread; fail if it has not returned within the deadline."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(("ok", call()))
        except BaseException as exc:
            outcome.append(("error", exc))

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(DEADLINE)
    assert outcome, f"{what} hung for {DEADLINE:g}s after a listing was abandoned"
    kind, value = outcome[0]
    if kind == "error":
        raise value
    return value  # type: ignore[no-any-return]


async def _awithin(awaitable: Any, what: str) -> Any:
    try:
        return await asyncio.wait_for(awaitable, DEADLINE)
    except TimeoutError:
        pytest.fail(f"{what} hung for {DEADLINE:g}s after a listing was abandoned")


def _step(i: int, version: Any) -> tuple[Any, Any]:
    checkpoint = empty_checkpoint()
    checkpoint["id"] = str(uuid6(clock_seq=i))
    checkpoint["channel_values"] = {"notes": [f"step {i}"]}
    checkpoint["channel_versions"] = {"notes": version}
    return checkpoint, {"source": "loop", "step": i, "parents": {}}


def _fill(saver: BaseCheckpointSaver[Any], count: int = 3) -> RunnableConfig:
    config: RunnableConfig = {"configurable": {"thread_id": "abandon", "checkpoint_ns": ""}}
    version = None
    for i in range(count):
        version = saver.get_next_version(version, None)
        checkpoint, metadata = _step(i, version)
        config = saver.put(config, checkpoint, metadata, {"notes": version})  # type: ignore[arg-type]
    saver.put_writes(config, [("notes", ["pending"])], "task-1")
    return config


async def _afill(saver: BaseCheckpointSaver[Any], count: int = 3) -> RunnableConfig:
    config: RunnableConfig = {"configurable": {"thread_id": "abandon", "checkpoint_ns": ""}}
    version = None
    for i in range(count):
        version = saver.get_next_version(version, None)
        checkpoint, metadata = _step(i, version)
        config = await saver.aput(config, checkpoint, metadata, {"notes": version})  # type: ignore[arg-type]
    await saver.aput_writes(config, [("notes", ["pending"])], "task-1")
    return config


@contextmanager
def _sync_saver(backend: Backend, encrypted: bool) -> Iterator[BaseCheckpointSaver[Any]]:
    with open_checkpointer_sync(backend.url, **_options(backend, encrypted)) as saver:
        yield saver


def _saver_still_works(saver: BaseCheckpointSaver[Any], latest: RunnableConfig) -> None:
    found = _within(lambda: saver.get_tuple(THREAD), "get_tuple")
    assert found is not None
    assert found.config["configurable"]["checkpoint_id"] == latest["configurable"]["checkpoint_id"]
    assert found.pending_writes == [("task-1", "notes", ["pending"])]
    _within(lambda: _fill(saver, 1), "put")
    assert len(_within(lambda: list(saver.list(THREAD)), "list")) == 4


def test_sync_list_left_after_one_item(backend: Backend, encrypted: bool) -> None:
    with _sync_saver(backend, encrypted) as saver:
        latest = _fill(saver)
        listing = saver.list(THREAD)
        assert next(listing).config == latest  # newest first
        _saver_still_works(saver, latest)  # while the listing is still referenced
        del listing
        assert _within(lambda: saver.get_tuple(THREAD), "get_tuple") is not None


def test_sync_list_returned_from_inside_the_loop(backend: Backend, encrypted: bool) -> None:
    """LangGraph's replay: ``for saved in checkpointer.list(..., limit=1): return saved``."""

    def first_before(saver: BaseCheckpointSaver[Any], before: RunnableConfig) -> CheckpointTuple:
        for saved in saver.list(THREAD, before=before, limit=1):
            return saved
        raise AssertionError("nothing listed")

    with _sync_saver(backend, encrypted) as saver:
        latest = _fill(saver)
        assert first_before(saver, latest).config != latest
        next(iter(saver.list(THREAD)))  # abandoned, unreferenced at once
        _saver_still_works(saver, latest)


async def _asaver_still_works(saver: BaseCheckpointSaver[Any], latest: RunnableConfig) -> None:
    found = await _awithin(saver.aget_tuple(THREAD), "aget_tuple")
    assert found is not None
    assert found.config["configurable"]["checkpoint_id"] == latest["configurable"]["checkpoint_id"]
    await _awithin(_afill(saver, 1), "aput")

    async def listed() -> list[CheckpointTuple]:
        return [t async for t in saver.alist(THREAD)]

    assert len(await _awithin(listed(), "alist")) == 4


async def test_async_alist_left_after_one_item(backend: Backend, encrypted: bool) -> None:
    async with backend.open(**_options(backend, encrypted)) as saver:
        latest = await _afill(saver)
        listing = saver.alist(THREAD)
        assert (await anext(listing)).config == latest
        await _asaver_still_works(saver, latest)  # while the listing is still referenced
        await listing.aclose()


async def test_async_alist_returned_from_inside_the_loop(backend: Backend, encrypted: bool) -> None:
    async def first_before(saver: BaseCheckpointSaver[Any], before: RunnableConfig) -> Any:
        async for saved in saver.alist(THREAD, before=before, limit=1):
            return saved
        raise AssertionError("nothing listed")

    async with backend.open(**_options(backend, encrypted)) as saver:
        latest = await _afill(saver)
        assert (await first_before(saver, latest)).config != latest
        await _asaver_still_works(saver, latest)


def test_sync_list_lets_the_caller_write_between_items(backend: Backend, encrypted: bool) -> None:
    with _sync_saver(backend, encrypted) as saver:
        latest = _fill(saver)
        listing = saver.list(None)  # every thread
        assert next(listing).config == latest
        other: RunnableConfig = {"configurable": {"thread_id": "other", "checkpoint_ns": ""}}
        checkpoint, metadata = _step(9, saver.get_next_version(None, None))
        _within(lambda: saver.put(other, checkpoint, metadata, {}), "put")  # type: ignore[arg-type]
        assert [t.metadata["step"] for t in _within(lambda: [*listing], "the rest")] == [1, 0]


async def test_async_alist_lets_the_caller_write_between_items(
    backend: Backend, encrypted: bool
) -> None:
    """A listing is a snapshot: writing while it is open neither blocks nor breaks it."""
    async with backend.open(**_options(backend, encrypted)) as saver:
        latest = await _afill(saver)
        listing = saver.alist(None)  # every thread
        assert (await anext(listing)).config == latest
        other: RunnableConfig = {"configurable": {"thread_id": "other", "checkpoint_ns": ""}}
        checkpoint, metadata = _step(9, saver.get_next_version(None, None))
        await _awithin(saver.aput(other, checkpoint, metadata, {}), "aput")  # type: ignore[arg-type]
        rest = await _awithin(read_rest(listing), "the rest of the listing")
        assert [t.metadata["step"] for t in rest] == [1, 0]


async def read_rest(listing: AsyncIterator[CheckpointTuple]) -> list[CheckpointTuple]:
    return [t async for t in listing]


# -- every layer closes the listing beneath it, at once ------------------------------


class ListingProbe(DelegatingSaver):
    """Counts the listings of the saver beneath it that have not been closed yet."""

    def __init__(self, inner: BaseCheckpointSaver[Any]) -> None:
        super().__init__(inner)
        self.open_listings = 0

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        self.open_listings += 1
        try:
            listing = self.inner.alist(config, filter=filter, before=before, limit=limit)
            async with aclosing(listing) as items:
                async for item in items:
                    yield item
        finally:
            self.open_listings -= 1


async def test_encrypted_alist_with_a_limit_closes_the_backend_listing(backend: Backend) -> None:
    async with backend.open(encryption=False) as raw:
        probe = ListingProbe(raw)
        saver = EncryptedSaver(probe, ring("k1"))
        await _afill(saver)
        assert len([t async for t in saver.alist(THREAD, limit=1)]) == 1
        assert probe.open_listings == 0  # closed before alist returned, not later by the GC


async def test_delegating_alist_closed_early_closes_the_inner_listing(
    backend: Backend, encrypted: bool
) -> None:
    async with backend.open(**_options(backend, encrypted)) as inner:
        probe = ListingProbe(inner)
        saver = CrashPointSaver(probe)
        await _afill(saver)
        listing = saver.alist(THREAD)
        await anext(listing)
        await listing.aclose()
        assert probe.open_listings == 0


async def test_failed_encrypted_alist_closes_the_backend_listing(backend: Backend) -> None:
    async with backend.open(encryption=False) as raw:
        await _afill(raw)  # rows in clear, which an encrypting saver refuses
        probe = ListingProbe(raw)
        saver = EncryptedSaver(probe, ring("k1"))
        with pytest.raises(PlaintextRefusedError):
            [t async for t in saver.alist(THREAD)]
        assert probe.open_listings == 0


def test_failed_sync_list_closes_the_backend_listing(backend: Backend) -> None:
    with open_checkpointer_sync(backend.url, **backend.options, encryption=False) as raw:
        _fill(raw)
        probe = ListingProbe(raw)
        saver = EncryptedSaver(probe, ring("k1"))
        with pytest.raises(PlaintextRefusedError):
            list(saver.list(THREAD))
        assert probe.open_listings == 0
