"""Crash targets used only by the tests of the harness itself.

``gated_target`` stops at an interrupt for a person's sign-off, which the
harness answers. ``careless_target`` is the refund agent without tether's durability: a plain
model and plain LangChain tools, the payments call made without an idempotency
key. The harness must catch what it does wrong after crashes.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import interrupt

from tether.crashtest.target import CrashTarget
from tether.graphs.payments import FakePaymentsProvider
from tether.graphs.refund import RefundDecision, RefundProposal, build_refund_graph
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


def _build_careless(checkpointer: BaseCheckpointSaver[Any], workdir: Path) -> Any:
    provider = FakePaymentsProvider(workdir / PAYMENTS_FILE)
    for order in DEMO_ORDERS:
        provider.add_order(order)

    @tool
    def lookup_order(order_id: str) -> str:
        """Look up an order by id."""
        return json.dumps(asdict(provider.get_order(order_id)))

    @tool
    def issue_refund(order_id: str, amount_cents: int, reason: str) -> str:
        """Refund an order, with no idempotency key."""
        return json.dumps({**asdict(provider.refund(order_id, amount_cents)), "reason": reason})

    @tool
    def send_email(to: str, subject: str, body: str) -> str:
        """Send an email."""
        return json.dumps({"message_id": provider.send_email(to, subject, body), "to": to})

    tools = [lookup_order, issue_refund, send_email]
    model = ScriptedChatModel(rules=refund_script(), calls_file=str(workdir / CALLS_FILE))
    chat = model.bind_tools(tools)

    async def agent(state: RefundState) -> dict[str, Any]:
        return {"messages": [await chat.ainvoke(state["messages"])]}

    graph = StateGraph(RefundState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)


def careless_target() -> CrashTarget:
    return CrashTarget(
        build=_build_careless, input=refund_input(), effects=refund_effects, calls_file=CALLS_FILE
    )


not_a_target = 42


def _ask_a_person(proposal: RefundProposal) -> RefundDecision:
    answer = interrupt({"order_id": proposal.order_id, "amount_cents": proposal.amount_cents})
    return RefundDecision(approved=bool(answer["approved"]), note=str(answer.get("note", "")))


def _build_gated(checkpointer: BaseCheckpointSaver[Any], workdir: Path) -> Any:
    return build_refund_graph(checkpointer=checkpointer, workdir=workdir, approver=_ask_a_person)


def gated_target() -> CrashTarget:
    """The refund agent with a person's sign-off (an interrupt) before the refund."""
    return CrashTarget(
        build=_build_gated,
        input=refund_input(),
        effects=refund_effects,
        calls_file=CALLS_FILE,
        answer=lambda value: {"approved": True},
    )


def gated_target_without_answer() -> CrashTarget:
    return CrashTarget(build=_build_gated, input=refund_input(), effects=refund_effects)
