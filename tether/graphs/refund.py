"""The refund agent from the design articles: the reference agent of tether.

A customer asks for a refund. The agent looks the order up, proposes a refund,
issues it through the payments tool, and emails the customer::

    agent ──(one Send per tool call)──> tools ──> agent ... ──(no tool call)──> END
                                          └──(approval expired, policy Stop)──> END

* The model is recorded (:func:`tether.steps.recorded`): after a crash its
  answers are replayed, never asked again.
* ``issue_refund`` takes an idempotency key (:func:`tether.steps.durable_tool`
  gives it the same key on every retry), and the payments provider honours it.
* ``send_email`` cannot take a key, so it runs under an intent record; after a
  crash between claiming and committing, its reconcile hook reads the outbox
  back and reports the email that was already sent instead of sending another.
* ``gate_refund`` is where a person signs off before money moves: it wraps
  ``issue_refund``, normally with :func:`tether.approvals.requires_approval`,
  so a refund waits on a stored approval request that is decided with
  :func:`tether.approvals.decide` (approve, edit the amount, or reject). Each
  tool call runs as its own task, so parallel refunds are separate requests.
  With ``gate_refund=None`` refunds are issued without sign-off: that is the
  caller's explicit choice, not an approval.

The outside world is a :class:`FakePaymentsProvider` in ``workdir``, and the
model is a :class:`ScriptedChatModel` logging its calls to
``workdir/model_calls.log`` unless another chat model is passed, for example
``init_chat_model("openai:gpt-4o-mini")``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Send

from tether.approvals import Approvers, stopped_by_expiry
from tether.compensation import compensating
from tether.graphs._payments import FakeOrder, FakePaymentsError, FakePaymentsProvider
from tether.graphs._refund_saga import (
    pickup_tool,
    reverse_refund_hook,
    saga_effects,
    saga_script,
)
from tether.graphs._refund_scenario import (
    CALLS_FILE,
    DEMO_ORDERS,
    PAYMENTS_FILE,
    RefundState,
    refund_effects,
    refund_input,
    refund_script,
)
from tether.graphs._scripted import ScriptedChatModel
from tether.steps import ReconcileResult, durable_tool, recorded

__all__ = [
    "RefundGate",
    "build_refund_graph",
    "crash_target",
    "refund_tools",
    "saga_crash_target",
]

SYSTEM_PROMPT = (
    "You are a support agent. Look the order up, propose a refund, issue it with "
    "issue_refund, then email the customer with send_email."
)
PROMPT_VERSION = "refund-v1"


RefundGate = Callable[[BaseTool, FakePaymentsProvider], BaseTool]
"""Wraps the ``issue_refund`` tool (given the payments provider, to read orders
for the approver) in an approval gate, e.g. with :func:`tether.approvals.requires_approval`."""


def refund_tools(provider: FakePaymentsProvider, *, saga: bool = False) -> list[BaseTool]:
    """The agent's three tools, bound to ``provider``.

    With ``saga``: ``issue_refund`` can be compensated (the refund reversed and
    the customer told), ``send_email`` is declared impossible to undo, and a
    fourth tool, ``schedule_pickup``, fails (see :mod:`._refund_saga`).
    """

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

    if not saga:
        return [
            durable_tool(lookup_order, safe_to_retry=True),  # a read changes nothing
            durable_tool(issue_refund),
            durable_tool(send_email, reconcile=email_already_sent),
        ]
    return [
        durable_tool(lookup_order, safe_to_retry=True, read_only=True),
        durable_tool(issue_refund, compensate=reverse_refund_hook(provider)),
        # An email cannot be unsent: listed as not undone for a person to see.
        durable_tool(send_email, reconcile=email_already_sent, compensation="none"),
        pickup_tool(provider),
    ]


def _route_agent(state: RefundState) -> Any:
    last = state["messages"][-1]
    if not isinstance(last, AIMessage) or not last.tool_calls:
        return END
    # One task per tool call: each gated call pauses on its own interrupt and is
    # decided on its own, even when the model asks for several in one turn.
    return [
        Send("tools", {"__type": "tool_call_with_context", "tool_call": call, "state": state})
        for call in last.tool_calls
    ]


def _route_tools(state: RefundState) -> str:
    # An approval that expired under a Stop policy ends the run: the model is not
    # asked again about an action nobody approved in time.
    return END if stopped_by_expiry(state["messages"]) else "agent"


def build_refund_graph(
    *,
    checkpointer: BaseCheckpointSaver[Any],
    workdir: str | Path,
    model: BaseChatModel | None = None,
    gate_refund: RefundGate | None = None,
    orders: Sequence[FakeOrder] = DEMO_ORDERS,
    saga: bool = False,
) -> Any:
    """Build and compile the refund agent.

    Args:
        checkpointer: Where checkpoints, recorded model calls and tool intents go.
        workdir: Holds the fake payments database and the scripted model's calls log.
        model: The chat model; a :class:`ScriptedChatModel` following the refund
            script by default.
        gate_refund: Wraps ``issue_refund`` in an approval gate, given the tool
            and the payments provider; ``None`` issues refunds without sign-off.
        orders: Orders the fake shop knows (created or replaced at build time).
        saga: The compensation example: after the email the agent books a
            courier, which fails; the graph is :func:`tether.compensation.compensating`
            (approvers: role ``support-lead``), so the failed run's refund is
            reversed and the customer told (``compensate(graph, config, ...)``,
            or a worker does it).

    Returns:
        The compiled graph; its input is ``{"messages": [...]}``.
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    provider = FakePaymentsProvider(workdir / PAYMENTS_FILE)
    for order in orders:
        provider.add_order(order)
    lookup, issue, email, *follow_up = refund_tools(provider, saga=saga)
    tools = [lookup, issue if gate_refund is None else gate_refund(issue, provider), email]
    tools += follow_up
    if model is None:
        script = saga_script() if saga else refund_script()
        model = ScriptedChatModel(rules=script, calls_file=str(workdir / CALLS_FILE))
    chat = recorded(model, prompt_version=PROMPT_VERSION).bind_tools(tools)

    async def agent(state: RefundState) -> dict[str, Any]:
        reply = await chat.ainvoke([SystemMessage(SYSTEM_PROMPT), *state["messages"]])
        return {"messages": [reply]}

    graph = StateGraph(RefundState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", _route_agent, ["tools", END])
    graph.add_conditional_edges("tools", _route_tools, ["agent", END])
    compiled = graph.compile(checkpointer=checkpointer)
    if not saga:
        return compiled
    return compensating(compiled, approvers=Approvers(roles=["support-lead"]))


def crash_target() -> Any:
    """The refund agent as a ``tether crashtest`` target.

    ``tether crashtest tether.graphs.refund:crash_target --url sqlite:///crash.db``
    """
    # Imported here: the crash harness imports this package's scripted model.
    from tether.crashtest import CrashTarget

    return CrashTarget(
        build=lambda checkpointer, workdir: build_refund_graph(
            checkpointer=checkpointer, workdir=workdir
        ),
        input=refund_input(),
        effects=refund_effects,
        calls_file=CALLS_FILE,
    )


def saga_crash_target() -> Any:
    """The refund agent's compensation example as a ``tether crashtest`` target.

    The run fails after the refund and the email; the harness compensates it
    (the refund reversed, the customer told) and kills it at every boundary of
    the compensation too. ``reversals`` missing from a resumed run counts as a
    missing compensation.

    ``tether crashtest tether.graphs.refund:saga_crash_target --url sqlite:///crash.db``
    """
    from tether.crashtest import CrashTarget

    return CrashTarget(
        build=lambda checkpointer, workdir: build_refund_graph(
            checkpointer=checkpointer, workdir=workdir, saga=True
        ),
        input=refund_input(),
        effects=saga_effects,
        calls_file=CALLS_FILE,
        compensate=True,
        compensations=("reversals",),
    )
