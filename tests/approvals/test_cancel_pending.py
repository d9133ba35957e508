"""cancel_pending: a cancelled run's requests are settled as ``cancelled``, exactly once.

On real SQLite and PostgreSQL. The interleavings with a person's decision are
forced with :class:`QueueingResumer`'s hooks: the cancel lands after the
decision's checks and before its put-if-absent, or just after it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.approvals import graphs
from tests.approvals.conftest import PauseFn
from tests.approvals.resumers import QueueingResumer
from tests.backends import Backend
from tether import open_checkpointer_sync
from tether.approvals import (
    AlreadyDecidedError,
    ApprovalConfigError,
    UnknownApprovalError,
    cancel_pending,
    cancel_pending_sync,
    decide,
    expire_due,
    get_approval,
    get_approval_sync,
    list_approvals,
    list_approvals_sync,
    resume_decided,
)

REASON = "run cancelled by the operator"


async def test_a_cancelled_request_leaves_the_inbox_and_refuses_decisions(
    sql_pause: PauseFn,
) -> None:
    paused = await sql_pause()
    cancelled = await cancel_pending(
        paused.saver, [paused.approval_id], by="tether:cancel", reason=REASON
    )
    assert cancelled == [paused.approval_id]
    view = await get_approval(paused.saver, paused.approval_id)
    assert view.status == "cancelled"
    assert view.decision is not None
    assert {
        k: view.decision[k] for k in ("decision", "by", "reason", "args", "decider_source")
    } == {
        "decision": "cancelled",
        "by": "tether:cancel",
        "reason": REASON,
        "args": None,
        "decider_source": "tether",
    }
    assert await list_approvals(paused.saver) == []  # the pending inbox
    assert [v.status for v in await list_approvals(paused.saver, status="cancelled")] == [
        "cancelled"
    ]
    assert await paused.events() == ["requested", "cancelled"]

    with pytest.raises(AlreadyDecidedError, match="cancelled with its run by tether:cancel"):
        await paused.decide("approve")
    assert await paused.log() == []  # nothing resumed: not by the cancel, not by the decision
    # Cancelling again changes nothing, and nothing expires a cancelled request.
    assert await cancel_pending(paused.saver, [paused.approval_id], by="x", reason="y") == []
    assert await expire_due(paused.saver, paused.graph, now=paused.after_expiry()) == []
    assert (await get_approval(paused.saver, paused.approval_id)).decision == view.decision


async def test_the_gate_reads_cancelled_as_a_rejection_with_the_reason(sql_pause: PauseFn) -> None:
    paused = await sql_pause()
    await cancel_pending(paused.saver, [paused.approval_id], by="tether:cancel", reason=REASON)
    # Whatever runs the thread again (here: the recovery path) meets the stored decision.
    result = await resume_decided(paused.saver, paused.approval_id, graph=paused.graph)
    assert result.finished
    log = await paused.log()
    assert log == [
        "reject:-: tether:cancel rejected pay. Reason: run cancelled by the operator. "
        "Do not retry it as it was; the invoice stays unpaid.",
        "after",
    ]


async def test_a_decided_request_is_not_cancelled(sql_pause: PauseFn) -> None:
    paused = await sql_pause()
    await paused.decide("approve")
    assert await cancel_pending(paused.saver, [paused.approval_id], by="x", reason="y") == []
    view = await get_approval(paused.saver, paused.approval_id)
    assert view.status == "approved"
    assert await paused.log() == ["paid 500 to bob (approve)", "after"]


async def test_a_voided_request_is_skipped_and_its_replacement_cancelled(
    sql_pause: PauseFn,
) -> None:
    paused = await sql_pause()
    graphs.VERSIONS["balance"] = 2  # stale: the approval is voided, a fresh request follows
    (fresh,) = (await paused.decide("approve")).pending
    ids = [paused.approval_id, fresh["approval_id"]]
    assert await cancel_pending(paused.saver, ids, by="tether:cancel", reason=REASON) == ids[1:]
    assert (await get_approval(paused.saver, ids[0])).status == "voided"
    assert (await get_approval(paused.saver, ids[1])).status == "cancelled"


# -- exactly one winner against a person's decision ----------------------------------------
async def test_a_cancel_between_the_checks_and_the_store_wins(sql_pause: PauseFn) -> None:
    paused = await sql_pause()
    won: list[list[str]] = []

    async def cancel() -> None:
        won.append(await cancel_pending(paused.saver, [paused.approval_id], by="c", reason=REASON))

    resumer = QueueingResumer(paused.graph, during_check=cancel)
    with pytest.raises(AlreadyDecidedError, match="decided by someone else a moment ago"):
        await paused.decide("approve", resumer=resumer)
    assert won == [[paused.approval_id]]
    assert [c[0] for c in resumer.calls] == ["is_pending"]  # the decision resumed nothing
    assert (await get_approval(paused.saver, paused.approval_id)).status == "cancelled"
    assert await paused.events() == ["requested", "cancelled"]


async def test_a_cancel_after_the_store_loses(sql_pause: PauseFn) -> None:
    paused = await sql_pause()
    lost: list[list[str]] = []

    async def cancel() -> None:
        lost.append(await cancel_pending(paused.saver, [paused.approval_id], by="c", reason=REASON))

    resumer = QueueingResumer(paused.graph, during_resume=cancel)
    await paused.decide("approve", resumer=resumer)
    assert lost == [[]]
    assert (await get_approval(paused.saver, paused.approval_id)).status == "approved"
    await resumer.work()
    assert await paused.log() == ["paid 500 to bob (approve)", "after"]


async def test_concurrent_cancel_and_decision_have_one_winner(sql_pause: PauseFn) -> None:
    paused = await sql_pause()
    deciding = decide(
        paused.saver,
        "t1",
        paused.approval_id,
        "approve",
        graph=paused.graph,
        by="alice",
        args_sha256=paused.args_sha256,
    )
    cancelling = cancel_pending(paused.saver, [paused.approval_id], by="c", reason=REASON)
    decided, cancelled = await asyncio.gather(deciding, cancelling, return_exceptions=True)
    status = (await get_approval(paused.saver, paused.approval_id)).status
    if isinstance(decided, AlreadyDecidedError):
        assert (cancelled, status) == ([paused.approval_id], "cancelled")
        assert await paused.log() == []
    else:
        assert not isinstance(decided, BaseException), decided
        assert (cancelled, status) == ([], "approved")
        assert await paused.log() == ["paid 500 to bob (approve)", "after"]
    assert len([e for e in await paused.events() if e in ("decided", "cancelled")]) == 1


# -- what it refuses -----------------------------------------------------------------------
async def test_an_unknown_id_is_refused_before_anything_is_written(sql_pause: PauseFn) -> None:
    paused = await sql_pause()
    with pytest.raises(UnknownApprovalError, match="no approval request 'apr_nope'"):
        await cancel_pending(paused.saver, [paused.approval_id, "apr_nope"], by="c", reason=REASON)
    assert (await get_approval(paused.saver, paused.approval_id)).status == "pending"


@pytest.mark.parametrize(
    ("ids", "by", "reason", "message"),
    [
        ("apr_1", "c", "r", "must be a list of approval ids, got 'apr_1'"),
        (None, "c", "r", "must be a list of approval ids, got None"),
        (["apr_1", ""], "c", "r", "approval ids must be non-empty strings"),
        (["apr_1", 7], "c", "r", "approval ids must be non-empty strings"),
        (["apr_1"], "", "r", "needs by= naming who cancels"),
        (["apr_1"], None, "r", "needs by= naming who cancels"),
        (["apr_1"], "c", "", "needs reason="),
        (["apr_1"], "c", None, "needs reason="),
    ],
)
async def test_bad_arguments_are_named(
    sql_pause: PauseFn, ids: Any, by: Any, reason: Any, message: str
) -> None:
    paused = await sql_pause()
    with pytest.raises(ApprovalConfigError, match=message):
        await cancel_pending(paused.saver, ids, by=by, reason=reason)
    with pytest.raises(ApprovalConfigError, match=message):
        cancel_pending_sync(paused.saver, ids, by=by, reason=reason)
    assert (await get_approval(paused.saver, paused.approval_id)).status == "pending"


# -- the sync twin -------------------------------------------------------------------------
def test_the_sync_twin(sql_backend: Backend) -> None:
    with open_checkpointer_sync(sql_backend.url) as saver:
        graph = graphs.parallel_graph(saver)
        graph.invoke({"amount": 0, "log": []}, {"configurable": {"thread_id": "t1"}})
        ids = [v.request.approval_id for v in list_approvals_sync(saver)]
        assert len(ids) == 2
        twice = [*ids, ids[0]]  # a repeated id is cancelled once
        assert cancel_pending_sync(saver, twice, by="tether:deadline", reason="late") == ids
        assert [get_approval_sync(saver, i).status for i in ids] == ["cancelled", "cancelled"]
        assert list_approvals_sync(saver) == []
