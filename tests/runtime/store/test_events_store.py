"""A run's event stream: gap-free increasing seqs under concurrent writers, paged reads."""

from __future__ import annotations

import asyncio

import pytest

from tests.runtime.store.actions import claim_one, create
from tether.runtime.errors import FenceLostError, InvalidRunRequestError
from tether.runtime.store import NewEvent, Outcome, RunStore


async def test_seqs_stay_gap_free_with_concurrent_writers(
    store: RunStore, stores: list[RunStore]
) -> None:
    await create(store)
    claim = await claim_one(store)
    run_id = claim.run.run_id

    async def worker() -> None:
        for b in range(15):
            batch = [NewEvent("node.started", {"w": "worker", "i": b * 3 + k}) for k in range(3)]
            await store.append_events(claim.hold, batch)

    async def control(i: int, s: RunStore) -> None:
        for k in range(8):
            await s.add_events(run_id, [NewEvent("approval.decided", {"w": i, "i": k})])

    await asyncio.gather(worker(), *(control(i, s) for i, s in enumerate(stores)))
    events = await store.events(run_id, limit=10_000)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    written = [(e.data["w"], e.data["i"]) for e in events[2:]]
    expected = [("worker", i) for i in range(45)] + [(i, k) for i in range(8) for k in range(8)]
    assert sorted(written, key=str) == sorted(expected, key=str)
    # Each writer's own events keep their order.
    assert [i for w, i in written if w == "worker"] == list(range(45))
    assert (await store.get_run(run_id)).last_seq == len(events)
    fences = {(e.kind, e.fence, e.worker_id) for e in events[2:]}
    assert fences == {("node.started", 1, "w1"), ("approval.decided", None, None)}


async def test_after_pages_through_every_event_once(store: RunStore) -> None:
    await create(store)
    claim = await claim_one(store)
    for n in range(5):
        await store.append_events(
            claim.hold, [NewEvent("values", {"n": n}, ns="sub|1"), NewEvent("custom", n)]
        )
    everything = await store.events(claim.run.run_id)
    assert len(everything) == 12
    pages, after = [], 0
    while page := await store.events(claim.run.run_id, after=after, limit=5):
        pages.append(page)
        after = page[-1].seq
    assert [len(p) for p in pages] == [5, 5, 2]
    assert [e for p in pages for e in p] == everything
    assert await store.events(claim.run.run_id, after=12) == []
    values = await store.events(claim.run.run_id, kinds=["values"], after=3)
    assert [(e.seq, e.ns, e.data) for e in values] == [
        (5, "sub|1", {"n": 1}), (7, "sub|1", {"n": 2}), (9, "sub|1", {"n": 3}),
        (11, "sub|1", {"n": 4}),
    ]  # fmt: skip


async def test_an_event_that_is_not_json_writes_nothing(store: RunStore) -> None:
    await create(store)
    claim = await claim_one(store)
    before = await store.events(claim.run.run_id)
    with pytest.raises(TypeError, match=r"a builtins\.object cannot be stored as JSON"):
        await store.append_events(claim.hold, [NewEvent("ok", 1), NewEvent("bad", object())])
    assert await store.events(claim.run.run_id) == before
    assert await store.append_events(claim.hold, [NewEvent("ok", 1)]) == len(before) + 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"after": -1}, "after must be an integer >= 0, got -1"),
        ({"limit": 0}, "limit must be an integer >= 1, got 0"),
    ],
)
async def test_bad_paging_is_refused(
    store: RunStore, options: dict[str, int], message: str
) -> None:
    run = await create(store)
    with pytest.raises(InvalidRunRequestError, match=message):
        await store.events(run.run_id, **options)


async def test_finish_writes_the_last_events_then_run_finished_in_its_transaction(
    store: RunStore,
) -> None:
    await create(store)
    claim = await claim_one(store)
    run_id = claim.run.run_id
    await store.append_events(claim.hold, [NewEvent("values", {"i": 0})])
    last = [NewEvent("values", {"i": 1}), NewEvent("updates", {"i": 2}, "child:1")]
    done = await store.finish(claim.hold, Outcome("success", "idle"), last)
    events = await store.events(run_id, limit=100)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [(e.kind, e.data, e.ns) for e in events[-4:-1]] == [
        ("values", {"i": 0}, ""),
        ("values", {"i": 1}, ""),
        ("updates", {"i": 2}, "child:1"),
    ]
    assert events[-1].kind == "run.finished"
    assert {e.fence for e in events[-4:]} == {claim.hold.fence}
    assert done.last_seq == len(events)
    assert done.status == "success"


async def test_a_finish_refused_for_a_lost_fence_writes_none_of_its_events(
    store: RunStore,
) -> None:
    await create(store)
    claim = await claim_one(store)
    run_id = claim.run.run_id
    stale = claim.hold._replace(fence=claim.hold.fence + 1)
    with pytest.raises(FenceLostError):
        await store.finish(stale, Outcome("success", "idle"), [NewEvent("values", {"i": 1})])
    events = await store.events(run_id, limit=100)
    assert all(e.kind not in {"values", "run.finished"} for e in events)
    assert (await store.get_run(run_id)).status == "running"
