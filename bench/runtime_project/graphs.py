"""The graphs the runtime benchmarks run through ``tether worker``.

Compiled without a checkpointer, as a user's project is (the runtime supplies
its own); ``build_three_node`` is also compiled with LangGraph's own
``AsyncPostgresSaver`` as the in-process peer of the throughput benchmark. The
outside world of ``pay_then_wait`` lives in ``$TETHER_BENCH_WORKDIR``.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from tether.steps import durable_tool


def _append(left: list[str], right: list[str]) -> list[str]:
    return [*left, *right]


class Trace(TypedDict, total=False):
    trace: Annotated[list[str], _append]
    answer: Any


def _step(name: str) -> Any:
    async def node(state: Trace) -> dict[str, Any]:
        return {"trace": [name]}

    return node


def build_three_node(checkpointer: BaseCheckpointSaver[Any] | None = None) -> Any:
    """a -> b -> c, each node appending its name."""
    graph = StateGraph(Trace)
    for name in ("a", "b", "c"):
        graph.add_node(name, _step(name))
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    graph.add_edge("b", "c")
    graph.add_edge("c", END)
    return graph.compile(checkpointer=checkpointer)


three_node = build_three_node()


async def _ask(state: Trace) -> dict[str, Any]:
    return {"answer": interrupt({"question": "go on?"}), "trace": ["asked"]}


def _build_ask() -> Any:
    """Interrupts at once (a person must answer); one more node after the answer."""
    graph = StateGraph(Trace)
    graph.add_node("ask", _ask)
    graph.add_node("after", _step("after"))
    graph.add_edge(START, "ask")
    graph.add_edge("ask", "after")
    graph.add_edge("after", END)
    return graph.compile()


ask = _build_ask()


def workdir() -> Path:
    """The benchmark's outside world: effects and release markers."""
    path = Path(os.environ.get("TETHER_BENCH_WORKDIR") or Path.cwd() / ".tether-bench")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _hold(state: Trace) -> dict[str, Any]:
    """A sync node (LangGraph runs it on the event loop's thread pool) that blocks
    until ``release`` exists; it adds a line to ``holding`` once it blocks."""
    with (workdir() / "holding").open("a") as holding:
        holding.write(f"{os.getpid()}\n")
    while not (workdir() / "release").exists():
        time.sleep(0.02)
    return {"trace": ["held"]}


def _build_hold() -> Any:
    graph = StateGraph(Trace)
    graph.add_node("hold", _hold)
    graph.add_edge(START, "hold")
    graph.add_edge("hold", END)
    return graph.compile()


hold = _build_hold()


def effects_db() -> sqlite3.Connection:
    """The outside world, a payment provider that honours idempotency keys.

    ``calls`` has one row per call that reached it; ``effects`` one per distinct
    key (a call repeating a key is answered without paying again).
    """
    db = sqlite3.connect(workdir() / "effects.db", timeout=30)
    db.execute("CREATE TABLE IF NOT EXISTS calls (thread TEXT, key TEXT, pid INTEGER, at REAL)")
    db.execute("CREATE TABLE IF NOT EXISTS effects (key TEXT PRIMARY KEY, thread TEXT)")
    return db


@durable_tool
def charge(thread: str, idempotency_key: str) -> str:
    """The effect: a payment keyed by the step's idempotency key."""
    with effects_db() as db:
        db.execute(
            "INSERT INTO calls VALUES (?, ?, ?, ?)",
            (thread, idempotency_key, os.getpid(), time.time()),
        )
        db.execute("INSERT OR IGNORE INTO effects VALUES (?, ?)", (idempotency_key, thread))
    return "charged"


async def _pay_then_wait(state: Trace, config: RunnableConfig) -> dict[str, Any]:
    """Charge (recorded), then wait in the same node until ``release-<thread>`` exists.

    A worker killed while waiting has paid but not finished the node: the worker
    that takes the run over executes the node again and must replay the charge.
    """
    thread = config["configurable"]["thread_id"]
    result = await charge.ainvoke({"thread": thread}, config)
    marker = workdir() / f"release-{thread}"
    while True:  # a file, so that another process can release the run
        if marker.exists():
            break
        await asyncio.sleep(0.02)
    return {"answer": result, "trace": ["paid"]}


def _build_pay_then_wait() -> Any:
    graph = StateGraph(Trace)
    graph.add_node("pay", _pay_then_wait)
    graph.add_node("after", _step("after"))
    graph.add_edge(START, "pay")
    graph.add_edge("pay", "after")
    graph.add_edge("after", END)
    return graph.compile()


pay_then_wait = _build_pay_then_wait()
