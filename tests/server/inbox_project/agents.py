"""A refund agent that asks a person before refunding, as a user's project would write it.

The input names the order, the amount, a note (any text: the inbox tests put
markup in it) and, optionally, how many milliseconds the request stays open.
The run ends with what was refunded (``None`` when rejected or expired) and
the decision.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel, Field

from tether.approvals import Approvers, Stop, arequest_approval


class Refund(BaseModel):
    """The refund's arguments: an edit must match them."""

    order_id: str
    amount_cents: int = Field(gt=0, le=100_000)
    note: str = ""


class State(TypedDict, total=False):
    order_id: str
    amount_cents: int
    note: str
    expires_in_ms: int
    refunded: int | None
    decision: str


async def _refund(state: State, config: RunnableConfig) -> dict[str, Any]:
    args = {
        "order_id": state["order_id"],
        "amount_cents": state["amount_cents"],
        "note": state.get("note", ""),
    }
    outcome = await arequest_approval(
        "refund",
        args,
        why=f"the customer asks for {args['amount_cents']} cents back: {args['note']}",
        affects="the shop's account: money leaves the business",
        if_denied="the customer is told the refund was refused",
        observations={"order": {"id": args["order_id"], "paid_cents": 10_000}},
        approvers=Approvers(users=["dana"], roles=["support-lead"]),
        expires_in=timedelta(milliseconds=state.get("expires_in_ms", 3_600_000)),
        on_expiry=Stop(),
        args_schema=Refund,
        config=config,
    )
    refunded = None if outcome.args is None else outcome.args["amount_cents"]
    return {"refunded": refunded, "decision": outcome.decision}


_graph = StateGraph(State)
_graph.add_node("refund", _refund)
_graph.add_edge(START, "refund")
_graph.add_edge("refund", END)
refund = _graph.compile()
