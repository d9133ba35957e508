"""What suspended runs cost a worker: RSS and threads with none, 1 and 1,000 suspended.

One ``tether worker`` process (concurrency ``--concurrency``) on PostgreSQL.
It is first warmed up at full concurrency with runs of ``ask`` (they interrupt
at once), suspended then resumed to the end: its connection pools and the
threads it starts on demand grow to their working size then, whatever the runs.
Then new ``ask`` runs are created and left suspended.
``VmRSS`` and ``Threads`` are read from ``/proc/PID/status`` at each point; a
suspended run holds no task, lease or connection in the worker, so the figures
should stay flat. The cold figure (the worker before its first run) is shown
for scale.

Usage: ``python bench/runtime_idle.py [--runs 1000] [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from _runtime import batched, machine, open_runtime, postgres_databases, wait_all, worker_pool

from tether.runtime import Runtime


async def _suspend(runtime: Runtime, prefix: str, numbers: range) -> list[str]:
    """Runs of ``ask`` on threads ``prefix-N``, once every one is suspended."""

    async def create(i: int) -> str:
        run = await runtime.create("ask", thread_id=f"{prefix}-{i}", input={"trace": []})
        return run.run_id

    run_ids = await batched(numbers, create)
    await wait_all(runtime, run_ids, "interrupted")
    return run_ids


async def measure(runs: int, concurrency: int, workdir: Path) -> dict[str, dict[str, int]]:
    points: dict[str, dict[str, int]] = {}
    with postgres_databases(1) as (url,):
        async with open_runtime(url) as runtime:
            with worker_pool(url, workdir) as pool:
                pool.start(1, concurrency=concurrency)
                await asyncio.sleep(1)
                points["cold (no run yet)"] = pool.status(0)

                warm = await _suspend(runtime, "warm", range(4 * concurrency))

                async def resume(run_id: str) -> str:
                    return (await runtime.resume(run_id, {"resume": "yes"})).run_id

                await wait_all(runtime, await batched(warm, resume), "success")
                points["none suspended"] = pool.status(0)
                await _suspend(runtime, "idle", range(1))
                points["1 suspended"] = pool.status(0)
                await _suspend(runtime, "idle", range(1, runs))
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
    base, one, full = (
        points["none suspended"],
        points["1 suspended"],
        points[f"{runs} suspended"],
    )
    print(
        f"{runs} suspended vs none: RSS {full['VmRSS'] / base['VmRSS']:.3f}x "
        f"(+{(full['VmRSS'] - base['VmRSS']) / 1024:.1f} MB, goal <= 1.05x), "
        f"threads {full['Threads']} vs {base['Threads']}; "
        f"vs 1 suspended: RSS {full['VmRSS'] / one['VmRSS']:.3f}x, "
        f"{(full['VmRSS'] - one['VmRSS']) / max(runs - 1, 1):.1f} kB per further run"
    )


if __name__ == "__main__":
    main()
