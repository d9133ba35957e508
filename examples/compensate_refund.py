"""Compensation on the refund agent: refund, email, a follow-up that fails, the refund reversed.

The refund agent (``tether.graphs.refund``, ``saga=True``) issues a refund, emails the
customer, then books a courier, which refuses. The run fails, and compensation undoes
what can be undone, newest first: the email cannot be unsent (listed as not undone),
the refund is reversed and the customer told. Each undo is a recorded step of its own,
shown beside the step it undoes.

    python examples/compensate_refund.py        # runs, fails, compensates
    TETHER_CRASH_AT=compensation.before:1 python examples/compensate_refund.py
    python examples/compensate_refund.py        # killed mid-compensation: resumes it, once

It writes ``saga.db`` and ``payments.db`` in the current folder.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tether import open_checkpointer
from tether.compensation import compensate
from tether.demo.run import describe_step
from tether.graphs import FakePaymentsProvider, refund_input
from tether.graphs.refund import build_refund_graph
from tether.steps import read_steps

CONFIG: Any = {"configurable": {"thread_id": "ticket-7"}}


async def main() -> None:
    async with open_checkpointer("sqlite:///saga.db") as saver:
        graph = build_refund_graph(checkpointer=saver, workdir=Path.cwd(), saga=True)
        started = await saver.aget_tuple(CONFIG) is not None
        if started:
            print("resuming thread ticket-7 where the last process died")
        try:
            await graph.ainvoke(None if started else refund_input(), CONFIG)
            raise SystemExit("the run did not fail; nothing to compensate")
        except Exception as exc:  # the courier refused: undo what the run did
            print(f"run failed: {exc}")
            report = await compensate(graph, CONFIG, reason=str(exc))
        for step in await read_steps(saver, "ticket-7"):
            print(describe_step(step))
        for effect in report.effects:
            why = "" if effect.status == "undone" else f" ({effect.why})"
            print(f"{effect.tool}: {effect.status}{why}")
    counts = FakePaymentsProvider(Path.cwd() / "payments.db").counts()
    print(f"refunds: {counts.refunds}; reversals: {counts.reversals}; emails: {counts.emails}")


if __name__ == "__main__":
    asyncio.run(main())
