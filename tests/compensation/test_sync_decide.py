"""Deciding a compensation request in-process without an event loop: ``SyncCompensationResumer``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.backends import fresh_backend
from tests.compensation.saga import APPROVERS, CONFIG, INPUT, World, tools
from tests.steps.graphs import State, one_node
from tether.approvals import (
    AlreadyDecidedError,
    ApprovalConfigError,
    decide_sync,
    expire_due_sync,
    list_approvals_sync,
)
from tether.checkpointing import open_checkpointer_sync
from tether.compensation import (
    CompensationConfigError,
    CompensationError,
    CompensationResumer,
    SyncCompensationResumer,
    compensate_sync,
    compensating,
)
from tether.steps import durable_tool


def _sync_saga(saver: Any, world: World, policy: str = "auto", **options: Any) -> Any:
    """The saga of :mod:`tests.compensation.saga` with a sync node: charge, email, ship, fail."""
    charge, email, ship, lookup = tools(world, **options)

    def node(state: State) -> dict[str, Any]:
        charge.invoke({"order_id": "A1", "amount_cents": 4200})
        email.invoke({"to": "ada@example.com"})
        ship.invoke({"order_id": "A1"})
        raise RuntimeError("the carrier refused the parcel")

    every = [charge, email, ship, lookup]
    return compensating(one_node(node, saver), approvers=APPROVERS, policy=policy, tools=every)


@contextmanager
def _failed(url: str, world: World, **options: Any) -> Iterator[Any]:
    """The sync saga on ``url`` run to its failure and compensated once; its graph."""
    with open_checkpointer_sync(url) as saver:
        graph = _sync_saga(saver, world, **options)
        with pytest.raises(RuntimeError, match="carrier refused"):
            graph.invoke(INPUT, CONFIG)
        compensate_sync(graph, CONFIG, reason="the carrier refused the parcel")
        yield graph


def _decide(graph: Any, approval_id: str, sha: str, resumer: Any = None) -> Any:
    return decide_sync(
        graph.checkpointer,
        "saga",
        approval_id,
        "approve",
        by="dana",
        args_sha256=sha,
        resumer=resumer or SyncCompensationResumer(graph),
    )


@pytest.mark.parametrize("name", ["sqlite", "postgres"])
def test_decide_sync_retries_a_failed_undo_once_and_refuses_a_second_decision(
    name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    urls = request.getfixturevalue("servers") if name == "postgres" else {}
    down = tmp_path / "provider-down"
    down.touch()
    world = World(tmp_path / "world.db")
    with (
        fresh_backend(name, urls, tmp_path) as backend,
        _failed(backend.url, world, failing_undo=down) as graph,
    ):
        (pending,) = list_approvals_sync(graph.checkpointer, thread_id="saga")
        approval_id, sha = pending.request.approval_id, pending.request.args_sha256
        down.unlink()
        result = _decide(graph, approval_id, sha)
        assert result.finished
        assert result.values["undone"] == ["email", "charge"]
        assert world.kinds()[-1] == "undo-charge 4200"
        with pytest.raises(AlreadyDecidedError):
            _decide(graph, approval_id, sha)
    assert world.kinds().count("undo-charge 4200") == 1


def test_expire_due_sync_leaves_the_effect_not_undone(tmp_path: Path) -> None:
    world = World(tmp_path / "world.db")
    with _failed(f"sqlite:///{tmp_path / 'c.db'}", world, policy="ask") as graph:
        later = datetime.now(UTC) + timedelta(days=8)
        resumer = SyncCompensationResumer(graph)
        (action,) = expire_due_sync(graph.checkpointer, resumer=resumer, now=later)
        assert action.outcome == "stopped"
        report = compensate_sync(graph, CONFIG)
    assert [(e.tool, e.status) for e in report.effects] == [
        ("ship", "not undone"),
        ("email", "not undone"),
        ("charge", "awaiting a person"),
    ]
    assert report.effects[1].why.startswith("left by tether:expiry (expire")
    assert "undo-email ada@example.com" not in world.kinds()


def test_the_sync_resumer_refuses_what_it_cannot_use(tmp_path: Path) -> None:
    world = World(tmp_path / "world.db")

    async def undo(args: dict[str, Any], result: Any, key: str) -> str:
        return "undone"

    def pay(order_id: str, idempotency_key: str) -> str:
        """Pay."""
        return world.add("pay", idempotency_key)

    paying = durable_tool(pay, compensate=undo)

    def node(state: State) -> dict[str, Any]:
        paying.invoke({"order_id": "A1"})
        raise RuntimeError("the carrier refused the parcel")

    with open_checkpointer_sync(f"sqlite:///{tmp_path / 'c.db'}") as saver:
        with pytest.raises(CompensationConfigError, match="SyncCompensationResumer needs"):
            SyncCompensationResumer(one_node(node, saver))
        graph = compensating(
            one_node(node, saver), approvers=APPROVERS, policy="ask", tools=[paying]
        )
        with pytest.raises(RuntimeError):
            graph.invoke(INPUT, CONFIG)
        compensate_sync(graph, CONFIG, reason="failed")
        (pending,) = list_approvals_sync(saver, thread_id="saga")
        approval_id, sha = pending.request.approval_id, pending.request.args_sha256
        # The async resumer cannot serve decide_sync: refused before anything is stored.
        with pytest.raises(ApprovalConfigError, match="CompensationResumer has async methods"):
            _decide(graph, approval_id, sha, CompensationResumer(graph))
        # With the sync resumer, an async compensate hook is refused by name: the undo
        # fails, and (as any failed undo) goes to a person, saying why.
        result = _decide(graph, approval_id, sha)
        (again,) = result.pending
        assert again["action"] == "pay"
        (failed,) = [e for e in result.values["effects"] if e["tool"] == "pay"]
        assert failed["status"] == "awaiting a person"
        assert f"{CompensationError.__name__}: tool 'pay' has an async compensate" in failed["why"]
    assert world.kinds() == ["pay"]
