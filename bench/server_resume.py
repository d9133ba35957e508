"""Resume over HTTP: a decision sent through the SDK, the resumed run's first SSE event back.

``--resumes`` threads of the ``ask`` graph (it interrupts at once) are
suspended through ``runs.wait``; then each is resumed, one at a time, the
LangGraph way: ``runs.stream(thread, "ask", command={"resume": "yes"},
stream_mode="updates")``, a new run carrying the decision, streamed in the same
request. Two latencies are timed from just before the request, on this
process's clock:

* **first event**: the stream's first SSE frame (``metadata``; tether's worker
  writes it when it starts the resumed run);
* **first update**: the first ``updates`` frame, the ``ask`` node finished
  with the answer: the graph has really resumed.

The stream is read to its end before the next resume, so resumes never queue
behind one another. Peers, alternating resume by resume: ``tether serve`` on
a throwaway PostgreSQL database (one in-process worker), and ``langgraph dev``
(LangGraph's in-memory server, the bench extra), skipped with the reason when
it cannot run. The first two resumes of each are not counted (warm-up).

Usage: ``python bench/server_resume.py [--resumes 100] [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from _runtime import batched, machine, median, percentile, postgres_databases
from _server import Unavailable, langgraph_dev, tether_serve

WARMUP = 2


async def suspend(client: Any, count: int) -> list[str]:
    """``count`` new threads, each stopped at the ``ask`` graph's interrupt."""

    async def one(_: int) -> str:
        thread = str(uuid.uuid4())
        await client.runs.wait(thread, "ask", input={"trace": []}, if_not_exists="create")
        state = await client.threads.get(thread)
        if state["status"] != "interrupted":
            raise RuntimeError(f"thread {thread} is {state['status']}, not interrupted")
        return thread

    return await batched(range(count), one, size=10)


async def resume(client: Any, thread: str) -> tuple[float, float]:
    """Seconds to the resumed run's first SSE frame, and to its first ``updates`` frame."""
    first = update = None
    began = time.perf_counter()
    async for part in client.runs.stream(
        thread, "ask", command={"resume": "yes"}, stream_mode="updates"
    ):
        now = time.perf_counter() - began
        first = now if first is None else first
        if part.event == "updates" and update is None:
            update = now
        if part.event == "error":
            raise RuntimeError(f"the resumed run of {thread} failed: {part.data}")
    state = await client.threads.get(thread)
    if first is None or update is None or state["status"] != "idle":
        raise RuntimeError(f"thread {thread} did not resume: {state['status']}")
    return first, update


async def measure(resumes: int, workdir: Path) -> tuple[dict[str, list[tuple[float, float]]], str]:
    from langgraph_sdk import get_client

    peers: dict[str, Any] = {}
    skipped = ""
    with contextlib.ExitStack() as stack:
        (url,) = stack.enter_context(postgres_databases(1))
        peers["tether serve"] = stack.enter_context(tether_serve(url, workdir))
        try:
            peers["langgraph dev"] = stack.enter_context(langgraph_dev(workdir))
        except Unavailable as exc:
            skipped = str(exc)
        clients = {name: get_client(url=base) for name, base in peers.items()}
        threads = {
            name: await suspend(client, resumes + WARMUP) for name, client in clients.items()
        }
        latencies: dict[str, list[tuple[float, float]]] = {name: [] for name in peers}
        for i in range(resumes + WARMUP):
            order = list(peers) if i % 2 else list(reversed(peers))
            for name in order:
                took = await resume(clients[name], threads[name][i])
                if i >= WARMUP:
                    latencies[name].append(took)
    return latencies, skipped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resumes", type=int, default=100, help="measured resumes per peer")
    parser.add_argument("--quick", action="store_true", help="10 resumes: a smoke run")
    args = parser.parse_args()
    resumes = 10 if args.quick else args.resumes
    print(f"resume over HTTP, runs.stream with a Command, {resumes} resumes per peer; {machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        latencies, skipped = asyncio.run(measure(resumes, Path(tmp)))
    print(f"{'':<16}{'first event p50':>17}{'p99':>10}{'first update p50':>19}{'p99':>10}")
    for name, pairs in latencies.items():
        first = [a * 1000 for a, _ in pairs]
        update = [b * 1000 for _, b in pairs]
        print(
            f"{name:<16}{median(first):>14.1f} ms{percentile(first, 99):>7.1f} ms"
            f"{median(update):>16.1f} ms{percentile(update, 99):>7.1f} ms"
        )
    if skipped:
        print(f"langgraph dev skipped: {skipped}")
    ours = median([a for a, _ in latencies["tether serve"]]) * 1000
    print(f"tether first-event p50 {ours:.1f} ms (goal <= 25 ms)")


if __name__ == "__main__":
    main()
