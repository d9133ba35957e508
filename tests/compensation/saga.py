"""A small saga for the compensation tests: charge, email, ship, then a step that fails.

The outside world is a SQLite file (``world.db``) of effects, each row a kind
and the idempotency key it came with; an undo honours its key (a second call
with the same key adds nothing), exactly as a real provider would.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage

from tests.steps.graphs import State, one_node
from tether.approvals import Approvers
from tether.compensation import compensating
from tether.steps import durable_tool

APPROVERS = Approvers(users=["dana"])


class World:
    """The effects the saga had on the outside world, in order."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE IF NOT EXISTS effects (kind TEXT, key TEXT)")

    def add(self, kind: str, key: str) -> str:
        with sqlite3.connect(self.path) as db:
            db.execute("INSERT INTO effects VALUES (?, ?)", (kind, key))
        return f"{kind} done"

    def add_once(self, kind: str, key: str) -> str:
        """An effect deduplicated on ``key`` (what an undo's provider does)."""
        with sqlite3.connect(self.path) as db:
            seen = db.execute("SELECT 1 FROM effects WHERE key = ?", (key,)).fetchone()
            if seen is None:
                db.execute("INSERT INTO effects VALUES (?, ?)", (kind, key))
        return f"{kind} done"

    def kinds(self) -> list[str]:
        with sqlite3.connect(self.path) as db:
            return [k for (k,) in db.execute("SELECT kind FROM effects ORDER BY rowid")]


def tools(world: World, *, failing_undo: Path | None = None, **policies: Any) -> list[Any]:
    """charge (keyed, undoable), email (undoable), ship (no undo), lookup (read-only).

    ``failing_undo``: while this file exists, undoing the charge raises.
    """

    def charge(order_id: str, amount_cents: int, idempotency_key: str) -> str:
        """Charge a card."""
        return world.add("charge", idempotency_key) + f" {order_id} {amount_cents}"

    def refund_charge(args: dict[str, Any], result: Any, key: str) -> str:
        if failing_undo is not None and failing_undo.exists():
            raise ConnectionError("payments provider down")
        assert result.startswith("charge done"), result
        return world.add_once(f"undo-charge {args['amount_cents']}", key)

    def email(to: str) -> str:
        """Email a customer."""
        return world.add("email", to)

    def correct_email(args: dict[str, Any], result: Any, key: str) -> str:
        return world.add_once(f"undo-email {args['to']}", key)

    def ship(order_id: str) -> str:
        """Ship an order."""
        return world.add("ship", order_id)

    def lookup(order_id: str) -> str:
        """Read an order."""
        return f"order {order_id}"

    return [
        durable_tool(charge, compensate=refund_charge, compensation=policies.get("charge")),
        durable_tool(email, compensate=correct_email, compensation=policies.get("email")),
        durable_tool(ship),
        durable_tool(lookup, safe_to_retry=True, read_only=True),
    ]


def saga_graph(saver: Any, world: World, *, policy: str = "auto", **options: Any) -> Any:
    """One node: lookup, charge, email, ship, then a failure; compensating."""
    charge, email, ship, lookup = tools(world, **options)

    async def node(state: State) -> dict[str, Any]:
        await lookup.ainvoke({"order_id": "A1"})
        await charge.ainvoke({"order_id": "A1", "amount_cents": 4200})
        await email.ainvoke({"to": "ada@example.com"})
        await ship.ainvoke({"order_id": "A1"})
        raise RuntimeError("the carrier refused the parcel")

    graph = one_node(node, saver)
    every = [charge, email, ship, lookup]
    return compensating(graph, approvers=APPROVERS, policy=policy, tools=every)


CONFIG: Any = {"configurable": {"thread_id": "saga"}}
INPUT = {"messages": [HumanMessage("refund A1")]}
ALL_UNDONE = ["charge", "email", "ship", "undo-email ada@example.com", "undo-charge 4200"]
"""The world after the saga failed and was compensated in full (newest effect first)."""


def ask_saga(saver: Any) -> Any:
    """The saga whose charge's undo waits for a person; its world is ``$SAGA_WORLD`` (CLI)."""
    return saga_graph(saver, World(Path(os.environ["SAGA_WORLD"])), charge="ask")
