"""The refund agent as the debugger's subject: run it, and count what it really did."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from tether.graphs import (
    CALLS_FILE,
    PAYMENTS_FILE,
    FakePaymentsProvider,
    PaymentCounts,
    build_refund_graph,
    read_calls,
    refund_input,
)


def builder(workdir: Path) -> Callable[[BaseCheckpointSaver[Any]], Any]:
    """The refund agent on a given checkpointer, its fake world in ``workdir``."""
    return lambda saver: build_refund_graph(checkpointer=saver, workdir=workdir)


async def run_refund(saver: BaseCheckpointSaver[Any], workdir: Path, thread_id: str) -> None:
    config = {"configurable": {"thread_id": thread_id}}
    await builder(workdir)(saver).ainvoke(refund_input(), config)


def model_calls(workdir: Path) -> int:
    """Calls the scripted model really made (a replayed answer is not one)."""
    return len(read_calls(workdir / CALLS_FILE))


def payments(workdir: Path) -> PaymentCounts:
    return FakePaymentsProvider(workdir / PAYMENTS_FILE).counts()
