"""Throughput on PostgreSQL: runs/s of ``tether worker`` processes vs in-process LangGraph.

The graph is ``three_node`` (a -> b -> c, trivial async nodes), so the figure
is the runtime's own cost per run: enqueueing, claiming, checkpointing, events,
finishing. For 1, 2 and 4 worker processes of concurrency ``--concurrency``
each, ``--runs`` runs are created from this process (50 at a time) once the
workers are up; runs/s counts from the first create to the last ``ended_at``.

The peer is the same compiled graph run in this process with LangGraph's own
``AsyncPostgresSaver`` (a pool of 10 connections per worker it stands for, as
each worker has) at the same total concurrency, on a fresh database too.
Both use LangGraph's default durability (``async``). Each pair runs
``--repeat`` times, alternating; the best run of each is compared.

Usage: ``python bench/runtime_throughput.py [--runs 400] [--concurrency 8] [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from _runtime import batched, machine, open_runtime, postgres_databases, wait_all, worker_pool
from runtime_project.graphs import build_three_node

WORKER_COUNTS = (1, 2, 4)


async def tether_rate(url: str, workdir: Path, workers: int, concurrency: int, runs: int) -> float:
    """Runs/s of ``workers`` worker processes."""
    async with open_runtime(url) as runtime:
        with worker_pool(url, workdir) as pool:
            pool.start(workers, concurrency=concurrency)

            async def create(i: int) -> str:
                run = await runtime.create("three_node", thread_id=f"t-{i}", input={"trace": []})
                return run.run_id

            started = time.time()
            done = await wait_all(runtime, await batched(range(runs), create), "success")
    ended = max(run.ended_at.timestamp() for run in done if run.ended_at is not None)
    return runs / (ended - started)


async def langgraph_rate(url: str, pool_size: int, concurrency: int, runs: int) -> float:
    """Runs/s of the same graph in this process on ``AsyncPostgresSaver``."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    async with AsyncConnectionPool(url, max_size=pool_size, kwargs=kwargs) as conns:
        saver = AsyncPostgresSaver(conns)  # type: ignore[arg-type]
        await saver.setup()
        graph = build_three_node(saver)
        slots = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            async with slots:
                config = {"configurable": {"thread_id": f"t-{i}"}}
                result = await graph.ainvoke({"trace": []}, config)
                assert result["trace"] == ["a", "b", "c"]

        started = time.time()
        await asyncio.gather(*(one(i) for i in range(runs)))
        return runs / (time.time() - started)


async def measure(
    runs: int, concurrency: int, repeat: int, workdir: Path
) -> dict[int, dict[str, list[float]]]:
    rates: dict[int, dict[str, list[float]]] = {}
    with postgres_databases(2 * len(WORKER_COUNTS) * repeat) as urls:
        fresh = iter(urls)
        for workers in WORKER_COUNTS:
            rates[workers] = {"tether": [], "langgraph": []}
            total = workers * concurrency
            for i in range(repeat):
                here = workdir / f"{workers}-{i}"
                here.mkdir()
                rates[workers]["tether"].append(
                    await tether_rate(next(fresh), here, workers, concurrency, runs)
                )
                rates[workers]["langgraph"].append(
                    await langgraph_rate(next(fresh), 10 * workers, total, runs)
                )
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400, help="runs per measurement")
    parser.add_argument("--concurrency", type=int, default=8, help="each worker's concurrency")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="30 runs once: a smoke run")
    args = parser.parse_args()
    runs, repeat = (30, 1) if args.quick else (args.runs, args.repeat)
    print(
        f"throughput, PostgreSQL, three_node, {runs} runs x {repeat}, "
        f"worker concurrency {args.concurrency}; {machine()}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        rates = asyncio.run(measure(runs, args.concurrency, repeat, Path(tmp)))
    print(f"{'workers':<9}{'concurrency':>12}{'tether':>14}{'LangGraph':>14}{'ratio':>8}")
    for workers, pair in rates.items():
        ours, theirs = max(pair["tether"]), max(pair["langgraph"])
        print(
            f"{workers:<9}{workers * args.concurrency:>12}{ours:>10.1f} r/s"
            f"{theirs:>10.1f} r/s{ours / theirs:>7.2f}x"
        )
    print("ratio = tether / in-process LangGraph, best runs (goal >= 0.5); every run, r/s:")
    for workers, pair in rates.items():
        print(
            f"  {workers} workers: tether "
            + ", ".join(f"{r:.1f}" for r in pair["tether"])
            + "; LangGraph "
            + ", ".join(f"{r:.1f}" for r in pair["langgraph"])
        )


if __name__ == "__main__":
    main()
