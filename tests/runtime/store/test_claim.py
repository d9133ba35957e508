"""Claiming runs: one running run per thread, FIFO, after_seconds, takeover, max attempts."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from datetime import timedelta

from tests.runtime.store import raw
from tests.runtime.store.actions import (
    GRAPH,
    LEASE,
    SHORT_LEASE,
    claim_one,
    create,
    kinds,
    take_over,
)
from tests.runtime.store.conftest import add_graph
from tether.runtime.store import NewRun, Outcome, RunStore, WorkerInfo

THREADS = 30
RUNS_PER_THREAD = 3


async def test_eight_concurrent_claimers_never_hold_two_runs_of_one_thread(
    store: RunStore, stores: list[RunStore]
) -> None:
    created: dict[str, list[str]] = defaultdict(list)
    for n in range(RUNS_PER_THREAD):
        for t in range(THREADS):
            run = await create(store, f"t{t}", input={"n": n})
            created[run.thread_id].append(run.run_id)
    total = THREADS * RUNS_PER_THREAD
    held: dict[str, str] = {}  # thread -> the run a claimer holds on it
    claimed: dict[str, list[str]] = defaultdict(list)
    overlaps: list[tuple[str, str, str]] = []
    done: set[str] = set()

    async def claimer(i: int, s: RunStore) -> None:
        while len(done) < total:
            claims = await s.claim(f"w{i}", graphs=[GRAPH], limit=2, lease=LEASE)
            for c in claims:
                if c.run.thread_id in held:
                    overlaps.append((c.run.thread_id, held[c.run.thread_id], c.run.run_id))
                held[c.run.thread_id] = c.run.run_id
                claimed[c.run.thread_id].append(c.run.run_id)
            await asyncio.sleep(0)  # let the other claimers run while these are held
            for c in claims:
                # Forget the hold before finishing: another claimer can only get
                # the thread after the finish commits.
                del held[c.run.thread_id]
                done.add(c.run.run_id)
                await s.finish(c.hold, Outcome("success", "idle"))
            if not claims:
                await asyncio.sleep(0.005)

    await asyncio.wait_for(
        asyncio.gather(*(claimer(i, s) for i, s in enumerate(stores))), timeout=120
    )
    assert overlaps == []
    assert dict(claimed) == dict(created)  # every run once, FIFO per thread
    runs = await store.list_runs(limit=total)
    assert {(r.status, r.fence, r.attempt) for r in runs} == {("success", 1, 1)}
    assert {t.status for t in await store.list_threads(limit=THREADS)} == {"idle"}


async def test_a_claim_writes_run_started_and_holds_the_thread(store: RunStore) -> None:
    run = await create(store)
    claim = await claim_one(store, "w1")
    assert claim.took_over_from is None
    assert (claim.run.run_id, claim.run.status, claim.run.worker_id) == (
        run.run_id,
        "running",
        "w1",
    )
    assert (claim.run.fence, claim.run.attempt) == (1, 1)
    assert claim.hold == (run.run_id, "t1", "w1", 1, "")  # no lease secret: not a scoped role
    thread = await store.get_thread("t1")
    assert (thread.status, thread.active_run_id) == ("busy", run.run_id)
    [started] = (await store.events(run.run_id))[1:]
    assert (started.seq, started.kind, started.fence, started.worker_id) == (
        2, "run.started", 1, "w1",
    )  # fmt: skip
    assert started.data == {"attempt": 1, "resumes": 0, "worker_id": "w1", "fence": 1}


async def test_runs_wait_for_after_seconds(store: RunStore) -> None:
    run = await create(store, after_seconds=0.5)
    assert abs((run.available_at - run.created_at) - timedelta(seconds=0.5)) < timedelta(
        milliseconds=1
    )
    assert await store.claim("w1", graphs=[GRAPH], limit=1, lease=LEASE) == []
    for _ in range(400):
        claims = await store.claim("w1", graphs=[GRAPH], limit=1, lease=LEASE)
        if claims:
            break
        await asyncio.sleep(0.01)
    [claim] = claims
    assert claim.run.started_at is not None
    assert claim.run.started_at >= run.available_at


async def test_only_the_workers_graphs_are_claimed(store: RunStore) -> None:
    await add_graph(store, "other")
    await store.create_run(NewRun("other", thread_id="t9", if_not_exists="create"))
    assert await store.claim("w1", graphs=[GRAPH], limit=5, lease=LEASE) == []
    [claim] = await store.claim("w1", graphs=["other", GRAPH], limit=5, lease=LEASE)
    assert claim.run.graph_id == "other"


async def test_a_live_lease_is_not_taken_over(store: RunStore) -> None:
    await create(store)
    await claim_one(store, "w1", lease=LEASE)
    await asyncio.sleep(2 * SHORT_LEASE)
    assert await store.claim_expired("w2", graphs=[GRAPH], limit=5, lease=LEASE) == []


async def test_a_heartbeat_extends_the_lease(store: RunStore) -> None:
    await create(store)
    claim = await claim_one(store, "w1", lease=SHORT_LEASE)
    [held] = await store.heartbeat("w1", lease=LEASE)
    assert (held.run_id, held.fence, held.cancel_action) == (claim.run.run_id, 1, None)
    await asyncio.sleep(4 * SHORT_LEASE)
    assert await store.claim_expired("w2", graphs=[GRAPH], limit=5, lease=LEASE) == []


async def test_an_expired_lease_is_taken_over_with_a_new_fence(store: RunStore) -> None:
    run = await create(store)
    first = await claim_one(store, "w1", lease=SHORT_LEASE)
    second = await take_over(store, "w2")
    assert second.took_over_from == "w1"
    assert (second.run.run_id, second.run.worker_id) == (run.run_id, "w2")
    assert (second.run.fence, second.run.attempt) == (first.run.fence + 1, 2)
    events = await store.events(run.run_id)
    assert [e.kind for e in events] == ["run.created", "run.started", "run.started"]
    assert events[-1].data == {
        "attempt": 2, "resumes": 0, "worker_id": "w2", "fence": 2, "took_over_from": "w1",
    }  # fmt: skip
    assert (events[-1].fence, events[-1].worker_id) == (2, "w2")
    assert (await store.get_thread("t1")).active_run_id == run.run_id
    assert await store.heartbeat("w1", lease=LEASE) == []
    assert [h.fence for h in await store.heartbeat("w2", lease=LEASE)] == [2]


async def test_a_run_past_max_attempts_ends_in_error(store: RunStore) -> None:
    run = await create(store, max_attempts=2)
    await claim_one(store, "w1", lease=SHORT_LEASE)
    await take_over(store, "w2", lease=SHORT_LEASE)
    for _ in range(200):
        assert await store.claim_expired("w3", graphs=[GRAPH], limit=1, lease=LEASE) == []
        failed = await store.get_run(run.run_id)
        if failed.status != "running":
            break
        await asyncio.sleep(SHORT_LEASE)
    assert failed.status == "error"
    assert failed.error == {
        "error": "RunAttemptsExceeded",
        "message": f"Run {run.run_id} exceeded max attempts (2): its worker stopped before "
        "finishing it on every attempt",
    }
    assert (failed.worker_id, failed.lease_expires_at, failed.ended_at is not None) == (
        None, None, True,
    )  # fmt: skip
    thread = await store.get_thread("t1")
    assert (thread.status, thread.active_run_id, thread.error) == ("error", None, failed.error)
    assert (await kinds(store, run.run_id))[-2:] == ["run.started", "run.finished"]
    assert (await store.events(run.run_id))[-1].data["status"] == "error"


async def test_release_hands_the_run_back_without_spending_an_attempt(store: RunStore) -> None:
    run = await create(store)
    claim = await claim_one(store, "w1")
    released = await store.release(claim.hold, reason="draining")
    assert (released.status, released.worker_id, released.attempt) == ("pending", None, 0)
    thread = await store.get_thread("t1")
    assert (thread.status, thread.active_run_id) == ("busy", None)
    assert (await store.events(run.run_id))[-1].data == {
        "reason": "draining", "retry": False, "attempt": 0,
    }  # fmt: skip
    again = await claim_one(store, "w2")
    assert (again.run.fence, again.run.attempt) == (2, 1)
    retried = await store.release(again.hold, reason="retriable", retry=True)
    assert retried.attempt == 1
    assert (await claim_one(store, "w3")).run.attempt == 2


async def test_a_worker_is_registered_refreshed_and_removed(
    store: RunStore, store_url: str
) -> None:
    sql = "SELECT worker_id, host, pid, graphs, concurrency, last_heartbeat FROM tether_workers"
    await store.register_worker(WorkerInfo("w1", "host-a", 123, ["g"], 4))
    [(worker, host, pid, graphs, concurrency, first)] = raw.rows(store_url, sql)
    assert (worker, host, pid, concurrency) == ("w1", "host-a", 123, 4)
    assert (json.loads(graphs) if isinstance(graphs, str) else graphs) == ["g"]
    await store.register_worker(WorkerInfo("w1", "host-a", 123, ["g", "h"], 8))
    await asyncio.sleep(0.01)  # let the clock move on
    await store.heartbeat("w1", lease=LEASE)
    [(_, _, _, graphs, concurrency, beat)] = raw.rows(store_url, sql)
    assert (json.loads(graphs) if isinstance(graphs, str) else graphs) == ["g", "h"]
    assert concurrency == 8
    assert beat > first
    await store.unregister_worker("w1")
    assert raw.rows(store_url, sql) == []
