"""The refund agent from the design articles: the reference agent of tether.

A customer asks for a refund. The agent looks the order up, proposes a refund,
issues it through the payments tool, and emails the customer::

    agent ──(tool call)──> tools ──> agent ... ──(no tool call)──> END
      └──(issue_refund)──> approve_refund ──> tools
                                └──(rejected)──> agent

* The model is recorded (:func:`tether.steps.recorded`): after a crash its
  answers are replayed, never asked again.
* ``issue_refund`` takes an idempotency key (:func:`tether.steps.durable_tool`
  gives it the same key on every retry), and the payments provider honours it.
* ``send_email`` cannot take a key, so it runs under an intent record; after a
  crash between claiming and committing, its reconcile hook reads the outbox
  back and reports the email that was already sent instead of sending another.
* ``approve_refund`` is where a person signs off before money moves. With
  ``approver=None`` no sign-off is configured and the node passes the proposal
  through unchanged: that is the caller's explicit choice, not an approval.

The outside world is a :class:`FakePaymentsProvider` in ``workdir``, and the
model is a :class:`ScriptedChatModel` logging its calls to
``workdir/model_calls.log`` unless another chat model is passed, for example
``init_chat_model("openai:gpt-4o-mini")``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command

from tether.graphs.payments import FakeOrder, FakePaymentsError, FakePaymentsProvider
from tether.graphs.refund_scenario import (
    CALLS_FILE,
    DEMO_ORDERS,
    PAYMENTS_FILE,
    RefundState,
    refund_effects,
    refund_input,
    refund_script,
)
from tether.graphs.scripted import ScriptedChatModel
from tether.steps import ReconcileResult, durable_tool, recorded

__all__ = [
    "RefundApprover",
    "RefundDecision",
    "RefundProposal",
    "build_refund_graph",
    "crash_target",
    "refund_tools",
]

SYSTEM_PROMPT = (
    "You are a support agent. Look the order up, propose a refund, issue it with "
    "issue_refund, then email the customer with send_email."
)
PROMPT_VERSION = "refund-v1"


@dataclass(frozen=True)
class RefundProposal:
    """A refund the model wants to issue, as shown to whoever approves it."""

    order_id: str
    amount_cents: int
    reason: str
    tool_call_id: str


@dataclass(frozen=True)
class RefundDecision:
    """An approver's answer: approve (possibly a smaller amount) or reject with a note."""

    approved: bool
    amount_cents: int | None = None
    note: str = ""


RefundApprover = Callable[[RefundProposal], RefundDecision]


def refund_tools(provider: FakePaymentsProvider) -> list[BaseTool]:
    """The agent's three tools, bound to ``provider``."""

    def lookup_order(order_id: str) -> str:
        """Look up an order by id; returns the order as JSON."""
        try:
            return json.dumps(asdict(provider.get_order(order_id)))
        except FakePaymentsError as exc:
            return json.dumps({"error": str(exc)})

    def issue_refund(order_id: str, amount_cents: int, reason: str, idempotency_key: str) -> str:
        """Refund amount_cents on order_id to the customer's original payment method."""
        refund = provider.refund(order_id, amount_cents, idempotency_key=idempotency_key)
        return json.dumps({**asdict(refund), "reason": reason})

    def send_email(to: str, subject: str, body: str) -> str:
        """Send an email to a customer."""
        return json.dumps({"message_id": provider.send_email(to, subject, body), "to": to})

    def email_already_sent(args: dict[str, Any], key: str) -> ReconcileResult | None:
        # After a crash between claim and commit: if the outbox holds this very
        # email, it was sent; report it exactly as send_email would have.
        message_id = provider.find_email(args["to"], args["subject"], args["body"])
        if message_id is None:
            return None
        return ReconcileResult(json.dumps({"message_id": message_id, "to": args["to"]}))

    return [
        durable_tool(lookup_order, safe_to_retry=True),  # a read changes nothing
        durable_tool(issue_refund),
        durable_tool(send_email, reconcile=email_already_sent),
    ]


class _ApproveRefund:
    """The sign-off node: asks ``approver`` about each proposed refund before it runs."""

    def __init__(self, approver: RefundApprover | None) -> None:
        self.approver = approver

    def __call__(self, state: RefundState) -> Any:
        approver = self.approver
        if approver is None:
            # No sign-off configured: the proposal goes ahead as the model made it.
            return Command(goto="tools")
        message = state["messages"][-1]
        assert isinstance(message, AIMessage)  # routed here only after a refund call
        calls, rejected = [], []
        for call in message.tool_calls:
            if call["name"] != "issue_refund":
                calls.append(call)
                continue
            args = call["args"]
            decision = approver(
                RefundProposal(
                    args["order_id"], args["amount_cents"], args["reason"], str(call["id"])
                )
            )
            if not decision.approved:
                rejected.append(
                    ToolMessage(
                        json.dumps({"rejected": True, "reason": decision.note or "not approved"}),
                        tool_call_id=call["id"],
                        name="issue_refund",
                    )
                )
                calls.append(call)
            elif decision.amount_cents not in (None, args["amount_cents"]):
                calls.append({**call, "args": {**args, "amount_cents": decision.amount_cents}})
            else:
                calls.append(call)
        if rejected:
            # Nothing in this turn runs once its refund is refused; the model is told why.
            skipped = [
                ToolMessage(
                    json.dumps({"skipped": "refund in the same turn rejected"}),
                    tool_call_id=c["id"],
                    name=c["name"],
                )
                for c in calls
                if c["id"] not in {m.tool_call_id for m in rejected}
            ]
            return Command(goto="agent", update={"messages": rejected + skipped})
        if calls == message.tool_calls:
            return Command(goto="tools")
        # An approver's edit replaces the proposal (same message id) before it runs.
        edited = message.model_copy(update={"tool_calls": calls})
        return Command(goto="tools", update={"messages": [edited]})


def _route_agent(state: RefundState) -> str:
    last = state["messages"][-1]
    if not isinstance(last, AIMessage) or not last.tool_calls:
        return END
    if any(call["name"] == "issue_refund" for call in last.tool_calls):
        return "approve_refund"
    return "tools"


def build_refund_graph(
    *,
    checkpointer: BaseCheckpointSaver[Any],
    workdir: str | Path,
    model: BaseChatModel | None = None,
    approver: RefundApprover | None = None,
    orders: Sequence[FakeOrder] = DEMO_ORDERS,
) -> Any:
    """Build and compile the refund agent.

    Args:
        checkpointer: Where checkpoints, recorded model calls and tool intents go.
        workdir: Holds the fake payments database and the scripted model's calls log.
        model: The chat model; a :class:`ScriptedChatModel` following the refund
            script by default.
        approver: Decides each proposed refund before it is issued; ``None``
            issues refunds without sign-off.
        orders: Orders the fake shop knows (created or replaced at build time).

    Returns:
        The compiled graph; its input is ``{"messages": [...]}``.
    """
    workdir = Path(workdir)
    provider = FakePaymentsProvider(workdir / PAYMENTS_FILE)
    for order in orders:
        provider.add_order(order)
    tools = refund_tools(provider)
    if model is None:
        model = ScriptedChatModel(rules=refund_script(), calls_file=str(workdir / CALLS_FILE))
    chat = recorded(model, prompt_version=PROMPT_VERSION).bind_tools(tools)

    async def agent(state: RefundState) -> dict[str, Any]:
        reply = await chat.ainvoke([SystemMessage(SYSTEM_PROMPT), *state["messages"]])
        return {"messages": [reply]}

    graph = StateGraph(RefundState)
    graph.add_node("agent", agent)
    graph.add_node("approve_refund", _ApproveRefund(approver), destinations=("tools", "agent"))
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", _route_agent, ["approve_refund", "tools", END])
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)


def crash_target() -> Any:
    """The refund agent as a ``tether crashtest`` target.

    ``tether crashtest tether.graphs.refund:crash_target --url sqlite:///crash.db``
    """
    # Imported here: the crash harness imports this package's scripted model.
    from tether.crashtest.target import CrashTarget

    return CrashTarget(
        build=lambda checkpointer, workdir: build_refund_graph(
            checkpointer=checkpointer, workdir=workdir
        ),
        input=refund_input(),
        effects=refund_effects,
        calls_file=CALLS_FILE,
    )
