"""The refund agent end to end on every backend: effects once, every step logged."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver

from tests.backends import Backend
from tether.approvals import (
    ApprovalRequest,
    Approvers,
    Stop,
    decide,
    list_approvals,
    requires_approval,
)
from tether.graphs import (
    FakePaymentsProvider,
    ScriptedChatModel,
    ScriptRule,
    after_tool,
    on_first_turn,
    planned_call,
    read_calls,
)
from tether.graphs._refund_scenario import CALLS_FILE, refund_effects, refund_input
from tether.graphs._scripted import Conversation
from tether.graphs.refund import build_refund_graph
from tether.steps import read_steps


def _config(thread: str = "refund-1") -> Any:
    return {"configurable": {"thread_id": thread}}


async def test_refund_agent_end_to_end(backend: Backend, tmp_path: Path) -> None:
    async with backend.open() as saver:
        graph = build_refund_graph(checkpointer=saver, workdir=tmp_path)
        out = await graph.ainvoke(refund_input(), _config())
        messages = out["messages"]
        tools = [m.name for m in messages if isinstance(m, ToolMessage)]
        assert tools == ["lookup_order", "issue_refund", "send_email"]
        refund = json.loads(messages[4].content)
        assert refund["refund_id"] == "re_000001"
        assert refund["amount_cents"] == 4200
        final = messages[-1]
        assert isinstance(final, AIMessage)
        assert not final.tool_calls
        assert "re_000001" in str(final.content)
        assert refund_effects(tmp_path) == {"refunds": 1, "emails": 1}
        steps = await read_steps(saver, "refund-1")
        assert [(s.kind, s.name) for s in steps if s.kind in {"model", "tool"}] == [
            ("model", "scripted"),
            ("tool", "lookup_order"),
            ("model", "scripted"),
            ("tool", "issue_refund"),
            ("model", "scripted"),
            ("tool", "send_email"),
            ("model", "scripted"),
        ]
        calls = read_calls(tmp_path / CALLS_FILE)
        assert len(calls) == 4
        assert [c.input_hash for c in calls] == [s.input_hash for s in steps if s.kind == "model"]


async def test_rebuilding_on_the_same_thread_replays_nothing(
    backend: Backend, tmp_path: Path
) -> None:
    async with backend.open() as saver:
        first = await build_refund_graph(checkpointer=saver, workdir=tmp_path).ainvoke(
            refund_input(), _config()
        )
        again = build_refund_graph(checkpointer=saver, workdir=tmp_path)
        state = await again.aget_state(_config())
        assert state.values["messages"] == first["messages"]
        assert not state.tasks
        assert len(read_calls(tmp_path / CALLS_FILE)) == 4
        assert refund_effects(tmp_path) == {"refunds": 1, "emails": 1}


async def test_unknown_order_issues_nothing(tmp_path: Path) -> None:
    graph = build_refund_graph(checkpointer=InMemorySaver(), workdir=tmp_path)
    out = await graph.ainvoke(refund_input("Order Z-9999 never came, refund it."), _config())
    assert "could not find" in str(out["messages"][-1].content)
    assert refund_effects(tmp_path) == {"refunds": 0, "emails": 0}


def _gate(issue_refund: BaseTool, provider: FakePaymentsProvider) -> BaseTool:
    """Every refund waits for alice; the approver sees the order as it is now."""
    return requires_approval(
        issue_refund,
        approvers=Approvers(users=["alice"]),
        why=lambda a: f"refund {a['amount_cents']} cents on {a['order_id']}",
        expires_in=timedelta(hours=1),
        on_expiry=Stop(),
        observe=lambda a: {"order": asdict(provider.get_order(a["order_id"]))},
    )


@dataclass
class Paused:
    """The gated refund agent, paused at its one refund approval."""

    saver: InMemorySaver
    graph: Any
    world: Path
    request: ApprovalRequest

    async def decide(self, decision: str, **kw: Any) -> list[Any]:
        await decide(
            self.saver, "refund-1", self.request.approval_id, decision,
            graph=self.graph, by="alice", args_sha256=self.request.args_sha256, **kw,
        )  # fmt: skip
        return list((await self.graph.aget_state(_config())).values["messages"])


@pytest.fixture
async def paused(tmp_path: Path) -> Paused:
    saver = InMemorySaver()
    graph = build_refund_graph(checkpointer=saver, workdir=tmp_path, gate_refund=_gate)
    out = await graph.ainvoke(refund_input(), _config())
    (pending,) = out["__interrupt__"]
    (view,) = await list_approvals(saver)
    assert pending.value["approval_id"] == view.request.approval_id
    assert view.request.args == {
        "order_id": "A-1001",
        "amount_cents": 4200,
        "reason": "item arrived damaged",
    }
    assert view.request.observations["order"]["customer_email"] == "ada@example.com"
    assert refund_effects(tmp_path) == {"refunds": 0, "emails": 0}
    return Paused(saver, graph, tmp_path, view.request)


def _refund_result(messages: list[Any]) -> dict[str, Any]:
    told = next(m for m in messages if isinstance(m, ToolMessage) and m.name == "issue_refund")
    result: dict[str, Any] = json.loads(str(told.content))
    return result


async def test_rejected_refund_moves_no_money(paused: Paused) -> None:
    messages = await paused.decide("reject", reason="teapot was fine in the photo")
    assert _refund_result(messages)["status"] == "reject"
    assert "teapot was fine in the photo" in str(messages[-1].content)
    assert refund_effects(paused.world) == {"refunds": 0, "emails": 0}


async def test_approver_can_lower_the_amount(paused: Paused) -> None:
    messages = await paused.decide(
        "edit", edited_args={**paused.request.args, "amount_cents": 2100}, reason="half"
    )
    result = _refund_result(messages)
    assert result["amount_cents"] == 2100
    assert "amount_cents: 4200 -> 2100" in result["approval"]["note"]
    assert "2100 cents issued" in str(messages[-1].content)
    assert refund_effects(paused.world) == {"refunds": 1, "emails": 1}


async def test_approving_unchanged_runs_the_proposal(paused: Paused) -> None:
    messages = await paused.decide("approve")
    assert _refund_result(messages)["amount_cents"] == 4200
    assert refund_effects(paused.world) == {"refunds": 1, "emails": 1}
    assert len(read_calls(paused.world / CALLS_FILE)) == 4  # nothing asked twice


def _two_refunds(messages: Conversation) -> AIMessage:
    return AIMessage(
        content="Refunding both orders.",
        tool_calls=[
            planned_call("issue_refund", {"order_id": o, "amount_cents": c, "reason": "damaged"})
            for o, c in (("A-1001", 4200), ("A-1002", 6900))
        ],
    )


async def test_parallel_refunds_are_separate_approvals(tmp_path: Path) -> None:
    model = ScriptedChatModel(
        rules=[
            ScriptRule("refund_both", on_first_turn, _two_refunds),
            ScriptRule("report", after_tool("issue_refund"), lambda m: AIMessage("done")),
        ]
    )
    saver = InMemorySaver()
    graph = build_refund_graph(checkpointer=saver, workdir=tmp_path, model=model, gate_refund=_gate)
    out = await graph.ainvoke(refund_input(), _config())
    assert len(out["__interrupt__"]) == 2
    views = {v.request.args["order_id"]: v.request for v in await list_approvals(saver)}
    assert sorted(views) == ["A-1001", "A-1002"]
    first = views["A-1002"]
    result = await decide(
        saver, "refund-1", first.approval_id, "approve",
        graph=graph, by="alice", args_sha256=first.args_sha256,
    )  # fmt: skip
    assert [p["approval_id"] for p in result.pending] == [views["A-1001"].approval_id]
    assert refund_effects(tmp_path) == {"refunds": 1, "emails": 0}
    other = views["A-1001"]
    result = await decide(
        saver, "refund-1", other.approval_id, "reject",
        graph=graph, by="alice", args_sha256=other.args_sha256, reason="not damaged",
    )  # fmt: skip
    assert result.finished
    assert refund_effects(tmp_path) == {"refunds": 1, "emails": 0}
