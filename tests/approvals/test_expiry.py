"""Expiry policies: escalate, stop, safe alternative; a timeout never approves."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from tests.approvals import graphs
from tests.approvals.conftest import PauseFn
from tether.approvals import (
    AlreadyDecidedError,
    ApproverNotAllowedError,
    expire_due,
    get_approval,
)


async def test_nothing_expires_before_its_time(pause: PauseFn) -> None:
    paused = await pause()
    before = paused.after_expiry(-timedelta(seconds=2))
    assert await expire_due(paused.saver, paused.graph, now=before) == []
    assert (await get_approval(paused.saver, paused.approval_id)).status == "pending"


async def test_stop_ends_the_run_with_its_partial_result(pause: PauseFn) -> None:
    paused = await pause()
    actions = await expire_due(paused.saver, paused.graph, now=paused.after_expiry())
    assert [(a.approval_id, a.outcome) for a in actions] == [(paused.approval_id, "stopped")]
    log = await paused.log()
    assert len(log) == 1
    assert log[0].startswith("expire:stop: Nobody decided on pay before")
    assert "timeouts never approve" in log[0]
    state = await paused.graph.aget_state(paused.config)
    assert not state.next  # ended; "after" never ran
    view = await get_approval(paused.saver, paused.approval_id)
    assert view.status == "expired"
    assert view.decision is not None
    assert view.decision["by"] == "tether:expiry"
    assert await paused.events() == ["requested", "decided"]
    with pytest.raises(AlreadyDecidedError):
        await paused.decide("approve", by="alice")


async def test_safe_alternative_runs_the_proposed_alternative(pause: PauseFn) -> None:
    paused = await pause(graphs.alternative_graph, amount=500)
    actions = await expire_due(paused.saver, paused.graph, now=paused.after_expiry())
    assert [a.outcome for a in actions] == ["safe_alternative"]
    assert await paused.log() == ["paid 1 to bob (expire)", "after"]


async def test_escalate_hands_over_then_stops(pause: PauseFn) -> None:
    paused = await pause(graphs.escalating_graph)
    first = paused.after_expiry()
    actions = await expire_due(paused.saver, paused.graph, now=first)
    assert [a.outcome for a in actions] == ["escalated"]
    view = await get_approval(paused.saver, paused.approval_id)
    assert view.status == "pending"
    assert view.request.approvers.users == ("carol",)
    assert datetime.fromisoformat(view.request.expires_at) == (first + timedelta(hours=2)).replace(
        microsecond=0
    )
    assert len(view.request.escalations) == 1
    assert await paused.events() == ["requested", "escalated"]
    with pytest.raises(ApproverNotAllowedError, match="'alice'"):
        await paused.decide("approve", by="alice", now=first)
    # Nobody acts in the escalation window either: the chain's next policy (stop) applies.
    second = first + timedelta(hours=2, seconds=1)
    actions = await expire_due(paused.saver, paused.graph, now=second)
    assert [a.outcome for a in actions] == ["stopped"]
    assert (await paused.log())[0].startswith("expire:stop:")


async def test_the_escalated_approver_may_decide(pause: PauseFn) -> None:
    paused = await pause(graphs.escalating_graph)
    first = paused.after_expiry()
    await expire_due(paused.saver, paused.graph, now=first)
    result = await paused.decide("approve", by="carol", now=first + timedelta(minutes=5))
    assert result.finished
    assert await paused.log() == ["paid 500 to bob (approve)", "after"]
