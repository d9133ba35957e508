"""Graphs for the runtime's deadline, step-timeout and cancel tests.

The outside world of their tool lives in ``$TETHER_TEST_WORKDIR/effects.db``;
``$TETHER_TEST_WORKDIR/go`` lets the gated node go on.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from pathlib import Path
from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import RetryPolicy

from tether.steps import durable_tool

_RETRY_ONCE = RetryPolicy(max_attempts=2, initial_interval=0.0, jitter=False)
SLOW_S = 1.5  # how long the slow sync node's first attempt takes (tests use a shorter timeout)


def _workdir() -> Path:
    path = Path(os.environ.get("TETHER_TEST_WORKDIR") or Path.cwd() / ".tether-test")
    path.mkdir(parents=True, exist_ok=True)
    return path


class State(TypedDict, total=False):
    n: int
    answer: Any


@durable_tool
def ship(item: int) -> str:
    """Ship ``item``: the one outside effect, recorded in ``effects.db``."""
    with sqlite3.connect(_workdir() / "effects.db", timeout=30) as db:
        db.execute("CREATE TABLE IF NOT EXISTS effects (item INTEGER, pid INTEGER)")
        db.execute("INSERT INTO effects VALUES (?, ?)", (item, os.getpid()))
    return f"shipped {item}"


def _single(node: Any, retry: RetryPolicy | None = None) -> Any:
    graph = StateGraph(State)
    graph.add_node("work", node, retry_policy=retry)
    graph.add_edge(START, "work")
    graph.add_edge("work", END)
    return graph.compile()


async def _stuck(state: State) -> dict[str, Any]:
    await asyncio.sleep(1000)  # reaches no boundary
    return {"answer": "never"}


stuck = _single(_stuck)


async def _stuck_once(state: State, runtime: Runtime[Any]) -> dict[str, Any]:
    attempt = runtime.execution_info.node_attempt if runtime.execution_info else 1
    if attempt == 1:
        await asyncio.sleep(1000)
    return {"answer": f"attempt {attempt}"}


stuck_once = _single(_stuck_once, _RETRY_ONCE)


def _slow_then_ship(state: State, config: RunnableConfig, runtime: Runtime[Any]) -> dict[str, Any]:
    attempt = runtime.execution_info.node_attempt if runtime.execution_info else 1
    if attempt == 1:
        time.sleep(SLOW_S)  # a sync node: only its next boundary can stop it
    return {"answer": ship.invoke({"item": state.get("n", 1)}, config)}


slow_ship = _single(_slow_then_ship)
slow_ship_retried = _single(_slow_then_ship, _RETRY_ONCE)


def _gated_ship(state: State, config: RunnableConfig) -> dict[str, Any]:
    go = _workdir() / "go"
    while not go.exists():
        time.sleep(0.02)
    return {"answer": ship.invoke({"item": state.get("n", 1)}, config)}


gated_ship = _single(_gated_ship)
