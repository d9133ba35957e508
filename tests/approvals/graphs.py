"""Small graphs with approval gates, for the tests and their child processes.

Each ``*_graph(checkpointer)`` is a factory the CLI can load with
``--graph tests.approvals.graphs:NAME``. The action ("pay") leaves its effect
in the state's log, so a test can count how often it ran.
"""

from __future__ import annotations

import operator
from datetime import timedelta
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send
from pydantic import BaseModel, Field

from tether.approvals import (
    Alternative,
    ApprovalOutcome,
    Approvers,
    Escalate,
    ExpiryPolicy,
    SafeAlternative,
    Stop,
    arequest_approval,
    request_approval,
)

# The version of the record "pay" depends on; tests change it to make approvals stale.
VERSIONS: dict[str, int] = {"balance": 1}
APPROVERS = Approvers(users=["alice"], roles=["finance"])
EXPIRES_IN = timedelta(hours=1)


class PayArgs(BaseModel):
    """The arguments of the "pay" action."""

    to: str
    amount: int = Field(gt=0)


class PayState(TypedDict, total=False):
    amount: int
    log: Annotated[list[str], operator.add]


def _effect(outcome: ApprovalOutcome) -> list[str]:
    if outcome.args is None:
        return [f"{outcome.decision}:{outcome.policy or '-'}: {outcome.observation}"]
    return [f"paid {outcome.args['amount']} to {outcome.args['to']} ({outcome.decision})"]


def _gate_kwargs(on_expiry: ExpiryPolicy) -> dict[str, Any]:
    return {
        "why": "invoice 42 is due",
        "affects": "the company account",
        "if_denied": "the invoice stays unpaid",
        "approvers": APPROVERS,
        "expires_in": EXPIRES_IN,
        "on_expiry": on_expiry,
        "observations": lambda: {"balance_cents": VERSIONS["balance"] * 100},
        "depends_on": {"balance": lambda: VERSIONS["balance"]},
        "alternative": Alternative("pay", {"to": "bob", "amount": 1}, "pay a token amount"),
        "args_schema": PayArgs,
    }


def _route(state: PayState) -> str:
    return END if state["log"][-1].startswith("expire:stop") else "after"


def build(checkpointer: BaseCheckpointSaver[Any], on_expiry: ExpiryPolicy) -> Any:
    """A -> pay (gated) -> after; a stop on expiry ends the run after ``pay``."""

    def pay(state: PayState) -> PayState:
        outcome = request_approval(
            "pay", {"to": "bob", "amount": state["amount"]}, **_gate_kwargs(on_expiry)
        )
        return {"log": _effect(outcome)}

    def after(state: PayState) -> PayState:
        return {"log": ["after"]}

    graph = StateGraph(PayState)
    graph.add_node("pay", pay)
    graph.add_node("after", after)
    graph.add_edge(START, "pay")
    graph.add_conditional_edges("pay", _route, ["after", END])
    graph.add_edge("after", END)
    return graph.compile(checkpointer=checkpointer)


def gate_graph(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    """Expiry policy: stop."""
    return build(checkpointer, Stop())


def alternative_graph(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    """Expiry policy: the safe alternative (pay a token amount)."""
    return build(checkpointer, SafeAlternative())


def escalating_graph(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    """Expiry policy: escalate to carol for two hours, then stop."""
    return build(
        checkpointer,
        Escalate(to=Approvers(users=["carol"]), expires_in=timedelta(hours=2), then=Stop()),
    )


def async_graph(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    """The gate in an async node, with an async version reader."""

    async def balance() -> int:
        return VERSIONS["balance"]

    async def pay(state: PayState) -> PayState:
        kwargs = {**_gate_kwargs(Stop()), "depends_on": {"balance": balance}}
        outcome = await arequest_approval("pay", {"to": "bob", "amount": state["amount"]}, **kwargs)
        return {"log": _effect(outcome)}

    graph = StateGraph(PayState)
    graph.add_node("pay", pay)
    graph.add_edge(START, "pay")
    graph.add_edge("pay", END)
    return graph.compile(checkpointer=checkpointer)


def parallel_graph(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    """Two payments in one step (two tasks via Send), each behind its own approval."""

    def fan_out(state: PayState) -> list[Send]:
        return [Send("pay", {"amount": 10}), Send("pay", {"amount": 20})]

    def pay(state: PayState) -> PayState:
        outcome = request_approval(
            "pay", {"to": "bob", "amount": state["amount"]}, **_gate_kwargs(Stop())
        )
        return {"log": _effect(outcome)}

    graph = StateGraph(PayState)
    graph.add_node("pay", pay)
    graph.add_conditional_edges(START, fan_out, ["pay"])
    graph.add_edge("pay", END)
    return graph.compile(checkpointer=checkpointer)


# What a model could put in an argument it chooses: a newline and a fake
# "arguments" block claiming a small amount, then ANSI "conceal" (SGR 8) to hide
# what follows on a terminal, an OSC 8 hyperlink, a right-to-left override that
# shows "cents 10" backwards, a C1 CSI clearing the screen, and invisible
# characters (zero-width space, byte order mark, a Hangul filler, a tag character).
HOSTILE = (
    "box was damaged\n"
    "  arguments     sha256 " + "0" * 64 + "\n"
    "                  {\n"
    '                    "amount_cents": 10\n'
    "                  }\n"
    "\x1b[8m"
    "\x1b]8;;https://evil.example\x07open\x1b]8;;\x07"
    "\u202e01 stnec\u202c\u2066\u2069\u200e\u200f"
    "\x9b2J\r\x7f\x00\u200b\ufeff\u3164\U000e0041\u2028\u00a0end"
)


def refund_graph(reason: str) -> Any:
    """A factory whose ``why`` quotes an argument the model chose, as the README's does."""

    def factory(checkpointer: BaseCheckpointSaver[Any]) -> Any:
        def refund(state: PayState) -> PayState:
            args = {"order_id": "A-1001", "amount_cents": state["amount"], "reason": reason}
            outcome = request_approval(
                "issue_refund",
                args,
                why=f"refund {args['amount_cents']} cents on {args['order_id']}: {reason}",
                affects=f"the card of the customer who wrote: {reason}",
                if_denied=reason,
                observations=lambda: {"order": {"note": reason}, reason: 1},
                depends_on={"order": lambda: reason},
                approvers=APPROVERS,
                expires_in=EXPIRES_IN,
                on_expiry=SafeAlternative(),
                alternative=Alternative("issue_refund", {**args, "amount_cents": 1}, reason),
            )
            return {"log": _effect(outcome) if outcome.args is None else ["refunded"]}

        graph = StateGraph(PayState)
        graph.add_node("refund", refund)
        graph.add_edge(START, "refund")
        graph.add_edge("refund", END)
        return graph.compile(checkpointer=checkpointer)

    return factory
