"""Gated tools: the risk policy, and decisions reaching the agent as observations."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Send

from tests.approvals import graphs
from tests.backends import Backend
from tether.approvals import (
    Alternative,
    ApprovalView,
    SafeAlternative,
    decide,
    expire_due,
    list_approvals,
    requires_approval,
)
from tether.demo.graph import build_demo_graph
from tether.graphs._payments import FakePaymentsProvider
from tether.graphs._refund_scenario import CALLS_FILE, PAYMENTS_FILE, RefundState, refund_input
from tether.graphs._scripted import read_calls
from tether.steps import read_steps

CONFIG: RunnableConfig = {"configurable": {"thread_id": "t1"}}


@dataclass
class Refund:
    saver: BaseCheckpointSaver[Any]
    graph: Any
    world: Path
    view: ApprovalView

    async def messages(self) -> list[Any]:
        return list((await self.graph.aget_state(CONFIG)).values["messages"])

    def refunds(self) -> int:
        return FakePaymentsProvider(self.world / PAYMENTS_FILE).counts().refunds


@pytest.fixture
async def refund(backend: Backend, tmp_path: Path) -> AsyncIterator[Refund]:
    """The demo refund agent, paused at its refund approval."""
    async with backend.open() as saver:
        graph = build_demo_graph(checkpointer=saver, workdir=tmp_path / "world")
        await graph.ainvoke(refund_input(), CONFIG)
        (view,) = await list_approvals(saver)
        yield Refund(saver, graph, tmp_path / "world", view)


async def test_reject_is_an_observation_the_agent_adapts_to(refund: Refund) -> None:
    request = refund.view.request
    await decide(
        refund.saver, "t1", request.approval_id, "reject",
        graph=refund.graph, by="dana", args_sha256=request.args_sha256,
        reason="a replacement was already shipped",
    )  # fmt: skip
    messages = await refund.messages()
    told = next(m for m in messages if isinstance(m, ToolMessage) and m.name == "issue_refund")
    result = json.loads(str(told.content))
    assert result["status"] == "reject"
    assert result["reason"] == "a replacement was already shipped"
    assert "Do not retry it as it was" in result["note"]
    assert messages[-1].content == "The refund was not issued: a replacement was already shipped"
    assert refund.refunds() == 0
    calls = read_calls(refund.world / CALLS_FILE)
    assert [c.rule for c in calls] == ["look_up_order", "propose_refund", "email_customer"]


async def test_edit_runs_the_edited_refund_and_the_agent_is_told(refund: Refund) -> None:
    request = refund.view.request
    await decide(
        refund.saver, "t1", request.approval_id, "edit",
        graph=refund.graph, by="erin", roles=["support-lead"], args_sha256=request.args_sha256,
        edited_args={**request.args, "amount_cents": 2500}, reason="partial",
    )  # fmt: skip
    messages = await refund.messages()
    told = next(m for m in messages if isinstance(m, ToolMessage) and m.name == "issue_refund")
    result = json.loads(str(told.content))
    assert result["amount_cents"] == 2500
    assert result["approval"]["decision"] == "edit"
    assert "amount_cents: 4200 -> 2500" in result["approval"]["note"]
    assert refund.refunds() == 1
    assert "2500 cents issued" in messages[-1].content
    steps = await read_steps(refund.saver, "t1")  # audit steps sit in the one step log
    audits = [(s.name, s.output["by"]) for s in steps if s.kind == "approval"]
    assert audits == [
        ("issue_refund:requested", None),
        ("issue_refund:decided", "erin"),
        ("issue_refund:cleared", None),
    ]
    assert [s.kind for s in steps] == [
        "model", "tool", "model", "approval", "approval", "approval", "tool", "model", "tool",
        "model",
    ]  # fmt: skip


async def test_stop_on_expiry_ends_the_run_without_the_refund(refund: Refund) -> None:
    first = datetime.fromisoformat(refund.view.request.expires_at) + timedelta(seconds=1)
    assert [a.outcome for a in await expire_due(refund.saver, refund.graph, now=first)] == [
        "escalated"
    ]
    later = first + timedelta(hours=9)
    assert [a.outcome for a in await expire_due(refund.saver, refund.graph, now=later)] == [
        "stopped"
    ]
    state = await refund.graph.aget_state(CONFIG)
    assert not state.next
    last = state.values["messages"][-1]
    assert isinstance(last, ToolMessage)  # the model was not asked again
    assert json.loads(str(last.content))["policy"] == "stop"
    assert refund.refunds() == 0
    assert len(read_calls(refund.world / CALLS_FILE)) == 2


def _pay_graph(saver: BaseCheckpointSaver[Any], **gate: Any) -> Any:
    @tool
    def pay(to: str, amount: int) -> str:
        """Pay someone."""
        return json.dumps({"paid": amount, "to": to})

    gated = requires_approval(
        pay,
        approvers=graphs.APPROVERS,
        why=lambda a: f"pay {a['amount']}",
        expires_in=timedelta(hours=1),
        **{"on_expiry": "stop", **gate},
    )

    def call(state: RefundState) -> dict[str, Any]:
        amounts = [int(a) for a in str(state["messages"][-1].content).split(",")]
        calls = [
            {"name": "pay", "args": {"to": "bob", "amount": amount}, "id": f"c{i + 1}"}
            for i, amount in enumerate(amounts)
        ]
        return {"messages": [AIMessage("", tool_calls=calls)]}

    def dispatch(state: RefundState) -> list[Send]:  # one task per tool call
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        return [
            Send("tools", {"__type": "tool_call_with_context", "tool_call": c, "state": state})
            for c in last.tool_calls
        ]

    builder = StateGraph(RefundState)
    builder.add_node("call", call)
    builder.add_node("tools", ToolNode([gated]))
    builder.add_edge(START, "call")
    builder.add_conditional_edges("call", dispatch, ["tools"])
    builder.add_edge("tools", END)
    return builder.compile(checkpointer=saver)


async def test_parallel_tool_calls_are_separate_approvals(backend: Backend) -> None:
    async with backend.open() as saver:
        graph = _pay_graph(saver)
        await graph.ainvoke({"messages": [("user", "500,700")]}, CONFIG)
        views = {v.request.key: v.request for v in await list_approvals(saver)}
        assert sorted(views) == ["c1", "c2"]
        result = await decide(
            saver, "t1", views["c2"].approval_id, "reject",
            graph=graph, by="alice", args_sha256=views["c2"].args_sha256, reason="twice?",
        )  # fmt: skip
        assert [p["key"] for p in result.pending] == ["c1"]
        result = await decide(
            saver, "t1", views["c1"].approval_id, "approve",
            graph=graph, by="alice", args_sha256=views["c1"].args_sha256,
        )  # fmt: skip
        assert result.finished
        told = {
            m.tool_call_id: json.loads(str(m.content))
            for m in (await graph.aget_state(CONFIG)).values["messages"]
            if isinstance(m, ToolMessage)
        }
        assert told["c1"] == {"paid": 500, "to": "bob"}
        assert told["c2"]["status"] == "reject"
        assert told["c2"]["reason"] == "twice?"


async def test_the_risk_policy_decides_when_to_ask(backend: Backend) -> None:
    async with backend.open() as saver:
        graph = _pay_graph(saver, when=lambda args: args["amount"] > 100)
        small = await graph.ainvoke(
            {"messages": [("user", "50")]}, {"configurable": {"thread_id": "small"}}
        )
        assert json.loads(str(small["messages"][-1].content)) == {"paid": 50, "to": "bob"}
        big = await graph.ainvoke(
            {"messages": [("user", "500")]}, {"configurable": {"thread_id": "big"}}
        )
        assert "__interrupt__" in big
        (view,) = await list_approvals(saver)
        assert view.request.key == "c1"  # keyed by the tool call
        assert view.request.args == {"to": "bob", "amount": 500}
        assert view.request.why == "pay 500"


async def test_safe_alternative_of_a_tool(backend: Backend) -> None:
    async with backend.open() as saver:
        graph = _pay_graph(
            saver,
            on_expiry=SafeAlternative(),
            alternative=lambda a: Alternative(
                "pay", {**a, "amount": 100}, "pay what needs no sign-off"
            ),
        )
        await graph.ainvoke({"messages": [("user", "500")]}, CONFIG)
        (view,) = await list_approvals(saver)
        later = datetime.fromisoformat(view.request.expires_at) + timedelta(seconds=1)
        assert [a.outcome for a in await expire_due(saver, graph, now=later)] == [
            "safe_alternative"
        ]
        result = json.loads(str((await graph.aget_state(CONFIG)).values["messages"][-1].content))
        assert result["paid"] == 100
        assert result["approval"]["policy"] == "safe_alternative"
