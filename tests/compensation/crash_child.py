"""A child process: run the saga until it fails, then compensate it (maybe killed mid-way).

Usage: ``python -m tests.compensation.crash_child URL OPTIONS_JSON WORKDIR``; the
parent sets ``TETHER_CRASH_AT`` to kill it at a compensation boundary.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from tests.compensation.saga import CONFIG, INPUT, World, saga_graph
from tether import open_checkpointer
from tether.compensation import compensate


async def main(url: str, options: dict[str, object], workdir: Path) -> None:
    async with open_checkpointer(url, **options) as saver:
        graph = saga_graph(saver, World(workdir / "world.db"))
        try:
            await graph.ainvoke(INPUT, CONFIG)
        except RuntimeError as exc:
            await compensate(graph, CONFIG, reason=str(exc))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], json.loads(sys.argv[2]), Path(sys.argv[3])))
