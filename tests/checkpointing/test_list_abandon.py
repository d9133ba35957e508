"""Stopping a ``list`` / ``alist`` early leaves the saver usable, on every backend.

LangGraph itself stops early: its replay code returns from inside
``for saved in checkpointer.list(..., limit=1)``. A listing that kept a lock or
a pooled connection while suspended made every later call wait forever (SQLite
sync: a lock never released), so each follow-up call here runs under a short
deadline and a hang fails fast. PostgreSQL is opened with one pooled
connection, so a listing that keeps its connection shows the same way.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from tests.backends import Backend
from tests.checkpointing.encryption_helpers import ring
from tether import open_checkpointer_sync

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
