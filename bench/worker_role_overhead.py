"""What a run-scoped worker role costs on PostgreSQL (``tether workers grant``).

Two measurements on one fresh database, each against the same thing done as the
run store's own role (the tables' owner, which row-level security skips):

* **step**: one held run's checkpoint step, as a worker makes it: read the
  latest checkpoint, write a checkpoint, write pending writes, put a record
  with its step. ``--steps`` of them, alternating owner and worker role in
  blocks; the median microseconds per step of each and their ratio. Both send
  the same statements in the same round trips (the scope rides on the fence
  check and on the reads' pipeline); the difference is the policies' lease
  lookups on the server.
* **throughput**: runs/s of one ``tether worker`` process running
  ``three_node`` runs, connected as the owner, then as the worker role.
* **server**: the policies alone, without the network or the client: a
  server-side loop of ``--statements`` primary-key reads of a checkpoint row,
  as the owner and as the role in a named scope; microseconds per read.

Usage: ``python bench/worker_role_overhead.py [--steps 400] [--runs 200] [--statements 20000]
[--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from _runtime import batched, machine, open_runtime, postgres_databases, wait_all, worker_pool
from langgraph.checkpoint.base import empty_checkpoint

from tether import open_checkpointer
from tether.boundaries import Fence, guarding
from tether.checkpointing._fencing import run_scope
from tether.runtime.context import RunContext
from tether.runtime.ids import system_assistant_id
from tether.runtime.store import NewRun, open_run_store
from tether.runtime.worker_role import grant_worker_role
from tether.store import store_for


def role_url(admin_url: str, role: str) -> str:
    scheme, _, rest = admin_url.partition("://")
    return f"{scheme}://{role}@{rest.rpartition('@')[2]}"


async def _hold(url: str, thread_id: str, claimer: str | None = None) -> Fence:
    """Create one run of ``thread_id`` and claim it on ``claimer`` (default ``url``) as a
    worker would; its fence (with the lease secret when ``claimer`` is a worker role)."""
    async with open_run_store(url) as store:
        await store.put_assistant(
            "g",
            assistant_id=system_assistant_id("g"),
            metadata={"created_by": "system"},
            if_exists="do_nothing",
        )
        await store.create_run(NewRun("g", thread_id=thread_id, if_not_exists="create"))
    async with open_run_store(claimer or url) as store:
        claims = await store.claim(f"w-{thread_id}", graphs=["g"], limit=1, lease=3600)
        run = claims[0].run
        return Fence(run.run_id, run.thread_id, run.fence, claims[0].secret)


def _guard(fence: Fence) -> RunContext:
    async def still_mine(_: Fence) -> bool:
        return True

    return RunContext(
        fence=fence,
        tenant="",
        worker_id="bench",
        lease=3600.0,
        margin=0.0,
        confirmed_at=time.monotonic(),
        same_database=True,
        verifier=still_mine,
    )


async def step_micros(url: str, fence: Fence, steps: int) -> list[float]:
    """Microseconds of each of ``steps`` checkpoint steps of ``fence``'s run, opened on ``url``."""
    config: Any = {"configurable": {"thread_id": fence.thread_id, "checkpoint_ns": ""}}
    took = []
    async with open_checkpointer(url, encryption=False) as saver:
        records = store_for(saver)
        with guarding(_guard(fence)):
            for i in range(steps):
                started = time.perf_counter()
                await saver.aget_tuple(config)
                written = await saver.aput(
                    config, empty_checkpoint(), {"source": "loop", "step": i}, {}
                )
                await saver.aput_writes(written, [("x", i)], f"task-{i}")
                await records.put_with_step(
                    "bench",
                    f"{fence.thread_id}-{i}",
                    {"i": i},
                    thread_id=fence.thread_id,
                    step={"kind": "tool"},
                )
                took.append((time.perf_counter() - started) * 1e6)
    return took


async def steps_pair(admin: str, worker: str, steps: int) -> tuple[float, float]:
    owner_fence = await _hold(admin, "owner")
    role_fence = await _hold(admin, "role", worker)
    owner: list[float] = []
    role: list[float] = []
    block = max(10, steps // 8)
    for _ in range(0, steps, block):
        owner += await step_micros(admin, owner_fence, block)
        role += await step_micros(worker, role_fence, block)
    return statistics.median(owner), statistics.median(role)


async def runs_per_second(admin: str, worker: str, runs: int, workdir: Path) -> float:
    async with open_runtime(admin) as runtime:
        with worker_pool(worker, workdir) as pool:
            pool.start(1, concurrency=8)

            async def create(i: int) -> str:
                run = await runtime.create(
                    "three_node", thread_id=f"t-{uuid.uuid4().hex[:8]}-{i}", input={"trace": []}
                )
                return run.run_id

            started = time.time()
            done = await wait_all(runtime, await batched(range(runs), create), "success")
    ended = max(r.ended_at.timestamp() for r in done if r.ended_at is not None)
    return runs / (ended - started)


_LOOP = """DO $$ DECLARE t0 timestamptz := clock_timestamp(); BEGIN
    FOR i IN 1..{n} LOOP
        PERFORM 1 FROM checkpoints WHERE thread_id = '{thread}' AND checkpoint_ns = ''
              ORDER BY checkpoint_id DESC LIMIT 1;
    END LOOP;
    RAISE NOTICE '%', extract(epoch FROM clock_timestamp() - t0);
END $$"""


async def server_micros(url: str, fence: Fence, statements: int) -> float:
    """Microseconds per primary-key read of ``fence``'s thread, in a loop on the server."""
    import psycopg

    took: list[float] = []
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        conn.add_notice_handler(lambda notice: took.append(float(notice.message_primary or 0)))
        async with conn.transaction():
            await conn.execute(
                "SELECT set_config('tether.run_scope', %s, true)", (run_scope(fence),)
            )
            await conn.execute(_LOOP.format(n=statements, thread=fence.thread_id))
    return took[0] * 1e6 / statements


async def main(steps: int, runs: int, statements: int) -> None:
    print(machine())
    with postgres_databases(2) as (steps_db, runs_db):
        role = f"bench_{uuid.uuid4().hex[:8]}"
        await grant_worker_role(steps_db, role)
        await grant_worker_role(runs_db, role)
        owner, scoped = await steps_pair(steps_db, role_url(steps_db, role), steps)
        print(
            f"step (read + checkpoint + writes + record with step), median of {steps}: "
            f"owner {owner:.0f} us, worker role {scoped:.0f} us, ratio {scoped / owner:.2f}"
        )
        fence = await _hold(steps_db, "server")
        await step_micros(steps_db, fence, 1)
        role_fence = await _hold(steps_db, "server-role", role_url(steps_db, role))
        await step_micros(steps_db, role_fence, 1)
        owner_read = min([await server_micros(steps_db, fence, statements) for _ in range(3)])
        role_read = min(
            [
                await server_micros(role_url(steps_db, role), role_fence, statements)
                for _ in range(3)
            ]
        )
        print(
            f"server, {statements} checkpoint reads in a loop (best of 3): owner "
            f"{owner_read:.1f} us, worker role {role_read:.1f} us per read, "
            f"ratio {role_read / owner_read:.2f}"
        )
        with tempfile.TemporaryDirectory() as tmp:
            first = await runs_per_second(runs_db, runs_db, runs, Path(tmp))
            second = await runs_per_second(runs_db, role_url(runs_db, role), runs, Path(tmp))
        print(
            f"throughput, 1 worker x 8, {runs} three_node runs: owner {first:.1f} runs/s, "
            f"worker role {second:.1f} runs/s, ratio {second / first:.2f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--statements", type=int, default=20000)
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.runs, args.statements = 40, 30, 2000
    asyncio.run(main(args.steps, args.runs, args.statements))
