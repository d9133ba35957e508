"""The least recording can cost per step, against the 10% budget of ``step_overhead.py``.

``step_overhead.py`` measures what recording costs; this says what it cannot
cost less than on the machine it runs on, by measuring the parts one at a
time, side by side with bare LangGraph on the same backend:

* **bare step**: a step (model call and tool call) of bare LangGraph, the
  agent of ``step_overhead.py``, ``durability="sync"``; 10% of it is the budget;
* **Python**: the CPU time tether adds per step on ``memory://``, less that
  backend's own claim and records (dicts in memory): the recording layer's
  code (hashing, keys, encoding, events), which every backend pays;
* **claim**: one ``insert`` through the record store, alone, awaited, as a
  durable tool writes before its effect (it cannot overlap the effect: the
  claim is what makes a crash during the effect visible);
* **records**: the two ``put_with_step`` calls of a step (the model's answer
  and the tool's result), each alone, awaited. In a run they are left in
  flight while the node goes on, so part of their time may overlap.

``floor`` is Python + claim: the overhead no overlap removes. The last column
is the ratio a run would show if recording cost only that.

Usage: ``python bench/record_floor.py [--url URL ...] [--steps 100] [--calls 300] [--repeat 5]``
(without ``--url``: all four backends, as ``step_overhead.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from step_overhead import default_urls, one_run

from tether import open_checkpointer
from tether.store import store_for

_VALUE = {
    "state": "done",
    "tool": "lookup",
    "args_hash": "a" * 64,
    "idempotency_key": "k" * 64,
    "output": {"type": "text", "text": "item 7: in stock, ships in 2 days, price 10.00 EUR"},
    "started_at": 0.0,
    "ended_at": 0.0,
}
_STEP = {"kind": "tool", "name": "lookup", "node": "tools", "input_hash": "a" * 64, "attempt": 1}


async def per_step(variant: str, url: str, steps: int, repeat: int) -> float:
    """Median seconds per step of ``variant`` (``"langgraph"`` or ``"tether"``) on ``url``."""
    await one_run(variant, 5, url)
    return statistics.median([await one_run(variant, steps, url) for _ in range(repeat)])


async def python_per_step(steps: int, repeat: int) -> float:
    """CPU seconds tether adds per step on ``memory://``, less that store's own writes.

    CPU time, not wall time: it is what the process spends, whatever else runs
    on the machine.
    """

    times: dict[str, list[float]] = {"langgraph": [], "tether": []}
    for variant in times:
        await one_run(variant, 5, "memory://")
    for _ in range(repeat):  # alternating, as step_overhead.py does
        for variant, cpu in times.items():
            started = time.process_time()
            await one_run(variant, steps, "memory://")
            cpu.append((time.process_time() - started) / steps)
    added = statistics.median(times["tether"]) - statistics.median(times["langgraph"])
    claim, record = await per_call("memory://", 300)
    return added - claim - 2 * record


async def per_call(url: str, calls: int) -> tuple[float, float]:
    """Median seconds of one claim (``insert``) and of one ``put_with_step``, on ``url``."""
    async with open_checkpointer(url) as saver:
        store = store_for(saver)
        thread = f"floor-{uuid.uuid4().hex}"

        async def claim(i: int) -> Any:
            return await store.insert("tool", f"{thread}.{i}", _VALUE, thread_id=thread)

        async def record(i: int) -> Any:
            return await store.put_with_step(
                "model", f"{thread}.{i}", _VALUE, thread_id=thread, step=_STEP, replace=True
            )

        async def timed(write: Callable[[int], Awaitable[Any]]) -> float:
            await write(-1)  # warm: the schema, the connection, the thread's key
            times = []
            for i in range(calls):
                started = time.perf_counter()
                await write(i)
                times.append(time.perf_counter() - started)
            return statistics.median(times)

        return await timed(claim), await timed(record)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", action="append", default=[])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    ms = 1000
    steps, repeat = args.steps, args.repeat
    python = max(await python_per_step(steps, repeat), 0.0)
    print(f"{steps} steps x {repeat} runs; Python per step: {python * ms:.3f} ms")
    print("ms; ratio if recording cost only the floor (goal <= 1.10)")
    print(
        f"{'backend':<11}{'bare step':>10}{'budget':>8}{'claim':>8}{'records':>9}"
        f"{'floor':>8}{'floor ratio':>13}"
    )
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        urls: Sequence[str] = args.url or stack.enter_context(default_urls(tmp))
        for url in urls:
            bare = await per_step("langgraph", url, steps, repeat)
            claim, record = await per_call(url, args.calls)
            floor = python + claim
            print(
                f"{url.split(':', 1)[0]:<11}{bare * ms:>10.2f}{bare * 0.1 * ms:>8.2f}"
                f"{claim * ms:>8.3f}{2 * record * ms:>9.3f}{floor * ms:>8.3f}"
                f"{(bare + floor) / bare:>12.2f}x",
                flush=True,
            )


if __name__ == "__main__":
    asyncio.run(main())
