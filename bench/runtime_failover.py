"""Failover on PostgreSQL: kill -9 of the worker holding a run, to the run's next event.

Each repetition starts a run of ``pay_then_wait``: its one node charges (a
durable tool; the outside world is a payment provider in ``effects.db`` that
honours idempotency keys) and then waits in the same node for a release
marker. ``--kill-delay`` seconds after the charge reached the provider, the
worker holding the run is killed with SIGKILL. Another worker takes the run
over when the lease expires; the time measured runs from just before the kill
to the ``created_at`` of the first event another worker writes for the run
(its ``run.started``). The run is then released and must finish having paid
exactly once: the successor executes the node again and replays the recorded
charge (or, if the kill came before the charge was recorded, sends it again
with the same idempotency key, which the provider answers without paying).

Two workers run at a time (lease ``--lease`` seconds, the ``tether worker``
default 2 s); the killed one is replaced before the next repetition.

Usage: ``python bench/runtime_failover.py [--repeat 5] [--lease 2] [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sqlite3
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from _runtime import Workers, machine, median, open_runtime, postgres_databases, worker_pool

from tether.runtime import Runtime


def _world(workdir: Path, thread: str) -> tuple[list[int], int]:
    """The pids whose charge of ``thread`` reached the provider, and its payments."""
    path = workdir / "effects.db"
    if not path.exists():
        return [], 0
    with sqlite3.connect(path, timeout=30) as db:
        try:
            calls = db.execute("SELECT pid FROM calls WHERE thread = ?", (thread,)).fetchall()
            paid = db.execute("SELECT count(*) FROM effects WHERE thread = ?", (thread,))
            (count,) = paid.fetchone()
        except sqlite3.OperationalError:  # no charge yet: the tables are not there
            return [], 0
    return [pid for (pid,) in calls], count


@dataclass(frozen=True)
class Failover:
    took: float  # seconds from kill -9 to the next event by another worker
    calls: int  # charges that reached the provider (a repeat carries the same key)
    paid: int  # payments made


async def _one_failover(
    runtime: Runtime, pool: Workers, thread: str, kill_delay: float
) -> Failover:
    run = await runtime.create("pay_then_wait", thread_id=thread, input={"trace": []})
    while True:  # until the charge has reached the provider
        payers, _ = _world(pool.workdir, thread)
        if payers:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(kill_delay)
    holder = (await runtime.get(run.run_id)).worker_id
    assert holder is not None
    index = int(holder[1:])
    assert pool.pid(index) == payers[0], (holder, payers)
    after = (await runtime.get(run.run_id)).last_seq
    killed = time.time()
    os.kill(pool.pid(index), signal.SIGKILL)
    took = None
    while took is None:
        batch = await runtime.events(run.run_id, after=after, wait=30)
        if not batch:
            raise RuntimeError(f"nobody took run {run.run_id} over")
        for event in batch:
            after = event.seq
            if event.worker_id not in (None, holder) and event.created_at is not None:
                took = event.created_at.timestamp() - killed
                break
    pool.procs[index].wait(10)
    (pool.workdir / f"release-{thread}").touch()
    done = await runtime.wait(run.run_id, timeout=60)
    if done.status != "success":
        raise RuntimeError(f"run {run.run_id} is {done.status}: {done.error}")
    pool.start(1, concurrency=1)  # two live workers again
    calls, paid = _world(pool.workdir, thread)
    return Failover(took, len(calls), paid)


async def measure(repeat: int, lease: float, kill_delay: float, workdir: Path) -> list[Failover]:
    with postgres_databases(1) as (url,):
        async with open_runtime(url) as runtime:
            with worker_pool(url, workdir, lease=lease) as pool:
                pool.start(2, concurrency=1)
                return [
                    await _one_failover(runtime, pool, f"failover-{i}", kill_delay)
                    for i in range(repeat)
                ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--lease", type=float, default=2.0, help="worker lease in seconds")
    parser.add_argument(
        "--kill-delay",
        type=float,
        default=0.1,
        help="seconds between the charge reaching the provider and the kill",
    )
    parser.add_argument("--quick", action="store_true", help="2 repetitions: a smoke run")
    args = parser.parse_args()
    repeat = 2 if args.quick else args.repeat
    print(f"failover, PostgreSQL, lease {args.lease:g} s, {repeat} kills; {machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        results = asyncio.run(measure(repeat, args.lease, args.kill_delay, Path(tmp)))
    times = [r.took for r in results]
    duplicates = sum(r.paid - 1 for r in results)
    resent = sum(r.calls - 1 for r in results)
    print("kill -9 to next event: " + ", ".join(f"{t:.2f}" for t in times) + " s")
    print(f"median {median(times):.2f} s, max {max(times):.2f} s (goal <= 3 s)")
    print(
        f"duplicate payments: {duplicates} in {len(results)} runs (goal 0); "
        f"charges sent again with the same idempotency key: {resent} "
        "(only when the kill came before the charge was recorded)"
    )


if __name__ == "__main__":
    main()
