"""Runs ``examples/tool_node_graph.py``'s agent over the crash harness's checkpoint boundaries.

Run from the example's working folder with ``TETHER_CRASH_AT`` set, it dies at
a checkpoint write the example itself does not mark (the examples use a
plain checkpointer), leaving the same database the example would leave.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))

from support_desk import (  # noqa: E402  (the examples folder is not a package)
    CHECKPOINTS_URL,
    refund_order,
    run_ticket,
    scripted_support_model,
)
from tool_node_graph import build_graph  # noqa: E402

from tests.runtime.progress_child import WritesFirstSaver  # noqa: E402
from tether import durable_tool, open_checkpointer, recorded  # noqa: E402


async def main() -> None:
    model = recorded(scripted_support_model())
    async with open_checkpointer(CHECKPOINTS_URL) as saver:
        agent = build_graph(model, [durable_tool(refund_order)], WritesFirstSaver(saver))
        await run_ticket(agent, saver)


if __name__ == "__main__":
    asyncio.run(main())
