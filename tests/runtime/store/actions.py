"""Small steps the run-store tests share: create, claim, expire, read back."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tether.boundaries import Fence
from tether.runtime.context import RunContext
from tether.runtime.models import Run
from tether.runtime.store import Claim, NewRun, RunStore

GRAPH = "g"
LEASE = 30.0
SHORT_LEASE = 0.05


async def create(store: RunStore, thread_id: str | None = "t1", **options: Any) -> Run:
    """A pending run of graph ``g`` (the thread is created if missing)."""
    options.setdefault("if_not_exists", "create")
    created = await store.create_run(NewRun(GRAPH, thread_id=thread_id, **options))
    return created.run


async def claim_one(store: RunStore, worker: str = "w1", *, lease: float = LEASE) -> Claim:
    """Claim exactly one run."""
    claims = await store.claim(worker, graphs=[GRAPH], limit=1, lease=lease)
    assert len(claims) == 1, claims
    return claims[0]


async def take_over(store: RunStore, worker: str = "w2", *, lease: float = LEASE) -> Claim:
    """Wait for a short lease to expire, then take the run over."""
    for _ in range(200):
        claims = await store.claim_expired(worker, graphs=[GRAPH], limit=1, lease=lease)
        if claims:
            return claims[0]
        await asyncio.sleep(SHORT_LEASE)
    raise AssertionError("no lease expired")


async def kinds(store: RunStore, run_id: str, tenant: str = "") -> list[str]:
    return [e.kind for e in await store.events(run_id, tenant=tenant)]


def held_guard(claim: Claim) -> RunContext:
    """The guard a worker lends its run; its verify always says "still yours".

    That is what a worker stopped between its verify and its write saw: only
    the checks inside the database can refuse it.
    """

    async def still_mine(fence: Fence) -> bool:
        return True

    run = claim.run
    return RunContext(
        fence=Fence(run.run_id, run.thread_id, run.fence, claim.secret),
        tenant=run.tenant_id,
        worker_id=claim.hold.worker_id,
        lease=3600.0,
        margin=0.0,
        confirmed_at=time.monotonic(),
        same_database=True,
        verifier=still_mine,
    )
