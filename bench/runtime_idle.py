"""What suspended runs cost a worker: RSS and threads with none, 1, N/2 and N suspended.

One ``tether worker`` process (concurrency ``--concurrency``) on PostgreSQL.
It is warmed up first, so that what follows measures suspended runs and not
the worker reaching its working size:

* its thread pool is filled: the event loop's default pool starts threads on
  demand, up to ``min(32, CPUs + 4)``, and keeps them (LangGraph runs sync
  nodes there, and its ``AsyncPostgresSaver`` serializes every checkpoint
  there). Runs of ``hold`` block a pool thread each until released; once as
  many block as the cap (or the concurrency), the pool is full;
* 100 runs of ``ask`` (it interrupts at once) are suspended then resumed.

Then new ``ask`` runs are created (50 at a time) and left suspended.
``VmRSS`` and ``Threads`` are read from ``/proc/PID/status`` at each point; a
suspended run holds no task, lease or connection in the worker. The cold
figure (the worker before its first run) is shown for scale.

Usage: ``python bench/runtime_idle.py [--runs 1000] [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path

from _runtime import (
    Workers,
    batched,
    machine,
    open_runtime,
    postgres_databases,
    wait_all,
    worker_pool,
)

from tether.runtime import Runtime

WARM_UP = 100


async def _suspend(runtime: Runtime, prefix: str, numbers: range) -> list[str]:
    """Runs of ``ask`` on threads ``prefix-N``, once every one is suspended."""

    async def create(i: int) -> str:
        run = await runtime.create("ask", thread_id=f"{prefix}-{i}", input={"trace": []})
        return run.run_id

    run_ids = await batched(numbers, create)
    await wait_all(runtime, run_ids, "interrupted")
    return run_ids


async def _fill_thread_pool(runtime: Runtime, pool: Workers, concurrency: int) -> None:
    """Hold as many pool threads at once as the worker's pool can have, then release."""
    held = [
        (await runtime.create("hold", thread_id=f"hold-{i}", input={"trace": []})).run_id
        for i in range(concurrency)
    ]
    want = min(32, (os.cpu_count() or 1) + 4, concurrency)  # the worker is on this machine
    holding = pool.workdir / "holding"
    while True:  # until ``want`` runs block a pool thread each
        if holding.exists() and len(holding.read_text().splitlines()) >= want:
            break
        await asyncio.sleep(0.05)
    (pool.workdir / "release").touch()
    await wait_all(runtime, held, "success")


async def measure(runs: int, concurrency: int, workdir: Path) -> dict[str, dict[str, int]]:
    points: dict[str, dict[str, int]] = {}
    with postgres_databases(1) as (url,):
        async with open_runtime(url) as runtime:
            with worker_pool(url, workdir) as pool:
                pool.start(1, concurrency=concurrency)
                await asyncio.sleep(1)
                points["cold (no run yet)"] = pool.status(0)
                await _fill_thread_pool(runtime, pool, concurrency)
                warm = await _suspend(runtime, "warm", range(WARM_UP))

                async def resume(run_id: str) -> str:
                    return (await runtime.resume(run_id, {"resume": "yes"})).run_id

                await wait_all(runtime, await batched(warm, resume), "success")
                points["none suspended"] = pool.status(0)
                await _suspend(runtime, "idle", range(1))
                points["1 suspended"] = pool.status(0)
                await _suspend(runtime, "idle", range(1, runs // 2))
                points[f"{runs // 2} suspended"] = pool.status(0)
                await _suspend(runtime, "idle", range(runs // 2, runs))
                points[f"{runs} suspended"] = pool.status(0)
    return points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16, help="the worker's concurrency")
    parser.add_argument("--quick", action="store_true", help="100 runs: a smoke run")
    args = parser.parse_args()
    runs = 100 if args.quick else args.runs
    print(f"idle cost, PostgreSQL, worker concurrency {args.concurrency}; {machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        points = asyncio.run(measure(runs, args.concurrency, Path(tmp)))
    print(f"{'':<22}{'RSS':>12}{'threads':>9}")
    for label, status in points.items():
        print(f"{label:<22}{status['VmRSS'] / 1024:>9.1f} MB{status['Threads']:>9}")
    base, one, half, full = (
        points["none suspended"],
        points["1 suspended"],
        points[f"{runs // 2} suspended"],
        points[f"{runs} suspended"],
    )
    print(
        f"{runs} suspended vs none: RSS {full['VmRSS'] / base['VmRSS']:.3f}x "
        f"(+{(full['VmRSS'] - base['VmRSS']) / 1024:.1f} MB, goal <= 1.05x), "
        f"threads {full['Threads']} vs {base['Threads']}"
    )
    first = (half["VmRSS"] - one["VmRSS"]) / max(runs // 2 - 1, 1)
    second = (full["VmRSS"] - half["VmRSS"]) / max(runs - runs // 2, 1)
    print(
        f"RSS per further suspended run: {first:.1f} kB (1 to {runs // 2}), "
        f"{second:.1f} kB ({runs // 2} to {runs})"
    )


if __name__ == "__main__":
    main()
