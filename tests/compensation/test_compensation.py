"""Compensation on the real backends: reverse order, exactly once, listing, policies, people."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.backends import Backend
from tests.compensation.saga import ALL_UNDONE, CONFIG, INPUT, World, saga_graph
from tether.approvals import (
    InvalidEditError,
    args_sha256,
    decide,
    expire_due,
    get_approval,
    list_approvals,
)
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


@asynccontextmanager
async def _undo_fails(
    backend: Backend, tmp_path: Path
) -> AsyncIterator[tuple[tuple[Any, Any, World, CompensationReport], Path]]:
    """:func:`_failed` while the payments provider is down (undoing the charge raises until
    the file it yields is removed)."""
    down = tmp_path / "provider-down"
    down.touch()
    async with _failed(backend, tmp_path, failing_undo=down) as saga:
        yield saga, down


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
    async with _undo_fails(durable_backend, tmp_path) as (saga, down):
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
    async with _undo_fails(durable_backend, tmp_path) as (saga, _down):
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


@pytest.mark.parametrize(
    ("reason", "question"),
    [
        (
            "cancelled with rollback: customer withdrew",
            "the run was cancelled with rollback (customer withdrew)",
        ),
        ("cancelled with rollback", "the run was cancelled with rollback"),
    ],
)
async def test_a_rollbacks_request_says_the_run_was_cancelled(
    durable_backend: Backend, tmp_path: Path, reason: str, question: str
) -> None:
    """Not "because the run failed (cancelled with rollback)": the run did not fail."""
    async with durable_backend.open() as saver:
        graph = saga_graph(saver, World(tmp_path / "world.db"), charge="ask")
        with pytest.raises(RuntimeError, match="carrier refused"):
            await graph.ainvoke(INPUT, CONFIG)
        report = await compensate(graph, CONFIG, reason=reason)
        view = await get_approval(saver, report.awaiting[0].approval_id or "")
    assert view.request.why.startswith(f"undo charge because {question}? Approve to undo")


async def _edit(saver: Any, graph: Any, approval_id: str | None, args: dict[str, Any]) -> Any:
    view = await get_approval(saver, approval_id or "")
    return await decide(
        saver,
        "saga",
        view.request.approval_id,
        "edit",
        by="dana",
        args_sha256=view.request.args_sha256,
        edited_args=args,
        resumer=CompensationResumer(graph),
    )


async def test_an_edited_decision_retries_the_undo_with_the_edited_arguments(
    durable_backend: Backend, tmp_path: Path
) -> None:
    async with _undo_fails(durable_backend, tmp_path) as (saga, down):
        saver, graph, world, report = saga
        down.unlink()
        edited = {"order_id": "A1", "amount_cents": 4000}
        await _edit(saver, graph, report.awaiting[0].approval_id, edited)
    assert world.kinds()[-1] == "undo-charge 4000"


async def test_an_edited_undo_that_fails_again_asks_with_the_arguments_it_runs_with(
    durable_backend: Backend, tmp_path: Path
) -> None:
    """The next request shows, and is bound to, the edited arguments its approval runs."""
    down = tmp_path / "provider-down"
    down.touch()
    edited = {"order_id": "A1", "amount_cents": 4000}
    async with _failed(durable_backend, tmp_path, failing_undo=down) as saga:
        saver, graph, world, report = saga
        first = (await get_approval(saver, report.awaiting[0].approval_id or "")).request
        assert first.args == {"order_id": "A1", "amount_cents": 4200}
        again = await _edit(saver, graph, first.approval_id, edited)  # the provider is down
        [waiting] = [e for e in again.values["effects"] if e["status"] == "awaiting a person"]
        second = (await get_approval(saver, waiting["approval_id"])).request
        assert second.approval_id != first.approval_id
        assert second.args == edited
        assert second.args_sha256 == args_sha256(edited)
        down.unlink()
        await _decide(saver, graph, second.approval_id, "approve")
    assert world.kinds()[-1] == "undo-charge 4000"
    assert "undo-charge 4200" not in world.kinds()


def _decide_without_the_graph(backend: Backend, approval_id: str, args: Any) -> str:
    """Edit the request in a process of its own that never built the graph."""
    command = [
        sys.executable,
        "-m",
        "tests.compensation.graphless_decider",
        backend.url,
        json.dumps(backend.options),
        approval_id,
        json.dumps(args),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


async def test_an_edit_is_checked_by_a_process_without_the_graph(
    durable_backend: Backend, tmp_path: Path
) -> None:
    """The request carries its tool's JSON schema: a server or CLI that never loaded the graph
    (no pydantic schema registered) still refuses a bad edit, naming the problem."""
    async with _undo_fails(durable_backend, tmp_path) as (saga, down):
        saver, graph, world, report = saga
        approval_id = report.awaiting[0].approval_id or ""
        request = (await get_approval(saver, approval_id)).request
        assert request.args_json_schema is not None
        assert set(request.args_json_schema["properties"]) == {"order_id", "amount_cents"}
        bad = [
            ({"order_id": "A1", "amount_cents": "lots"}, "amount_cents: 'lots' is not of type"),
            (
                {"order_id": "A1", "amount_cents": 1, "idempotency_key": "mine"},
                "'idempotency_key', which its schema does not have",
            ),
            ({"order_id": "A1"}, "'amount_cents' is a required property"),
        ]
        for args, problem in bad:
            assert problem in _decide_without_the_graph(durable_backend, approval_id, args)
        assert (await get_approval(saver, approval_id)).decision is None  # still pending
        edited = {"order_id": "A1", "amount_cents": 4100}
        assert _decide_without_the_graph(durable_backend, approval_id, edited) == "stored"
        down.unlink()
        await compensate(graph, CONFIG)  # a worker continues it
    assert world.kinds()[-1] == "undo-charge 4100"


async def test_an_edit_naming_an_argument_the_tool_lacks_is_refused(
    durable_backend: Backend, tmp_path: Path
) -> None:
    async with _undo_fails(durable_backend, tmp_path) as (saga, _down):
        saver, graph, _, report = saga
        approval_id = report.awaiting[0].approval_id
        with pytest.raises(InvalidEditError, match="'idempotency_key', which its schema does"):
            await _edit(
                saver,
                graph,
                approval_id,
                {"order_id": "A1", "amount_cents": 1, "idempotency_key": "mine"},
            )
        assert (await get_approval(saver, approval_id or "")).decision is None


def test_a_run_stopped_by_an_expired_approval_is_to_be_compensated(tmp_path: Path) -> None:
    from langchain_core.messages import ToolMessage

    graph = saga_graph(None, World(tmp_path / "world.db"))
    stopped = ToolMessage("stopped", tool_call_id="c1", artifact={"tether_approval_stop": True})
    reason = stopped_run(graph, {"messages": [stopped]})
    assert reason == "an approval expired and its policy stopped the run"
    assert stopped_run(graph, {"messages": [ToolMessage("ok", tool_call_id="c2")]}) is None
