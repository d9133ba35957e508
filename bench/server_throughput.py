"""Server throughput: SDK ``runs.wait`` on ``tether serve``, ``langgraph dev``, in-process.

The graph is ``three_node`` (a -> b -> c, trivial async nodes). ``--clients``
(4) SDK clients (``langgraph_sdk.get_client``, one each) call
``runs.wait(thread, "three_node", if_not_exists="create")`` on a new thread
each time, one call after another, until ``--runs`` runs are done; runs/s
counts the answered calls from the first call to the last answer, and each
call's latency is timed; a call unanswered after 30 s is given up and counted
as stalled. Peers, side by side in one run:

* **tether serve** on a throwaway PostgreSQL database (``--workers``
  in-process workers of concurrency 10);
* **serve + worker**: ``tether serve --workers 0`` answering HTTP while
  ``--worker-processes`` separate ``tether worker`` processes (concurrency 10)
  execute, as a production deployment splits them (each process has its own
  CPU); the ratios use the better of the two tether setups;
* **langgraph dev**, LangGraph's in-memory development server
  (``langgraph-cli[inmem]``, the bench extra), started here; skipped with the
  reason when it cannot run. Install the bench extra in a virtualenv of its own
  (``python -m venv .bench && .bench/bin/pip install -e '.[all,bench]'``): its
  ``langgraph-api`` pins a ``jsonschema-rs`` (0.44) older than the one the test
  extra's ``schemathesis`` needs (0.60);
* **in-process LangGraph**: the same compiled graph on ``AsyncPostgresSaver``
  (a pool of 10 connections, a fresh database), ``ainvoke`` from the same
  number of concurrent tasks in this process: no HTTP, no queue.

Each peer first does ``--warmup`` runs (not counted), then the measurement;
peers alternate, ``--repeat`` times, and the best run of each is shown; the
ratios are given for the best runs and for the medians of each peer's runs.

Beside runs/s, each peer's CPU time per run is shown by process (see
``_cpu.py``): the server, each worker process, PostgreSQL, and this process
(the SDK clients, or in-process LangGraph itself). It moves far less between
runs than throughput on a shared machine, and it shows which process a
change made cheaper. Its total is the cost of a run to the whole machine.

Usage: ``python bench/server_throughput.py [--runs 400] [--clients 4] [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from _cpu import CpuMeter
from _runtime import machine, median, percentile, postgres_databases
from _server import Unavailable, langgraph_dev, tether_serve
from runtime_project.graphs import build_three_node

Call = Callable[[], Awaitable[None]]


SPLIT = "serve + worker"  # tether serve --workers 0 beside `tether worker` processes
STALL = 30.0  # seconds after which a call is given up and counted as stalled


@dataclass
class Figures:
    """One measurement: runs/s (answered calls), their latencies (s), calls given up,
    and CPU milliseconds per run by process (empty where it cannot be read)."""

    rate: float
    latencies: list[float]
    stalled: int
    cpu: dict[str, float]


async def drive(calls: list[Call], runs: int, warmup: int, meter: CpuMeter) -> Figures:
    """``warmup`` then ``runs`` runs, each ``calls[i]`` calling one after another.

    ``meter`` counts the CPU of the measured runs (not of the warmup).

    A call not answered within :data:`STALL` seconds is given up (its client goes
    on with the next run) and counted as stalled, not as a run done.
    """
    for _ in range(warmup):
        await calls[0]()
    left = runs
    latencies: list[float] = []
    stalled = 0

    async def client(call: Call) -> None:
        nonlocal left, stalled
        while left > 0:
            left -= 1
            began = time.perf_counter()
            try:
                await asyncio.wait_for(call(), STALL)
            except TimeoutError:
                stalled += 1
                continue
            latencies.append(time.perf_counter() - began)

    meter.start()
    started = time.perf_counter()
    await asyncio.gather(*(client(call) for call in calls))
    elapsed = time.perf_counter() - started
    return Figures(len(latencies) / elapsed, latencies, stalled, meter.per_run(len(latencies)))


def _check(values: object) -> None:
    if not isinstance(values, dict) or values.get("trace") != ["a", "b", "c"]:
        raise RuntimeError(f"unexpected result of runs.wait: {values!r}")


async def over_http(
    base: str, clients: int, runs: int, warmup: int, leaders: dict[str, int]
) -> Figures:
    """``clients`` SDK clients calling ``runs.wait`` on ``base`` (served by ``leaders``)."""
    from langgraph_sdk import get_client

    def call_on(client: object) -> Call:
        async def call() -> None:
            thread = str(uuid.uuid4())
            _check(
                await client.runs.wait(  # type: ignore[attr-defined]
                    thread, "three_node", input={"trace": []}, if_not_exists="create"
                )
            )

        return call

    sdk = [get_client(url=base) for _ in range(clients)]
    calls = [call_on(client) for client in sdk]
    return await drive(calls, runs, warmup, CpuMeter.of_groups(leaders))


async def in_process(url: str, clients: int, runs: int, warmup: int) -> Figures:
    """The graph on ``AsyncPostgresSaver`` in this process, ``clients`` tasks at once."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    async with AsyncConnectionPool(url, max_size=10, kwargs=kwargs) as conns:
        saver = AsyncPostgresSaver(conns)  # type: ignore[arg-type]
        await saver.setup()
        graph = build_three_node(saver)

        async def call() -> None:
            config = {"configurable": {"thread_id": str(uuid.uuid4())}}
            _check(await graph.ainvoke({"trace": []}, config))

        return await drive([call] * clients, runs, warmup, CpuMeter({}))


async def measure(args: argparse.Namespace, workdir: Path) -> tuple[dict[str, list[Figures]], str]:
    """Every peer's figures, ``args.repeat`` times, alternating; why ``langgraph dev`` is absent."""
    results: dict[str, list[Figures]] = {
        "tether serve": [],
        SPLIT: [],
        "langgraph dev": [],
        "in-process": [],
    }
    skipped = ""
    with postgres_databases(3 * args.repeat) as urls:
        fresh = iter(urls)
        for i in range(args.repeat):
            here = workdir / str(i)
            here.mkdir()
            leaders: dict[str, int] = {}
            one = tether_serve(
                next(fresh), here, workers=args.workers, lease=args.lease, leaders=leaders
            )
            with one as base:
                results["tether serve"].append(
                    await over_http(base, args.clients, args.runs, args.warmup, leaders)
                )
            leaders = {}
            split = tether_serve(
                next(fresh),
                here,
                workers=0,
                worker_processes=args.worker_processes,
                lease=args.lease,
                leaders=leaders,
            )
            with split as base:
                results[SPLIT].append(
                    await over_http(base, args.clients, args.runs, args.warmup, leaders)
                )
            if not skipped:
                leaders = {}
                try:
                    with langgraph_dev(here, leaders) as base:
                        results["langgraph dev"].append(
                            await over_http(base, args.clients, args.runs, args.warmup, leaders)
                        )
                except Unavailable as exc:
                    skipped = str(exc)
            results["in-process"].append(
                await in_process(next(fresh), args.clients, args.runs, args.warmup)
            )
    return results, skipped


def report(results: dict[str, list[Figures]], skipped: str) -> None:
    best = {name: max(runs, key=lambda f: f.rate) for name, runs in results.items() if runs}
    print(f"{'':<16}{'runs/s':>10}{'p50':>12}{'p99':>12}{'max':>12}{'stalled':>9}")
    for name, figures in best.items():
        ms = [s * 1000 for s in figures.latencies]
        print(
            f"{name:<16}{figures.rate:>10.1f}{median(ms):>9.1f} ms{percentile(ms, 99):>9.1f} ms"
            f"{max(ms):>9.0f} ms{figures.stalled:>9}"
        )
    print(f"stalled: calls unanswered after {STALL:.0f} s, given up (not counted as runs)")
    if skipped:
        print(f"langgraph dev skipped: {skipped}")
    # Each peer's best run, and (on a shared machine, less sensitive to one peer's lucky
    # run) the median of its runs; tether's figure is its better setup either way.
    typical = {name: median([f.rate for f in runs]) for name, runs in results.items() if runs}
    ours = max(best["tether serve"].rate, best[SPLIT].rate)
    ours_typical = max(typical["tether serve"], typical[SPLIT])
    ratios = [
        f"tether / in-process {ours / best['in-process'].rate:.2f}x best, "
        f"{ours_typical / typical['in-process']:.2f}x median (best setup; goal >= 0.5)"
    ]
    if "langgraph dev" in best:
        ratios.insert(
            0,
            f"tether / langgraph dev {ours / best['langgraph dev'].rate:.1f}x best, "
            f"{ours_typical / typical['langgraph dev']:.1f}x median (goal >= 4)",
        )
    print("; ".join(ratios))
    _report_cpu(best)
    print("every run, runs/s:")
    for name, runs in results.items():
        with contextlib.suppress(ValueError):
            print(f"  {name}: " + ", ".join(f"{f.rate:.1f}" for f in runs))


def _report_cpu(best: dict[str, Figures]) -> None:
    """CPU milliseconds per run of each peer's best measurement, by process."""
    if not any(f.cpu for f in best.values()):
        print("CPU per run: not readable on this system (/proc)")
        return
    print("CPU per run (ms), by process, of the runs above:")
    for name, figures in best.items():
        parts = ", ".join(f"{proc} {ms:.1f}" for proc, ms in figures.cpu.items())
        print(f"  {name}: total {sum(figures.cpu.values()):.1f} = {parts}")
    peer = best["in-process"].cpu
    if peer:
        totals = [sum(best[name].cpu.values()) for name in ("tether serve", SPLIT)]
        print(
            f"tether CPU per run / in-process: {min(totals) / sum(peer.values()):.2f}x "
            "(the cheaper tether setup; lower is better)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400, help="measured runs per peer")
    parser.add_argument("--clients", type=int, default=4, help="concurrent SDK clients")
    parser.add_argument("--workers", type=int, default=1, help="tether serve --workers")
    parser.add_argument(
        "--worker-processes",
        type=int,
        default=1,
        help="`tether worker` processes beside `tether serve --workers 0` (the second peer)",
    )
    parser.add_argument("--lease", type=float, default=2.0, help="tether serve --lease")
    parser.add_argument("--warmup", type=int, default=20, help="runs before measuring")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="20 runs once: a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.repeat, args.warmup = 20, 1, 3
    print(
        f"server throughput, runs.wait on three_node, {args.clients} clients, "
        f"{args.runs} runs x {args.repeat}, tether serve --workers {args.workers} "
        f"--lease {args.lease:g} "
        f"on PostgreSQL; {machine()}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        results, skipped = asyncio.run(measure(args, Path(tmp)))
    report(results, skipped)


if __name__ == "__main__":
    main()
