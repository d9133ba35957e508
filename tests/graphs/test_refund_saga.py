"""The refund agent's compensation example: refund, email, a failing pickup, then compensation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.backends import Backend
from tether.compensation import compensate, compensating_graph
from tether.graphs import FakePaymentsProvider
from tether.graphs._refund_saga import CourierUnavailableError, saga_effects
from tether.graphs._refund_scenario import PAYMENTS_FILE, refund_input
from tether.graphs.refund import build_refund_graph
from tether.steps import read_steps

CONFIG: Any = {"configurable": {"thread_id": "refund-saga"}}


async def test_the_refund_is_reversed_and_the_customer_told(
    durable_backend: Backend, tmp_path: Path
) -> None:
    async with durable_backend.open() as saver:
        graph = build_refund_graph(checkpointer=saver, workdir=tmp_path, saga=True)
        with pytest.raises(CourierUnavailableError, match="no courier can collect") as failed:
            await graph.ainvoke(refund_input(), CONFIG)
        assert saga_effects(tmp_path) == {"refunds": 1, "reversals": 0, "emails": 1}
        report = await compensate(graph, CONFIG, reason=str(failed.value))
        steps = await read_steps(saver, "refund-saga")
    assert saga_effects(tmp_path) == {"refunds": 1, "reversals": 1, "emails": 2}
    assert [(e.tool, e.status) for e in report.effects] == [
        ("send_email", "not undone"),
        ("issue_refund", "undone"),
    ]
    assert report.not_undone[0].why == "compensation policy 'none'"
    undone = json.loads(report.undone[0].output)
    assert undone["reversal_id"] == "rv_000001"
    provider = FakePaymentsProvider(tmp_path / PAYMENTS_FILE)
    assert (
        provider.find_email(
            "ada@example.com",
            "Your refund for order A-1001 was reversed",
            "Hello, we could not arrange the return of your order, so refund re_000001 of 4200 "
            "cents was reversed (rv_000001). Someone from our team will contact you.",
        )
        == undone["message_id"]
    )
    # The compensation step sits in the log, naming the refund step it undoes.
    refund_step = next(s for s in steps if s.kind == "tool" and s.name == "issue_refund")
    (compensation,) = [s for s in steps if s.kind == "compensation"]
    assert compensation.name == "issue_refund:undone"
    assert compensation.detail["undoes"] == refund_step.index


async def test_the_default_refund_agent_does_not_compensate(tmp_path: Path) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    graph = build_refund_graph(checkpointer=InMemorySaver(), workdir=tmp_path)
    assert not compensating_graph(graph)
    out = await graph.ainvoke(refund_input(), CONFIG)
    assert [m.name for m in out["messages"] if m.type == "tool"] == [
        "lookup_order",
        "issue_refund",
        "send_email",
    ]
