"""Compensating graphs for the runtime's tests: charge and email, then a failure or a wait.

The world is ``$TETHER_TEST_WORKDIR/world.db`` (see ``tests.compensation.saga.World``).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from tests.compensation.saga import APPROVERS, World, tools
from tests.steps.graphs import State
from tether.compensation import compensating
from tether.graphs.refund import build_refund_graph


def _workdir() -> Path:
    path = Path(os.environ.get("TETHER_TEST_WORKDIR") or Path.cwd() / ".tether-test")
    path.mkdir(parents=True, exist_ok=True)
    return path


class _World(World):
    """The world of ``$TETHER_TEST_WORKDIR`` at each call (the module loads before it is set)."""

    def __init__(self) -> None:
        pass

    @property  # type: ignore[override]
    def path(self) -> Path:
        path = _workdir() / "world.db"
        if not path.exists():
            World(path)
        return path


class _Flag:
    """A file of ``$TETHER_TEST_WORKDIR``, looked up at each call (see :class:`_World`)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def exists(self) -> bool:
        return (_workdir() / self.name).exists()


def _saga(then: Any, *, compensates: bool = True, failing_undo: bool = False) -> Any:
    """Charge and email, then ``then()`` and ship; ``failing_undo``: the charge's undo raises
    while ``$TETHER_TEST_WORKDIR/undo_down`` exists."""
    world = _World()
    down = _Flag("undo_down") if failing_undo else None
    charge, email, ship, lookup = tools(world, failing_undo=down)  # type: ignore[arg-type]

    async def act(state: State) -> dict[str, Any]:
        await charge.ainvoke({"order_id": "A1", "amount_cents": 4200})
        await email.ainvoke({"to": "ada@example.com"})
        return {}

    async def finish(state: State) -> dict[str, Any]:
        await then()
        await ship.ainvoke({"order_id": "A1"})
        return {}

    graph = StateGraph(State)
    graph.add_node("act", act)
    graph.add_node("finish", finish)
    graph.add_edge(START, "act")
    graph.add_edge("act", "finish")
    graph.add_edge("finish", END)
    every = [charge, email, ship, lookup]
    if not compensates:
        return graph.compile()
    return compensating(graph.compile(), approvers=APPROVERS, tools=every)


async def _fail() -> None:
    raise RuntimeError("the carrier refused the parcel")


async def _wait_for_release() -> None:
    while not (_workdir() / "release").exists():  # noqa: ASYNC110 (another process writes it)
        await asyncio.sleep(0.02)


async def _ask() -> None:
    """A person is asked before the parcel ships (the run pauses, interrupted)."""
    interrupt("ship the parcel?")


async def _ask_then_fail() -> None:
    """A person is asked; once they answered, the carrier refuses the parcel."""
    interrupt("ship the parcel?")
    raise RuntimeError("the carrier refused the parcel")


async def _ask_then_wait() -> None:
    """A person is asked; once they answered, the run waits for ``release``."""
    interrupt("ship the parcel?")
    await _wait_for_release()


async def _blip() -> None:
    """Fail as a store does when its lock stays taken, ``$TETHER_TEST_WORKDIR/blips`` times."""
    left = _workdir() / "blips"
    count = int(left.read_text()) if left.exists() else 0
    if count > 0:
        left.write_text(str(count - 1))
        raise sqlite3.OperationalError("database is locked")


saga_fails = _saga(_fail)
saga_waits = _saga(_wait_for_release)
saga_blips = _saga(_blip)
saga_asks = _saga(_ask)
asks_then_fails = _saga(_ask_then_fail)
asks_then_waits = _saga(_ask_then_wait)
asks_uncompensated = _saga(_ask, compensates=False)
asks_undo_fails = _saga(_ask, failing_undo=True)
waits_undo_fails = _saga(_wait_for_release, failing_undo=True)


def _saga_undo_fails() -> Any:
    """``saga_fails`` whose undo of the charge raises while ``$TETHER_TEST_WORKDIR/undo_down``
    exists (the payments provider is down)."""
    world = _World()
    charge, email, ship, lookup = tools(world, failing_undo=_Flag("undo_down"))  # type: ignore[arg-type]

    async def act(state: State) -> dict[str, Any]:
        await charge.ainvoke({"order_id": "A1", "amount_cents": 4200})
        await email.ainvoke({"to": "ada@example.com"})
        await _fail()
        return {}

    graph = StateGraph(State)
    graph.add_node("act", act)
    graph.add_edge(START, "act")
    graph.add_edge("act", END)
    every = [charge, email, ship, lookup]
    return compensating(graph.compile(), approvers=APPROVERS, tools=every)


saga_undo_fails = _saga_undo_fails()


def refund_saga() -> Any:
    """The refund agent's saga (``build_refund_graph(saga=True)``): refund, email, a pickup
    that fails; its world in ``$TETHER_TEST_WORKDIR/refund_saga``."""
    return build_refund_graph(  # type: ignore[arg-type]
        checkpointer=None, workdir=_workdir() / "refund_saga", saga=True
    )
