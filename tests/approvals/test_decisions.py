"""Decisions: each check has its own error, nothing is written on a refusal, one resume."""

from __future__ import annotations

import asyncio

import pytest

from tests.approvals import graphs
from tests.approvals.conftest import Paused, PauseFn
from tether.approvals import (
    DECISION_KIND,
    AlreadyDecidedError,
    ApprovalConfigError,
    ApprovalExpiredError,
    ApprovalNotPendingError,
    ApproverNotAllowedError,
    ArgsHashMismatchError,
    InvalidEditError,
    UnknownApprovalError,
    args_sha256,
    decide,
    get_approval,
)
from tether.store import store_for


async def _unchanged(paused: Paused) -> None:
    """Nothing was written: no decision, no audit step beyond the request, still paused."""
    assert await store_for(paused.saver).get(DECISION_KIND, paused.approval_id) is None
    assert await paused.events() == ["requested"]
    assert (await get_approval(paused.saver, paused.approval_id)).status == "pending"
    state = await paused.graph.aget_state(paused.config)
    assert [i.value["approval_id"] for i in state.interrupts] == [paused.approval_id]


async def test_request_payload_holds_what_an_approver_needs(pause: PauseFn) -> None:
    paused = await pause(amount=500)
    state = await paused.graph.aget_state(paused.config)
    payload = state.interrupts[0].value
    assert payload["action"] == "pay"
    assert payload["args"] == {"to": "bob", "amount": 500}
    assert payload["args_sha256"] == args_sha256({"amount": 500, "to": "bob"})
    assert payload["observations"] == {"balance_cents": 100}
    assert payload["observations_sha256"] == args_sha256({"balance_cents": 100})
    assert payload["approvers"] == {"users": ["alice"], "roles": ["finance"]}
    assert payload["depends_on"] == {"balance": 1}
    assert payload["on_expiry"] == {"policy": "stop"}
    assert payload["why"]
    assert payload["affects"]
    assert payload["if_denied"]
    assert payload["expires_at"] > payload["requested_at"]
    assert payload == paused.view.request.payload()


async def test_approve_runs_once_with_the_shown_args_and_audits(pause: PauseFn) -> None:
    paused = await pause(amount=500)
    result = await paused.decide("approve", by="alice")
    assert result.finished
    assert result.pending == []
    assert await paused.log() == ["paid 500 to bob (approve)", "after"]
    assert await paused.events() == ["requested", "decided", "cleared"]
    steps = await store_for(paused.saver).steps("t1")
    decided = next(s["output"] for s in steps if s["output"].get("event") == "decided")
    assert decided["by"] == "alice"
    assert decided["outcome"] == "approve"
    assert decided["args_sha256"] == paused.args_sha256
    assert decided["observations_sha256"] == paused.view.request.observations_sha256
    assert all(s["kind"] == "approval" and s["started_at"] > 0 for s in steps)
    assert (await get_approval(paused.saver, paused.approval_id)).status == "approved"


async def test_a_role_holder_may_decide(pause: PauseFn) -> None:
    paused = await pause()
    result = await paused.decide("approve", by="erin", roles=["finance"])
    assert result.finished


async def test_not_allowed(pause: PauseFn) -> None:
    paused = await pause()
    with pytest.raises(ApproverNotAllowedError, match=r"'mallory'.*may not decide"):
        await paused.decide("approve", by="mallory", roles=["intern"])
    await _unchanged(paused)


async def test_expired(pause: PauseFn) -> None:
    paused = await pause()
    with pytest.raises(ApprovalExpiredError, match=r"expired at .*tether approvals expire"):
        await paused.decide("approve", by="alice", now=paused.after_expiry())
    await _unchanged(paused)


async def test_args_hash_mismatch(pause: PauseFn) -> None:
    paused = await pause()
    other = args_sha256({"to": "bob", "amount": 5000})
    with pytest.raises(ArgsHashMismatchError, match="tether approvals show"):
        await paused.decide("approve", by="alice", args_sha256=other)
    await _unchanged(paused)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("reason", "ok \ud800", "reason of a decision is not valid Unicode text"),
        ("reason", "ok \x00", "reason of a decision contains a NUL"),
        ("by", "ali\udc80ce", "by of a decision is not valid Unicode text"),
    ],
)
async def test_text_no_store_can_keep_is_refused_before_anything_is_written(
    pause: PauseFn, field: str, value: str, message: str
) -> None:
    """A decision stored, then refused by the resume's write, left its run waiting for good."""
    paused = await pause()
    with pytest.raises(ApprovalConfigError, match=message):
        await paused.decide("approve", **{"by": "alice", field: value})
    await _unchanged(paused)
    assert (await paused.decide("approve", by="alice", reason="ok")).finished


async def test_already_decided_does_not_resume_again(pause: PauseFn) -> None:
    paused = await pause()
    await paused.decide("approve")
    with pytest.raises(AlreadyDecidedError, match="already decided \\(approve by alice"):
        await paused.decide("reject")
    assert await paused.log() == ["paid 500 to bob (approve)", "after"]


async def test_concurrent_double_submission_resumes_exactly_once(pause: PauseFn) -> None:
    paused = await pause()

    async def submit(by: str, roles: list[str]) -> object:
        return await paused.decide("approve", by=by, roles=roles)

    outcomes = await asyncio.gather(
        submit("alice", []), submit("erin", ["finance"]), return_exceptions=True
    )
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(errors) == 1, outcomes
    assert isinstance(errors[0], AlreadyDecidedError), outcomes
    assert await paused.log() == ["paid 500 to bob (approve)", "after"]
    assert (await paused.events()).count("decided") == 1


async def test_unknown_approval_and_wrong_thread(pause: PauseFn) -> None:
    paused = await pause()
    kw = {"graph": paused.graph, "by": "alice", "args_sha256": paused.args_sha256}
    with pytest.raises(UnknownApprovalError, match="no approval request 'apr_nope'"):
        await decide(paused.saver, "t1", "apr_nope", "approve", **kw)
    with pytest.raises(UnknownApprovalError, match="in thread 'other'"):
        await decide(paused.saver, "other", paused.approval_id, "approve", **kw)
    with pytest.raises(UnknownApprovalError):
        await get_approval(paused.saver, "apr_nope")
    await _unchanged(paused)


async def test_malformed_edit_is_refused_before_anything_is_written(pause: PauseFn) -> None:
    paused = await pause()
    with pytest.raises(InvalidEditError, match="amount: Input should be greater than 0"):
        await paused.decide("edit", edited_args={"to": "bob", "amount": -3})
    with pytest.raises(InvalidEditError, match="amount: Input should be a valid integer"):
        await paused.decide("edit", edited_args={"to": "bob", "amount": "lots"})
    with pytest.raises(InvalidEditError, match="must be a JSON object"):
        await paused.decide("edit", edited_args=[1])
    await _unchanged(paused)


async def test_edit_runs_the_edited_args_and_tells_the_agent(pause: PauseFn) -> None:
    paused = await pause(amount=500)
    result = await paused.decide(
        "edit", by="alice", edited_args={"to": "bob", "amount": 250}, reason="half now"
    )
    assert result.decision["args_sha256"] == args_sha256({"to": "bob", "amount": 250})
    assert result.decision["args_sha256"] != paused.args_sha256
    assert await paused.log() == ["paid 250 to bob (edit)", "after"]
    view = await get_approval(paused.saver, paused.approval_id)
    assert view.status == "edited"
    assert view.decision is not None
    assert view.decision["args"] == {"to": "bob", "amount": 250}


async def test_reject_reaches_the_agent_as_an_observation(pause: PauseFn) -> None:
    paused = await pause()
    await paused.decide("reject", by="alice", reason="duplicate invoice")
    log = await paused.log()
    assert log[0].startswith("reject:-: alice rejected pay. Reason: duplicate invoice.")
    assert "Do not retry it as it was" in log[0]
    assert "the invoice stays unpaid" in log[0]
    assert not any(entry.startswith("paid") for entry in log)


async def test_a_run_not_paused_there_is_refused(pause: PauseFn) -> None:
    paused = await pause()
    other_graph = graphs.parallel_graph(paused.saver)  # not the graph of this thread
    await paused.graph.aupdate_state(paused.config, {"log": ["moved on"]}, as_node="pay")
    with pytest.raises(ApprovalNotPendingError, match="not paused at approval"):
        await decide(
            paused.saver, "t1", paused.approval_id, "approve",
            graph=other_graph, by="alice", args_sha256=paused.args_sha256,
        )  # fmt: skip
    assert await store_for(paused.saver).get(DECISION_KIND, paused.approval_id) is None
