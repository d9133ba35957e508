"""Approval to resume on PostgreSQL: a decision here, the resumed run's first event there.

``--resumes`` runs of the ``ask`` graph (it interrupts at once) are suspended,
then resumed one at a time from this process with :meth:`Runtime.resume`. The
latency of one resume runs from just before the call to the ``created_at`` of
the first event a worker writes for the resumed run (its ``run.started``,
written by the claim itself): both clocks are this machine's. Each run then
finishes before the next resume, so resumes never queue behind one another.

Two workers run side by side, each on its own database, and the resumes
alternate between them:

* **notify**: ``tether worker`` as shipped; the resume's ``NOTIFY`` wakes it;
* **poll**: the same worker without notifications (see ``_runtime.py``): it
  finds the resumed run at its next poll, every ``lease / 4`` seconds (0.5 s
  at the default 2 s lease). ``tether worker`` has no option for that.

Usage: ``python bench/runtime_resume.py [--resumes 100] [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from _runtime import (
    Workers,
    batched,
    machine,
    median,
    open_runtime,
    percentile,
    postgres_databases,
    wait_all,
    worker_pool,
)

from tether.runtime import Runtime

VARIANTS = ("notify", "poll")


async def _suspend(runtime: Runtime, count: int, variant: str) -> list[str]:
    async def create(i: int) -> str:
        run = await runtime.create("ask", thread_id=f"{variant}-{i}", input={"trace": []})
        return run.run_id

    run_ids = await batched(range(count), create)
    await wait_all(runtime, run_ids, "interrupted")
    return run_ids


async def _one_resume(runtime: Runtime, run_id: str) -> float:
    """Seconds from the resume call to the resumed run's first event from a worker."""
    after = (await runtime.get(run_id)).last_seq
    started = time.time()
    await runtime.resume(run_id, {"resume": "yes"})
    while True:
        for event in await runtime.events(run_id, after=after, wait=10):
            after = event.seq
            if event.worker_id is not None and event.created_at is not None:
                latency = event.created_at.timestamp() - started
                await wait_all(runtime, [run_id], "success")
                return latency


async def measure(resumes: int, workdir: Path) -> dict[str, list[float]]:
    with postgres_databases(2) as urls:
        async with open_runtime(urls[0]) as notified, open_runtime(urls[1]) as polled:
            runtimes = dict(zip(VARIANTS, (notified, polled), strict=True))
            with (
                worker_pool(urls[0], workdir / "notify") as notify_workers,
                worker_pool(urls[1], workdir / "poll") as poll_workers,
            ):
                pools: dict[str, Workers] = {"notify": notify_workers, "poll": poll_workers}
                for variant, pool in pools.items():
                    pool.workdir.mkdir()
                    pool.start(1, notify=variant == "notify")
                suspended = {v: await _suspend(runtimes[v], resumes + 2, v) for v in VARIANTS}
                # The first two resumes of each warm the worker up (imports, connections).
                latencies: dict[str, list[float]] = {v: [] for v in VARIANTS}
                for i in range(resumes + 2):
                    for variant in VARIANTS if i % 2 else reversed(VARIANTS):
                        took = await _one_resume(runtimes[variant], suspended[variant][i])
                        if i >= 2:
                            latencies[variant].append(took)
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resumes", type=int, default=100, help="measured resumes per worker")
    parser.add_argument("--quick", action="store_true", help="10 resumes: a smoke run")
    args = parser.parse_args()
    resumes = 10 if args.quick else args.resumes
    print(f"resume latency, PostgreSQL, {resumes} resumes per worker; {machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        latencies = asyncio.run(measure(resumes, Path(tmp)))
    print(f"{'':<34}{'p50':>10}{'p99':>10}{'max':>10}")
    labels = {"notify": "tether worker (NOTIFY)", "poll": "polling worker (every 0.5 s)"}
    for variant in VARIANTS:
        ms = [s * 1000 for s in latencies[variant]]
        print(
            f"{labels[variant]:<34}{median(ms):>7.1f} ms{percentile(ms, 99):>7.1f} ms"
            f"{max(ms):>7.1f} ms"
        )
    notify_p50 = median(latencies["notify"])
    ratio = median(latencies["poll"]) / notify_p50
    print(
        f"notify p50 {notify_p50 * 1000:.1f} ms (goal <= 25 ms); "
        f"polling p50 / notify p50: {ratio:.1f}x"
    )


if __name__ == "__main__":
    main()
