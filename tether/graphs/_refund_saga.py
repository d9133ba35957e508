"""The refund agent's saga variant: refund, email, then a follow-up that fails, then compensation.

After the refund is issued and the customer emailed, the agent books a
courier to collect the damaged item, and the courier service refuses. The
run fails; compensation takes the refund back and tells the customer, in one
idempotent undo (the reversal is deduplicated on the undo's key; the email is
looked up in the outbox before it is sent). The first email cannot be unsent:
``send_email`` is declared ``compensation="none"`` and is listed as not undone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool

from tether.graphs._payments import FakePaymentsError, FakePaymentsProvider
from tether.graphs._refund_scenario import PAYMENTS_FILE, refund_script
from tether.graphs._scripted import Conversation, ScriptRule, after_tool, planned_call
from tether.steps import durable_tool

__all__ = [
    "CourierUnavailableError",
    "pickup_tool",
    "reverse_refund_hook",
    "saga_effects",
    "saga_script",
]


class CourierUnavailableError(FakePaymentsError):
    """The courier service refused to book a pickup (before doing anything)."""


def reverse_refund_hook(provider: FakePaymentsProvider) -> Any:
    """``compensate`` for ``issue_refund``: reverse the refund, then tell the customer."""

    def reverse_refund(args: dict[str, Any], result: Any, idempotency_key: str) -> str:
        refund = json.loads(str(result))
        reversal_id = provider.reverse_refund(refund["refund_id"], idempotency_key=idempotency_key)
        to = provider.get_order(args["order_id"]).customer_email
        subject = f"Your refund for order {args['order_id']} was reversed"
        body = (
            f"Hello, we could not arrange the return of your order, so refund "
            f"{refund['refund_id']} of {refund['amount_cents']} cents was reversed "
            f"({reversal_id}). Someone from our team will contact you."
        )
        # Told once: a retry after a crash finds the email already in the outbox.
        message_id = provider.find_email(to, subject, body) or provider.send_email(
            to, subject, body
        )
        return json.dumps({"reversal_id": reversal_id, "message_id": message_id, "to": to})

    return reverse_refund


def pickup_tool(provider: FakePaymentsProvider) -> BaseTool:
    """``schedule_pickup``: the follow-up whose courier service always refuses."""

    def schedule_pickup(order_id: str, idempotency_key: str) -> str:
        """Book a courier to collect the damaged item of order_id."""
        # The courier service takes a key, so a booking is never in doubt after a crash.
        provider.get_order(order_id)
        raise CourierUnavailableError(f"no courier can collect order {order_id} this week")

    return durable_tool(schedule_pickup, raises_before_effect=(CourierUnavailableError,))


def _pickup(messages: Conversation) -> AIMessage:
    order_id = next(
        (
            call["args"]["order_id"]
            for m in messages
            if isinstance(m, AIMessage)
            for call in m.tool_calls
            if call["name"] == "issue_refund"
        ),
        "",
    )
    return AIMessage(
        content=f"Customer emailed; booking a courier to collect the item of {order_id}.",
        tool_calls=[planned_call("schedule_pickup", {"order_id": order_id})],
    )


def saga_script() -> list[ScriptRule]:
    """The refund script, with a courier booking (which fails) after the email."""
    rules = [r for r in refund_script() if r.name != "report"]
    return [*rules, ScriptRule("book_pickup", after_tool("send_email"), _pickup)]


def saga_effects(workdir: str | Path) -> dict[str, int]:
    """Refunds, reversals and emails in ``workdir``'s fake world."""
    counts = FakePaymentsProvider(Path(workdir) / PAYMENTS_FILE).counts()
    return {"refunds": counts.refunds, "reversals": counts.reversals, "emails": counts.emails}
