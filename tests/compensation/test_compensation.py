"""Compensation on the real backends: reverse order, exactly once, listing, policies, people."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.backends import Backend
from tests.compensation.saga import ALL_UNDONE, CONFIG, INPUT, World, saga_graph
from tether.approvals import decide, expire_due, get_approval, list_approvals
from tether.compensation import (
    CompensationReport,
    CompensationResumer,
    compensate,
    stopped_run,
)
from tether.steps import read_steps


async def _decide(
    saver: Any, graph: Any, approval_id: str | None, decision: str, reason: str | None = None
) -> Any:
    """A person's decision on a compensation request, with every check of an approval."""
    view = await get_approval(saver, approval_id or "")
    return await decide(
        saver,
        "saga",
        view.request.approval_id,
        decision,
        by="dana",
        args_sha256=view.request.args_sha256,
        reason=reason,
        resumer=CompensationResumer(graph),
    )


@asynccontextmanager
async def _failed(
    backend: Backend, tmp_path: Path, config: Any = CONFIG, **options: Any
) -> AsyncIterator[tuple[Any, Any, World, CompensationReport]]:
    """The saga run until it fails, then compensated once: saver, graph, world, report."""
    world = World(tmp_path / "world.db")
    async with backend.open() as saver:
        graph = saga_graph(saver, world, **options)
        with pytest.raises(RuntimeError, match="carrier refused") as failed:
            await graph.ainvoke(INPUT, config)
        yield saver, graph, world, await compensate(graph, config, reason=str(failed.value))


async def test_effects_are_undone_newest_first_and_the_rest_listed(
    durable_backend: Backend, tmp_path: Path
) -> None:
    async with _failed(durable_backend, tmp_path) as saga:
        saver, _graph, world, report = saga
        steps = await read_steps(saver, "saga")
    assert world.kinds() == ALL_UNDONE
    assert [(e.tool, e.status) for e in report.effects] == [
        ("ship", "not undone"),
        ("email", "undone"),
        ("charge", "undone"),
    ]
    assert report.complete
    why = "ship declares no compensate"
    assert report.not_undone[0].why == why
    assert report.to_dict()["not_undone"] == [
        {
            "tool": "ship",
            "step_index": 3,
            "args": {"order_id": "A1"},
            "why": "ship declares no compensate",
        }
    ]
    assert report.to_dict(args=False)["not_undone"] == [
        {"tool": "ship", "step_index": 3, "why": why}
    ]
    assert "args" not in report.to_dict(args=False)["effects"][0]
    # The step log: each compensation names the tool step it undoes.
    tool_steps = {s.index: s.name for s in steps if s.kind == "tool"}
    undone = [(s.name, s.detail["undoes"]) for s in steps if s.kind == "compensation"]
    assert undone == [("email:undone", 2), ("charge:undone", 1)]
    assert tool_steps == {0: "lookup", 1: "charge", 2: "email", 3: "ship"}


async def test_compensating_again_undoes_nothing_twice(
    durable_backend: Backend, tmp_path: Path
) -> None:
    async with _failed(durable_backend, tmp_path) as saga:
        saver, _graph, world, first = saga
    async with durable_backend.open() as saver:  # another process, as after a restart
        again = await compensate(saga_graph(saver, world), CONFIG)
    assert world.kinds().count("undo-charge 4200") == 1
    assert world.kinds().count("undo-email ada@example.com") == 1
    assert [e.status for e in again.effects] == [e.status for e in first.effects]
    assert again.reason == "the carrier refused the parcel"


async def test_a_failing_undo_asks_a_person_who_can_retry_it(
    durable_backend: Backend, tmp_path: Path
) -> None:
    down = tmp_path / "provider-down"
    down.touch()
    async with _failed(durable_backend, tmp_path, failing_undo=down) as saga:
        saver, graph, world, report = saga
        assert [(e.tool, e.status) for e in report.effects] == [
            ("ship", "not undone"),
            ("email", "undone"),
            ("charge", "awaiting a person"),
        ]
        (request,) = await list_approvals(saver, thread_id="saga")
        assert request.request.action == "compensate:charge"
        assert "charge could not be reversed (ConnectionError: payments provider down)" in (
            request.request.why
        )
        # No retry loop: compensating again leaves it waiting, the undo not called.
        again = await compensate(graph, CONFIG)
        assert again.awaiting[0].approval_id == request.request.approval_id
        down.unlink()
        result = await _decide(saver, graph, request.request.approval_id, "approve")
        assert result.finished
        view = await get_approval(saver, request.request.approval_id)
    assert view.status == "approved"
    assert world.kinds()[-1] == "undo-charge 4200"
    assert result.values["undone"] == ["email", "charge"]


async def test_a_person_may_leave_a_failed_undo(durable_backend: Backend, tmp_path: Path) -> None:
    down = tmp_path / "provider-down"
    down.touch()
    async with _failed(durable_backend, tmp_path, failing_undo=down) as saga:
        saver, graph, world, report = saga
        approval_id = report.awaiting[0].approval_id
        await _decide(saver, graph, approval_id, "reject", reason="refunded by hand")
        final = await compensate(graph, CONFIG)
        steps = await read_steps(saver, "saga")
    assert [(e.tool, e.status) for e in final.effects][-1] == ("charge", "not undone")
    assert final.not_undone[-1].why == "left by dana (reject: refunded by hand)"
    assert "undo-charge 4200" not in world.kinds()
    assert [s.name for s in steps if s.kind == "compensation"] == [
        "email:undone",
        "charge:failed",
        "charge:left",
    ]


async def test_policy_none_per_run_undoes_nothing_and_lists_everything(
    durable_backend: Backend, tmp_path: Path
) -> None:
    config = {"configurable": {"thread_id": "saga", "tether_compensation": "none"}}
    async with _failed(durable_backend, tmp_path, config=config) as saga:
        _saver, _graph, world, report = saga
    assert world.kinds() == ["charge", "email", "ship"]
    assert [e.tool for e in report.not_undone] == ["ship", "email", "charge"]
    assert report.complete


async def test_policy_ask_per_tool_waits_for_a_person_before_undoing(
    durable_backend: Backend, tmp_path: Path
) -> None:
    async with _failed(durable_backend, tmp_path, charge="ask") as saga:
        saver, graph, world, report = saga
        assert [(e.tool, e.status) for e in report.effects] == [
            ("ship", "not undone"),
            ("email", "undone"),
            ("charge", "awaiting a person"),
        ]
        assert "undo-charge 4200" not in world.kinds()
        view = await get_approval(saver, report.awaiting[0].approval_id or "")
        assert view.request.why.startswith(
            "undo charge because the run failed (the carrier refused the parcel)?"
        )
        await _decide(saver, graph, view.request.approval_id, "approve")
    assert world.kinds()[-1] == "undo-charge 4200"


async def test_graph_policy_ask_blocks_older_effects_until_decided(
    durable_backend: Backend, tmp_path: Path
) -> None:
    async with _failed(durable_backend, tmp_path, policy="ask") as saga:
        _saver, _graph, world, report = saga
    assert [(e.tool, e.status) for e in report.effects] == [
        ("ship", "not undone"),
        ("email", "awaiting a person"),
        ("charge", "waiting"),
    ]
    assert world.kinds() == ["charge", "email", "ship"]


async def test_an_expired_request_leaves_the_effect_not_undone(
    durable_backend: Backend, tmp_path: Path
) -> None:
    async with _failed(durable_backend, tmp_path, charge="ask") as saga:
        saver, graph, world, _report = saga
        later = datetime.now(UTC) + timedelta(days=8)  # past the 7-day default
        (action,) = await expire_due(saver, resumer=CompensationResumer(graph), now=later)
        final = await compensate(graph, CONFIG)
    assert action.outcome == "stopped"
    assert [(e.tool, e.status) for e in final.effects][-1] == ("charge", "not undone")
    assert final.not_undone[-1].why == "left by tether:expiry (expire)"
    assert "undo-charge 4200" not in world.kinds()


async def test_an_edited_decision_retries_the_undo_with_the_edited_arguments(
    durable_backend: Backend, tmp_path: Path
) -> None:
    down = tmp_path / "provider-down"
    down.touch()
    async with _failed(durable_backend, tmp_path, failing_undo=down) as saga:
        saver, graph, world, report = saga
        down.unlink()
        view = await get_approval(saver, report.awaiting[0].approval_id or "")
        await decide(
            saver,
            "saga",
            view.request.approval_id,
            "edit",
            by="dana",
            args_sha256=view.request.args_sha256,
            edited_args={"order_id": "A1", "amount_cents": 4000},
            resumer=CompensationResumer(graph),
        )
    assert world.kinds()[-1] == "undo-charge 4000"


def test_a_run_stopped_by_an_expired_approval_is_to_be_compensated(tmp_path: Path) -> None:
    from langchain_core.messages import ToolMessage

    graph = saga_graph(None, World(tmp_path / "world.db"))
    stopped = ToolMessage("stopped", tool_call_id="c1", artifact={"tether_approval_stop": True})
    reason = stopped_run(graph, {"messages": [stopped]})
    assert reason == "an approval expired and its policy stopped the run"
    assert stopped_run(graph, {"messages": [ToolMessage("ok", tool_call_id="c2")]}) is None
