"""Cancel (§3.7) and resume (§3.6) at the store: what each status becomes."""

from __future__ import annotations

import pytest

from tests.runtime.store.actions import GRAPH, LEASE, claim_one, create, kinds
from tether.runtime.errors import InvalidRunRequestError, RunNotActiveError
from tether.runtime.models import WaitingOn
from tether.runtime.store import NewEvent, Outcome, RunStore

WAITING = (WaitingOn("i-1", "", "ap-1"),)


async def _interrupted(store: RunStore) -> str:
    await create(store)
    claim = await claim_one(store)
    await store.finish(claim.hold, Outcome("interrupted", "interrupted", waiting_on=WAITING))
    return claim.run.run_id


async def test_a_pending_run_is_cancelled_at_once(store: RunStore) -> None:
    run = await create(store)
    cancelled = await store.cancel_run(run.run_id, action="rollback", reason="not needed")
    assert (cancelled.status, cancelled.cancel_action, cancelled.cancel_reason) == (
        "cancelled", "rollback", "not needed",
    )  # fmt: skip
    assert cancelled.ended_at is not None
    assert await store.get_run(run.run_id) == cancelled
    assert (await store.get_thread("t1")).status == "idle"
    assert (await store.events(run.run_id))[-1].data == {
        "status": "cancelled", "cancel_action": "rollback", "reason": "not needed",
    }  # fmt: skip
    assert await store.claim("w1", graphs=[GRAPH], limit=5, lease=LEASE) == []


async def test_cancelling_one_of_two_pending_runs_keeps_the_thread_busy(store: RunStore) -> None:
    first = await create(store)
    second = await create(store)
    await store.cancel_run(first.run_id)
    assert (await store.get_thread("t1")).status == "busy"
    assert (await claim_one(store)).run.run_id == second.run_id


async def test_a_running_run_is_asked_to_stop_by_its_worker(store: RunStore) -> None:
    await create(store)
    claim = await claim_one(store)
    asked = await store.cancel_run(claim.run.run_id, reason="user pressed stop")
    assert (asked.status, asked.cancel_action, asked.cancel_reason) == (
        "running", "interrupt", "user pressed stop",
    )  # fmt: skip
    assert asked.cancel_requested_at is not None
    assert asked.fence == claim.run.fence
    [held] = await store.heartbeat("w1", lease=LEASE)
    assert (held.cancel_action, held.cancel_reason) == ("interrupt", "user pressed stop")
    assert (await store.events(claim.run.run_id))[-1].data == {
        "action": "interrupt", "reason": "user pressed stop",
    }  # fmt: skip
    done = await store.finish(claim.hold, Outcome("cancelled", "idle"))
    assert (done.status, done.cancel_reason) == ("cancelled", "user pressed stop")
    assert (await store.get_thread("t1")).status == "idle"


async def test_an_interrupted_run_is_cancelled_and_keeps_what_it_waited_on(
    store: RunStore,
) -> None:
    run_id = await _interrupted(store)
    assert (await store.get_thread("t1")).status == "interrupted"
    cancelled = await store.cancel_run(run_id, reason="too late")
    assert (cancelled.status, cancelled.waiting_on) == ("cancelled", WAITING)
    assert (await store.get_thread("t1")).status == "idle"


@pytest.mark.parametrize("status", ["success", "error", "timeout", "cancelled"])
async def test_an_ended_run_cannot_be_cancelled(store: RunStore, status: str) -> None:
    await create(store)
    claim = await claim_one(store)
    await store.finish(claim.hold, Outcome(status, "idle"))  # type: ignore[arg-type]
    before = await store.get_run(claim.run.run_id)
    with pytest.raises(RunNotActiveError) as caught:
        await store.cancel_run(claim.run.run_id)
    assert str(caught.value) == (
        f"run {claim.run.run_id} has already ended ({status}); only a pending, running or "
        "interrupted run can be cancelled"
    )
    assert await store.get_run(claim.run.run_id) == before


async def test_an_unknown_cancel_action_is_refused(store: RunStore) -> None:
    run = await create(store)
    with pytest.raises(InvalidRunRequestError, match="cancel action 'abort' is unknown"):
        await store.cancel_run(run.run_id, action="abort")  # type: ignore[arg-type]
    assert (await store.get_run(run.run_id)).status == "pending"


async def test_resume_enqueues_the_same_run_with_a_command(store: RunStore) -> None:
    run_id = await _interrupted(store)
    decided = NewEvent("approval.decided", {"approval_id": "ap-1", "decision": "approve"})
    command = {"resume": {"i-1": {"decision": "approve"}}}
    resumed = await store.resume_run(run_id, command, events=[decided])
    assert (resumed.status, resumed.input_kind, resumed.input) == ("pending", "command", command)
    assert (resumed.resumes, resumed.attempt, resumed.waiting_on) == (1, 0, ())
    assert (await store.get_thread("t1")).status == "busy"
    assert (await kinds(store, run_id))[-2:] == ["approval.decided", "run.resumed"]
    again = await claim_one(store, "w2")
    assert (again.run.run_id, again.run.fence, again.run.attempt) == (run_id, 2, 1)
    assert (await store.events(run_id))[-1].data["resumes"] == 1


async def test_only_an_interrupted_run_can_be_resumed(store: RunStore) -> None:
    run = await create(store)
    with pytest.raises(RunNotActiveError) as caught:
        await store.resume_run(run.run_id, {"resume": 1})
    assert str(caught.value) == (
        f"run {run.run_id} is pending, not interrupted; only an interrupted run can be resumed"
    )
    assert await kinds(store, run.run_id) == ["run.created"]


async def test_resume_needs_a_command(store: RunStore) -> None:
    run_id = await _interrupted(store)
    with pytest.raises(InvalidRunRequestError, match="command must have some of the keys"):
        await store.resume_run(run_id, {"answer": 1})
    assert (await store.get_run(run_id)).status == "interrupted"
