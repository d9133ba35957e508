"""ms per checkpoint through tether's open_checkpointer vs the official saver built directly.

Each round writes N checkpoints (a parent chain with a few KB of channel data,
one pending write each) and reads the latest back, first through one saver
then the other, alternating so machine noise hits both alike. The ratio is
tether ÷ official; the goal is about 1.0×.

    python bench/checkpoint_overhead.py [--checkpoints 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _servers import bench_servers
from langgraph.checkpoint.base import BaseCheckpointSaver, create_checkpoint, empty_checkpoint

from tether import open_checkpointer

Opener = Callable[[], AbstractAsyncContextManager[BaseCheckpointSaver[Any]]]


async def write_chain(saver: BaseCheckpointSaver[Any], n: int) -> float:
    """Write ``n`` checkpoints on a fresh thread; return ms per checkpoint."""
    thread = uuid.uuid4().hex
    config: dict[str, Any] = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    checkpoint = empty_checkpoint()
    payload = "x" * 2048
    start = time.perf_counter()
    for step in range(n):
        checkpoint = create_checkpoint(checkpoint, None, step)
        checkpoint["channel_values"] = {"messages": [payload, step], "step": step}
        checkpoint["channel_versions"] = {"messages": step + 1, "step": step + 1}
        config = await saver.aput(
            config,
            checkpoint,
            {"source": "loop", "step": step},
            {"messages": step + 1, "step": step + 1},
        )
        await saver.aput_writes(config, [("messages", payload)], task_id=uuid.uuid4().hex)
        await saver.aget_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
    return (time.perf_counter() - start) * 1000 / n


def official(backend: str, url: str) -> Opener:
    @asynccontextmanager
    async def opener() -> AsyncIterator[BaseCheckpointSaver[Any]]:
        if backend == "memory":
            from langgraph.checkpoint.memory import InMemorySaver

            yield InMemorySaver()
        elif backend == "sqlite":
            from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

            async with AsyncSqliteSaver.from_conn_string(url) as saver:
                await saver.setup()
                yield saver
        elif backend == "postgres":
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

            async with AsyncPostgresSaver.from_conn_string(url) as saver:
                await saver.setup()
                yield saver
        else:
            from langgraph.checkpoint.redis.aio import AsyncRedisSaver

            async with AsyncRedisSaver.from_conn_string(url) as saver:
                await saver.asetup()
                yield saver

    return opener


async def measure(
    name: str, tether_url: str, official_opener: Opener, n: int, rounds: int, **options: Any
) -> tuple[float, float]:
    ours: list[float] = []
    theirs: list[float] = []
    async with open_checkpointer(tether_url, **options) as t, official_opener() as o:
        await write_chain(t, 10)  # warm both up
        await write_chain(o, 10)
        for _ in range(rounds):
            theirs.append(await write_chain(o, n))
            ours.append(await write_chain(t, n))
    return statistics.median(ours), statistics.median(theirs)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with bench_servers() as urls, tempfile.TemporaryDirectory() as tmp:
        cases = [
            ("memory", "memory://", official("memory", ""), {}),
            ("sqlite", f"sqlite:///{tmp}/tether.db", official("sqlite", f"{tmp}/official.db"), {}),
            ("postgres", urls["postgres"], official("postgres", urls["postgres"]), {}),
            ("redis", urls["redis"], official("redis", urls["redis"]), {"key_prefix": "bench"}),
        ]
        print(f"{'backend':<10}{'tether ms/ckpt':>16}{'official ms/ckpt':>18}{'ratio':>8}")
        for name, url, opener, options in cases:
            ours, theirs = await measure(
                name, url, opener, args.checkpoints, args.rounds, **options
            )
            print(f"{name:<10}{ours:>16.3f}{theirs:>18.3f}{ours / theirs:>7.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
