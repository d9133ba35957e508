"""The refund scenario: the shop's orders, the customer's request, the model's script.

Everything here is shared by the refund agent (:mod:`tether.graphs.refund`) and
by any variant of it, such as one built without tether's durability to show what
goes wrong.

The model's script: each rule decides from the last tool result, never from a call counter, so the
same conversation always gets the same answer, however often the run was
killed and resumed. Tool results are JSON, as a real tool would return them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.graph.message import add_messages

from tether.graphs._payments import FakeOrder, FakePaymentsProvider
from tether.graphs._scripted import (
    Conversation,
    ScriptRule,
    after_tool,
    last_tool_result,
    on_first_turn,
    planned_call,
)

__all__ = [
    "CALLS_FILE",
    "DEMO_ORDERS",
    "PAYMENTS_FILE",
    "REFUND_REQUEST",
    "RefundState",
    "refund_effects",
    "refund_input",
    "refund_script",
]

DEMO_ORDERS = (
    FakeOrder("A-1001", "ada@example.com", "ceramic teapot", 4200),
    FakeOrder("A-1002", "grace@example.com", "cast iron pan", 6900),
)
REFUND_REQUEST = "My order A-1001, a ceramic teapot, arrived broken. Please refund it."
CALLS_FILE = "model_calls.log"
PAYMENTS_FILE = "payments.db"


class RefundState(TypedDict):
    """The agent's state: the conversation."""

    messages: Annotated[list[AnyMessage], add_messages]


def refund_input(request: str = REFUND_REQUEST) -> dict[str, Any]:
    """The graph input for a customer's refund request."""
    return {"messages": [HumanMessage(request)]}


def refund_effects(workdir: str | Path) -> dict[str, int]:
    """Refunds issued and emails sent in ``workdir``'s fake world."""
    counts = FakePaymentsProvider(Path(workdir) / PAYMENTS_FILE).counts()
    return {"refunds": counts.refunds, "emails": counts.emails}


_ORDER_ID = re.compile(r"\b[A-Z]-\d{4}\b")


def _tool_json(messages: Conversation, name: str) -> dict[str, Any] | None:
    """The JSON object of the latest successful result of tool ``name``, if any."""
    for message in reversed(messages):
        if isinstance(message, ToolMessage) and message.name == name:
            try:
                value = json.loads(str(message.content))
            except json.JSONDecodeError:
                return None
            return value if isinstance(value, dict) else None
    return None


def _look_up(messages: Conversation) -> AIMessage:
    request = next((str(m.content) for m in messages if isinstance(m, HumanMessage)), "")
    found = _ORDER_ID.search(request)
    if found is None:
        return AIMessage(content="Which order should I refund? Please give its id, like A-1001.")
    return AIMessage(
        content=f"Let me look up order {found.group()}.",
        tool_calls=[planned_call("lookup_order", {"order_id": found.group()})],
    )


def _propose(messages: Conversation) -> AIMessage:
    order = _tool_json(messages, "lookup_order")
    if order is None or "error" in order:
        return AIMessage(content=f"I could not find that order: {last_tool_result(messages)}")
    amount = order["amount_cents"]
    return AIMessage(
        content=(
            f"Order {order['order_id']} ({order['item']}) arrived damaged. I propose a "
            f"full refund of {amount} cents to {order['customer_email']}."
        ),
        tool_calls=[
            planned_call(
                "issue_refund",
                {
                    "order_id": order["order_id"],
                    "amount_cents": amount,
                    "reason": "item arrived damaged",
                },
            )
        ],
    )


def _notify(messages: Conversation) -> AIMessage:
    refund = _tool_json(messages, "issue_refund")
    order = _tool_json(messages, "lookup_order")
    if refund is None or order is None or "refund_id" not in refund:
        why = refund.get("reason") if refund else last_tool_result(messages)
        return AIMessage(content=f"The refund was not issued: {why}")
    body = (
        f"Hello, we refunded {refund['amount_cents']} cents for your {order['item']} "
        f"(order {refund['order_id']}, refund {refund['refund_id']}). Sorry for the trouble."
    )
    return AIMessage(
        content=f"Refund {refund['refund_id']} issued; emailing the customer.",
        tool_calls=[
            planned_call(
                "send_email",
                {
                    "to": order["customer_email"],
                    "subject": f"Your refund for order {refund['order_id']}",
                    "body": body,
                },
            )
        ],
    )


def _finish(messages: Conversation) -> AIMessage:
    refund = _tool_json(messages, "issue_refund") or {}
    email = _tool_json(messages, "send_email") or {}
    return AIMessage(
        content=(
            f"Done: refund {refund.get('refund_id')} of {refund.get('amount_cents')} cents issued "
            f"and the customer was emailed ({email.get('message_id')})."
        )
    )


def refund_script() -> list[ScriptRule]:
    """Look up the order, propose and issue a refund, email the customer, report."""
    return [
        ScriptRule("look_up_order", on_first_turn, _look_up),
        ScriptRule("propose_refund", after_tool("lookup_order"), _propose),
        ScriptRule("email_customer", after_tool("issue_refund"), _notify),
        ScriptRule("report", after_tool("send_email"), _finish),
    ]
