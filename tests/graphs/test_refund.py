"""The refund agent end to end on every backend: effects once, every step logged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from tests.backends import Backend
from tether.graphs import read_calls
from tether.graphs.refund import RefundDecision, RefundProposal, build_refund_graph
from tether.graphs.refund_scenario import CALLS_FILE, refund_effects, refund_input
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


async def test_rejected_refund_moves_no_money(tmp_path: Path) -> None:
    seen: list[RefundProposal] = []

    def reject(proposal: RefundProposal) -> RefundDecision:
        seen.append(proposal)
        return RefundDecision(approved=False, note="teapot was fine in the photo")

    graph = build_refund_graph(checkpointer=InMemorySaver(), workdir=tmp_path, approver=reject)
    out = await graph.ainvoke(refund_input(), _config())
    assert [(p.order_id, p.amount_cents) for p in seen] == [("A-1001", 4200)]
    assert "teapot was fine in the photo" in str(out["messages"][-1].content)
    assert refund_effects(tmp_path) == {"refunds": 0, "emails": 0}


async def test_approver_can_lower_the_amount(tmp_path: Path) -> None:
    def half(proposal: RefundProposal) -> RefundDecision:
        return RefundDecision(approved=True, amount_cents=proposal.amount_cents // 2)

    graph = build_refund_graph(checkpointer=InMemorySaver(), workdir=tmp_path, approver=half)
    out = await graph.ainvoke(refund_input(), _config())
    refund = next(
        json.loads(str(m.content))
        for m in out["messages"]
        if isinstance(m, ToolMessage) and m.name == "issue_refund"
    )
    assert refund["amount_cents"] == 2100
    issue = next(
        m
        for m in out["messages"]
        if isinstance(m, AIMessage) and m.tool_calls and m.tool_calls[0]["name"] == "issue_refund"
    )
    assert issue.tool_calls[0]["args"]["amount_cents"] == 2100
    assert refund_effects(tmp_path) == {"refunds": 1, "emails": 1}


async def test_approving_unchanged_runs_the_proposal(tmp_path: Path) -> None:
    graph = build_refund_graph(
        checkpointer=InMemorySaver(),
        workdir=tmp_path,
        approver=lambda p: RefundDecision(approved=True),
    )
    await graph.ainvoke(refund_input(), _config())
    assert refund_effects(tmp_path) == {"refunds": 1, "emails": 1}
