"""The demo's refund agent: the reference refund agent with an approval gate on the refund.

It reuses the refund agent's pieces (:mod:`tether.graphs.refund`): the scripted
model (recorded), the durable tools and the fake payments provider. What it
adds is the approval gate: ``issue_refund`` is wrapped by
:func:`tether.approvals.requires_approval`, and each tool call runs as its own
task (``Send``), so parallel refunds would each get their own request.

``demo_graph(checkpointer)`` is the factory ``tether approvals`` uses by
default (``--graph tether.demo.graph:demo_graph``). Its fake world (payments
database, model calls log) lives in ``$TETHER_DEMO_DIR`` (default
``./.tether/demo``).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Send

from tether.approvals import Approvers, Escalate, Stop, requires_approval, stopped_by_expiry
from tether.graphs.payments import FakePaymentsProvider
from tether.graphs.refund import PROMPT_VERSION, SYSTEM_PROMPT, refund_tools
from tether.graphs.refund_scenario import (
    CALLS_FILE,
    DEMO_ORDERS,
    PAYMENTS_FILE,
    RefundState,
    refund_script,
)
from tether.graphs.scripted import ScriptedChatModel
from tether.steps import recorded

__all__ = ["APPROVAL_THRESHOLD_CENTS", "DEMO_DIR_ENV", "build_demo_graph", "demo_dir", "demo_graph"]

DEMO_DIR_ENV = "TETHER_DEMO_DIR"
APPROVAL_THRESHOLD_CENTS = 2000


def demo_dir() -> Path:
    """Where the demo's fake world lives: ``$TETHER_DEMO_DIR`` or ``./.tether/demo``."""
    return Path(os.environ.get(DEMO_DIR_ENV) or Path(".tether") / "demo").resolve()


def _order_version(provider: FakePaymentsProvider, order_id: str) -> str:
    order = asdict(provider.get_order(order_id))
    text = json.dumps(order, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def gate_refunds(issue_refund: BaseTool, provider: FakePaymentsProvider) -> BaseTool:
    """``issue_refund`` behind a person's approval for refunds above the threshold."""
    return requires_approval(
        issue_refund,
        when=lambda args: int(args["amount_cents"]) > APPROVAL_THRESHOLD_CENTS,
        approvers=Approvers(users=["dana"], roles=["support-lead"]),
        expires_in=timedelta(hours=24),
        on_expiry=Escalate(
            to=Approvers(roles=["support-manager"]), expires_in=timedelta(hours=8), then=Stop()
        ),
        why=lambda a: (
            f"The customer reports order {a['order_id']} {a['reason']}; the agent proposes "
            f"refunding {a['amount_cents']} cents."
        ),
        affects=lambda a: (
            f"Moves {a['amount_cents']} cents back to the customer's card for order "
            f"{a['order_id']}; cannot be undone."
        ),
        if_denied="no money moves; the agent tells the customer the refund was not issued",
        observe=lambda a: {
            "order": asdict(provider.get_order(a["order_id"])),
            "refund_policy": "damaged items: up to the full order total, approval above "
            f"{APPROVAL_THRESHOLD_CENTS} cents",
        },
        depends_on={"order": lambda a: _order_version(provider, a["order_id"])},
    )


def _route_agent(state: RefundState) -> Any:
    last = state["messages"][-1]
    if not isinstance(last, AIMessage) or not last.tool_calls:
        return END
    # One task per tool call: each gated call pauses on its own interrupt.
    return [
        Send("tools", {"__type": "tool_call_with_context", "tool_call": call, "state": state})
        for call in last.tool_calls
    ]


def _route_tools(state: RefundState) -> str:
    return END if stopped_by_expiry(state["messages"]) else "agent"


def build_demo_graph(*, checkpointer: BaseCheckpointSaver[Any], workdir: str | Path) -> Any:
    """Build the demo refund agent over ``checkpointer``, its fake world in ``workdir``.

    Returns:
        The compiled graph; its input is ``{"messages": [...]}``.
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    provider = FakePaymentsProvider(workdir / PAYMENTS_FILE)
    for order in DEMO_ORDERS:
        provider.add_order(order)
    lookup, issue, email = refund_tools(provider)
    tools = [lookup, gate_refunds(issue, provider), email]
    model = ScriptedChatModel(rules=refund_script(), calls_file=str(workdir / CALLS_FILE))
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
    return graph.compile(checkpointer=checkpointer)


def demo_graph(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    """The default graph factory of ``tether approvals``: the demo agent in :func:`demo_dir`."""
    return build_demo_graph(checkpointer=checkpointer, workdir=demo_dir())
