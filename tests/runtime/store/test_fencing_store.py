"""A worker whose fence moved on writes nothing: finish, release and events are refused."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.runtime.store.actions import LEASE, SHORT_LEASE, claim_one, create, take_over
from tether.runtime.errors import FenceLostError
from tether.runtime.store import Hold, NewEvent, Outcome, RunStore

Write = Callable[[RunStore, Hold], Awaitable[Any]]
WRITES: dict[str, Write] = {
    "finish": lambda s, h: s.finish(h, Outcome("success", "idle", values={"stale": True})),
    "finish_interrupted": lambda s, h: s.finish(h, Outcome("interrupted", "interrupted")),
    "release": lambda s, h: s.release(h, reason="stale"),
    "append_events": lambda s, h: s.append_events(h, [NewEvent("node.started", {"n": 1})]),
}


async def _snapshot(store: RunStore, run_id: str) -> tuple[Any, ...]:
    run = await store.get_run(run_id)
    return run, await store.get_thread(run.thread_id), await store.events(run_id)


@pytest.mark.parametrize("write", sorted(WRITES))
async def test_the_old_holder_is_refused_after_a_takeover(store: RunStore, write: str) -> None:
    run = await create(store)
    old = await claim_one(store, "w1", lease=SHORT_LEASE)
    new = await take_over(store, "w2")
    before = await _snapshot(store, run.run_id)
    with pytest.raises(FenceLostError) as caught:
        await WRITES[write](store, old.hold)
    assert (caught.value.run_id, caught.value.fence) == (run.run_id, old.run.fence)
    assert f"run {run.run_id} no longer holds fence {old.run.fence}" in str(caught.value)
    assert await _snapshot(store, run.run_id) == before
    # The new holder is unaffected.
    await WRITES[write](store, new.hold)


async def test_verify_and_heartbeat_follow_the_fence(store: RunStore) -> None:
    run = await create(store)
    old = await claim_one(store, "w1", lease=SHORT_LEASE)
    assert await store.verify(run.run_id, old.run.fence)
    new = await take_over(store, "w2")
    assert not await store.verify(run.run_id, old.run.fence)
    assert await store.verify(run.run_id, new.run.fence)
    assert await store.heartbeat("w1", lease=LEASE) == []
    await store.finish(new.hold, Outcome("success", "idle"))
    assert not await store.verify(run.run_id, new.run.fence)


@pytest.mark.parametrize("write", sorted(WRITES))
async def test_a_finished_or_released_run_refuses_its_holder(store: RunStore, write: str) -> None:
    await create(store)
    claim = await claim_one(store)
    await store.finish(claim.hold, Outcome("success", "idle", values={"done": 1}))
    before = await _snapshot(store, claim.run.run_id)
    with pytest.raises(FenceLostError):
        await WRITES[write](store, claim.hold)
    assert await _snapshot(store, claim.run.run_id) == before


async def test_a_released_run_refuses_the_hold_it_was_released_from(store: RunStore) -> None:
    await create(store)
    claim = await claim_one(store)
    await store.release(claim.hold)
    before = await _snapshot(store, claim.run.run_id)
    for write in WRITES.values():
        with pytest.raises(FenceLostError):
            await write(store, claim.hold)
    assert await _snapshot(store, claim.run.run_id) == before


async def test_a_deleted_run_refuses_its_holder(store: RunStore) -> None:
    await create(store)
    claim = await claim_one(store)
    await store.delete_thread("t1")
    for write in WRITES.values():
        with pytest.raises(FenceLostError):
            await write(store, claim.hold)
    assert await store.list_runs() == []
