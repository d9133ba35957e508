"""The graphs the runtime's tests run through ``tether worker``, as a user's project would.

Each graph is written the way a LangGraph user writes one: compiled without a
checkpointer (the runtime supplies its own) or built by a factory. The outside
world of the effectful graphs lives in ``$TETHER_TEST_WORKDIR``.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from tether.approvals import Approvers, Stop, arequest_approval
from tether.demo.graph import build_demo_graph
from tether.graphs.refund import build_refund_graph
from tether.steps import durable_tool


def _workdir() -> Path:
    path = Path(os.environ.get("TETHER_TEST_WORKDIR") or Path.cwd() / ".tether-test")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _append(left: list[str], right: list[str]) -> list[str]:
    return [*left, *right]


class Trace(TypedDict, total=False):
    n: int
    trace: Annotated[list[str], _append]
    answer: Any


def _step(name: str) -> Any:
    def node(state: Trace) -> dict[str, Any]:
        return {"trace": [name]}

    return node


_three = StateGraph(Trace)
for _name in ("a", "b", "c"):
    _three.add_node(_name, _step(_name))
_three.add_edge(START, "a")
_three.add_edge("a", "b")
_three.add_edge("b", "c")
_three.add_edge("c", END)
three_node = _three.compile()


async def _ask(state: Trace) -> dict[str, Any]:
    answer = interrupt({"question": "go on?"})
    return {"answer": answer, "trace": ["asked"]}


async def _approve(state: Trace, config: RunnableConfig) -> dict[str, Any]:
    outcome = await arequest_approval(
        "ship",
        {"n": state.get("n", 0)},
        why="the test asks a person",
        approvers=Approvers(users=["dana"]),
        expires_in=timedelta(hours=1),
        on_expiry=Stop(),
        config=config,
    )
    return {"answer": outcome.decision, "trace": ["approved"]}


def _pause_graph() -> Any:
    graph = StateGraph(Trace)
    graph.add_node("ask", _ask)
    graph.add_node("approve", _approve)
    graph.add_node("after", _step("after"))
    graph.add_edge(START, "ask")
    graph.add_edge("ask", "approve")
    graph.add_edge("approve", "after")
    graph.add_edge("after", END)
    return graph.compile()


pause = _pause_graph()


def _ask_once_graph() -> Any:
    """Interrupts at once (a question for a person); one more node after the answer."""
    graph = StateGraph(Trace)
    graph.add_node("ask", _ask)
    graph.add_node("after", _step("after"))
    graph.add_edge(START, "ask")
    graph.add_edge("ask", "after")
    graph.add_edge("after", END)
    return graph.compile()


ask_once = _ask_once_graph()


def _hold(state: Trace) -> dict[str, Any]:
    """A sync node (it runs on a pool thread) that blocks until ``release`` exists.

    It adds a line to ``holding`` once it blocks, so a test can count the pool
    threads held.
    """
    marker = _workdir() / "release"
    with (_workdir() / "holding").open("a") as holding:
        holding.write(f"{os.getpid()}\n")
    while not marker.exists():
        time.sleep(0.02)
    return {"trace": ["held"]}


def _hold_graph() -> Any:
    graph = StateGraph(Trace)
    graph.add_node("hold", _hold)
    graph.add_edge(START, "hold")
    graph.add_edge("hold", END)
    return graph.compile()


hold = _hold_graph()


async def _tick(state: Trace) -> dict[str, Any]:
    await asyncio.sleep(0.1)
    return {"n": state.get("n", 0) + 1, "trace": [f"tick{state.get('n', 0)}"]}


def _loop_graph() -> Any:
    graph = StateGraph(Trace)
    graph.add_node("tick", _tick)
    graph.add_edge(START, "tick")
    graph.add_conditional_edges(
        "tick",
        lambda s: END if s.get("n", 0) >= int(os.environ.get("TETHER_LOOP_N", "20")) else "tick",
    )
    return graph.compile()


loop_n = _loop_graph()


def _effects_db() -> sqlite3.Connection:
    db = sqlite3.connect(_workdir() / "effects.db", timeout=30)
    db.execute("CREATE TABLE IF NOT EXISTS effects (key TEXT, pid INTEGER, at REAL)")
    return db


@durable_tool
def charge(amount: int, idempotency_key: str) -> str:
    """Charge ``amount``; blocks until the marker file exists, then records the effect."""
    marker = _workdir() / "release"
    while not marker.exists():
        time.sleep(0.02)
    with _effects_db() as db:
        db.execute(
            "INSERT INTO effects VALUES (?, ?, ?)", (idempotency_key, os.getpid(), time.time())
        )
    return f"charged {amount}"


def _charge_node(state: Trace, config: RunnableConfig) -> dict[str, Any]:
    result = charge.invoke({"amount": state.get("n", 1)}, config)
    return {"answer": result, "trace": ["charged"]}


def _slow_effect_graph() -> Any:
    graph = StateGraph(Trace)
    graph.add_node("before", _step("before"))
    graph.add_node("charge", _charge_node)
    graph.add_node("after", _step("after"))
    graph.add_edge(START, "before")
    graph.add_edge("before", "charge")
    graph.add_edge("charge", "after")
    graph.add_edge("after", END)
    return graph.compile()


slow_effect = _slow_effect_graph()


def _blip(state: Trace) -> dict[str, Any]:
    """Fail as a store does when its lock stays taken, ``$TETHER_TEST_WORKDIR/blips`` times."""
    left = _workdir() / "blips"
    count = int(left.read_text()) if left.exists() else 0
    if count > 0:
        left.write_text(str(count - 1))
        raise sqlite3.OperationalError("database is locked")
    return {"trace": ["blip"]}


def _blips_graph() -> Any:
    graph = StateGraph(Trace)
    graph.add_node("a", _step("a"))
    graph.add_node("blip", _blip)
    graph.add_edge(START, "a")
    graph.add_edge("a", "blip")
    graph.add_edge("blip", END)
    return graph.compile()


blips = _blips_graph()


def refund() -> Any:
    """The refund agent, its fake payments world in ``$TETHER_TEST_WORKDIR/refund``."""
    return build_refund_graph(checkpointer=None, workdir=_workdir() / "refund")  # type: ignore[arg-type]


def gated_refund() -> Any:
    """The demo's refund agent with its approval gate."""
    return build_demo_graph(checkpointer=None, workdir=_workdir() / "gated")  # type: ignore[arg-type]
