"""A person decides a failed run's compensation through the runtime; a worker continues it.

The refund saga (``build_refund_graph(saga=True)``) refunds, emails, then fails
to book a courier. With the run's policy ``ask`` the refund's undo waits on a
person: the run ends ``error`` and its error lists the request. Deciding it with
``Runtime.decide`` (the path of ``tether approvals ... --runtime``, the inbox and
``/v1/runs/{id}/resume``) stores the decision with every check and enqueues a
continuation run; a worker compensates, and the failed run's error is rewritten.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.workers import in_process_worker
from tether.approvals import (
    AlreadyDecidedError,
    ApprovalError,
    ApprovalNotPendingError,
    ApproverNotAllowedError,
    ArgsHashMismatchError,
    decide,
    get_approval,
)
from tether.compensation import RUN_POLICY_KEY
from tether.graphs._refund_saga import saga_effects
from tether.graphs._refund_scenario import PAYMENTS_FILE, refund_input
from tether.runtime import Run, Runtime, Scheduler, Worker
from tether.runtime.compensations import CONTINUES, continuation_id, enqueue
from tether.runtime.errors import InvalidRunRequestError, RunNotFoundError

LEAD = {"by": "dana", "roles": ["support-lead"]}
ASK = {"configurable": {RUN_POLICY_KEY: "ask"}}


@pytest.fixture
async def worker(
    runtime_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Worker]:
    monkeypatch.setenv("TETHER_TEST_WORKDIR", str(tmp_path))
    async with in_process_worker(runtime_url, scheduler=False) as running:
        yield running


def _reversal_attempts(workdir: Path) -> int:
    with sqlite3.connect(workdir / PAYMENTS_FILE) as db:
        (n,) = db.execute("SELECT COUNT(*) FROM attempts WHERE kind = 'reversal'").fetchone()
    return int(n)


async def _failed_refund(runtime: Runtime, thread_id: str) -> tuple[Run, dict[str, Any]]:
    """Run the refund saga to its failure; the run and the request its compensation waits on."""
    run = await runtime.create("refund_saga", thread_id=thread_id, input=refund_input(), config=ASK)
    done = await runtime.wait(run.run_id, timeout=60)
    assert done.status == "error", done
    assert done.error is not None
    compensation = done.error["compensation"]
    assert compensation["undone"] == []
    (awaiting,) = compensation["awaiting"]
    assert awaiting["tool"] == "issue_refund"
    return done, awaiting


async def _continued(runtime: Runtime, approval_id: str) -> Run:
    continuation = await runtime.wait(continuation_id(approval_id), timeout=60)
    assert continuation.status == "success", continuation
    return continuation


async def test_approving_the_undo_has_a_worker_reverse_the_refund_once(
    runtime: Runtime, worker: Worker, tmp_path: Path
) -> None:
    workdir = tmp_path / "refund_saga"
    failed, awaiting = await _failed_refund(runtime, "saga-approve")
    assert saga_effects(workdir) == {"refunds": 1, "reversals": 0, "emails": 1}
    saver = await runtime.checkpointer()
    request = (await get_approval(saver, awaiting["approval_id"])).request
    assert request.action == "compensate:issue_refund"

    result = await runtime.decide(
        "saga-approve",
        request.approval_id,
        "approve",
        args_sha256=request.args_sha256,
        **LEAD,  # type: ignore[arg-type]
    )
    assert result.values == {"continued_by": continuation_id(request.approval_id)}
    continuation = await _continued(runtime, request.approval_id)
    assert continuation.kwargs[CONTINUES]["run_id"] == failed.run_id

    assert saga_effects(workdir) == {"refunds": 1, "reversals": 1, "emails": 2}
    assert _reversal_attempts(workdir) == 1
    after = await runtime.get(failed.run_id)
    assert after.status == "error"
    assert after.error is not None
    assert after.error["message"] == failed.error["message"]  # type: ignore[index]
    assert after.error["compensation"]["undone"] == ["issue_refund"]
    assert after.error["compensation"]["awaiting"] == []
    assert [e["tool"] for e in after.error["compensation"]["not_undone"]] == ["send_email"]
    kinds = [e.kind for e in await runtime.events(failed.run_id)]
    assert kinds[-2:] == ["approval.decided", "compensation"]
    continued = [e.kind for e in await runtime.events(continuation.run_id)]
    assert continued.count("compensation.before") == 1
    assert continued.count("compensation.after") == 1
    thread = await runtime.get_thread("saga-approve")
    assert thread.status == "error"
    assert thread.error is not None
    assert thread.error["compensation"]["undone"] == ["issue_refund"]

    # Deciding again is refused, and delivering the decision again undoes nothing.
    with pytest.raises(AlreadyDecidedError):
        await runtime.decide(
            "saga-approve",
            request.approval_id,
            "approve",
            args_sha256=request.args_sha256,
            **LEAD,  # type: ignore[arg-type]
        )
    again = await enqueue(runtime, request, {"decision": "approve"})
    assert again.run_id == continuation.run_id
    assert (await runtime.get(continuation.run_id)).status == "success"
    assert _reversal_attempts(workdir) == 1


async def test_rejecting_leaves_the_refund_not_undone(
    runtime: Runtime, worker: Worker, tmp_path: Path
) -> None:
    workdir = tmp_path / "refund_saga"
    failed, awaiting = await _failed_refund(runtime, "saga-reject")
    request = (await get_approval(await runtime.checkpointer(), awaiting["approval_id"])).request
    await runtime.decide(
        "saga-reject",
        request.approval_id,
        "reject",
        args_sha256=request.args_sha256,
        reason="refunded by hand",
        **LEAD,  # type: ignore[arg-type]
    )
    await _continued(runtime, request.approval_id)
    assert saga_effects(workdir) == {"refunds": 1, "reversals": 0, "emails": 1}
    assert _reversal_attempts(workdir) == 0
    after = await runtime.get(failed.run_id)
    assert after.error is not None
    compensation = after.error["compensation"]
    assert compensation["undone"] == []
    assert compensation["awaiting"] == []
    left = {e["tool"]: e["why"] for e in compensation["not_undone"]}
    assert left["issue_refund"] == "left by dana (reject: refunded by hand)"


async def test_every_check_of_an_approval_applies(
    runtime: Runtime, worker: Worker, tmp_path: Path
) -> None:
    _, awaiting = await _failed_refund(runtime, "saga-checks")
    request = (await get_approval(await runtime.checkpointer(), awaiting["approval_id"])).request
    with pytest.raises(ApproverNotAllowedError):
        await runtime.decide(
            "saga-checks", request.approval_id, "approve", by="eve", args_sha256=None
        )
    with pytest.raises(ArgsHashMismatchError):
        await runtime.decide(
            "saga-checks",
            request.approval_id,
            "approve",
            args_sha256="0" * 64,
            **LEAD,  # type: ignore[arg-type]
        )
    other = runtime.scoped("other-tenant")
    with pytest.raises(ApprovalError):
        await other.decide(
            None,
            request.approval_id,
            "approve",
            args_sha256=request.args_sha256,
            **LEAD,  # type: ignore[arg-type]
        )
    assert _reversal_attempts(tmp_path / "refund_saga") == 0
    with pytest.raises(RunNotFoundError):
        await runtime.get(continuation_id(request.approval_id))


async def test_an_expired_request_leaves_the_refund_and_is_reported(
    runtime: Runtime, worker: Worker, tmp_path: Path
) -> None:
    failed, awaiting = await _failed_refund(runtime, "saga-expire")
    scheduler = Scheduler(runtime)
    later = datetime.now(UTC) + timedelta(days=8)  # the saga's requests expire in 7 days
    report = await scheduler.tick(now=later)
    (action,) = [a for a in report.expired if a.approval_id == awaiting["approval_id"]]
    assert action.outcome == "stopped", report
    await _continued(runtime, awaiting["approval_id"])
    assert _reversal_attempts(tmp_path / "refund_saga") == 0
    after = await runtime.get(failed.run_id)
    assert after.error is not None
    compensation = after.error["compensation"]
    assert compensation["awaiting"] == []
    left = {e["tool"]: e["why"] for e in compensation["not_undone"]}
    assert left["issue_refund"].startswith("left by tether:expiry (expire")
    # A second tick finds nothing to expire nor to continue.
    again = await scheduler.tick(now=later)
    assert [a for a in again.expired if a.outcome != "skipped"] == []
    assert again.resumed == []


async def test_a_failed_undo_is_retried_by_a_worker_once_a_person_approves(
    runtime: Runtime, worker: Worker, tmp_path: Path
) -> None:
    (tmp_path / "undo_down").touch()
    run = await runtime.create("saga_undo_fails", thread_id="saga-down", input={"messages": []})
    failed = await runtime.wait(run.run_id, timeout=60)
    assert failed.error is not None
    compensation = failed.error["compensation"]
    assert compensation["undone"] == ["email"]
    (awaiting,) = compensation["awaiting"]
    assert "ConnectionError: payments provider down" in awaiting["why"]
    (tmp_path / "undo_down").unlink()
    request = (await get_approval(await runtime.checkpointer(), awaiting["approval_id"])).request
    await runtime.decide(
        "saga-down", request.approval_id, "approve", by="dana", args_sha256=request.args_sha256
    )
    await _continued(runtime, request.approval_id)
    with sqlite3.connect(tmp_path / "world.db") as db:
        kinds = [k for (k,) in db.execute("SELECT kind FROM effects ORDER BY rowid")]
    assert kinds == ["charge", "email", "undo-email ada@example.com", "undo-charge 4200"]
    after = await runtime.get(failed.run_id)
    assert after.error is not None
    assert after.error["compensation"]["undone"] == ["email", "charge"]


class _DiesAfterStoring:
    """A decider that stores the decision and dies before enqueueing the continuation."""

    async def is_pending(self, request: Any) -> bool:
        return True

    async def resume(self, request: Any, doc: dict[str, Any]) -> Any:
        raise ConnectionResetError("the deciding process died")


async def test_the_scheduler_continues_a_decision_its_decider_never_delivered(
    runtime: Runtime, worker: Worker, tmp_path: Path
) -> None:
    failed, awaiting = await _failed_refund(runtime, "saga-orphan")
    saver = await runtime.checkpointer()
    request = (await get_approval(saver, awaiting["approval_id"])).request
    with pytest.raises(ConnectionResetError):
        await decide(
            saver,
            "saga-orphan",
            request.approval_id,
            "approve",
            args_sha256=request.args_sha256,
            resumer=_DiesAfterStoring(),
            **LEAD,  # type: ignore[arg-type]
        )
    scheduler = Scheduler(runtime, decision_grace=30)
    soon = await scheduler.tick()  # within the grace: its decider may still deliver it
    assert soon.resumed == []
    later = datetime.now(UTC) + timedelta(seconds=31)
    report = await scheduler.tick(now=later)
    assert report.resumed == [continuation_id(request.approval_id)]
    await _continued(runtime, request.approval_id)
    assert _reversal_attempts(tmp_path / "refund_saga") == 1
    again = await scheduler.tick(now=later)
    assert again.resumed == []
    after = await runtime.get(failed.run_id)
    assert after.error is not None
    assert after.error["compensation"]["undone"] == ["issue_refund"]


async def test_a_thread_with_an_interrupted_run_refuses_until_it_is_settled(
    runtime: Runtime, worker: Worker, tmp_path: Path
) -> None:
    _, awaiting = await _failed_refund(runtime, "saga-busy")
    request = (await get_approval(await runtime.checkpointer(), awaiting["approval_id"])).request
    paused = await runtime.create(
        "refund_saga", thread_id="saga-busy", input=refund_input(), interrupt_before=["agent"]
    )
    assert (await runtime.wait(paused.run_id, timeout=60)).status == "interrupted"
    with pytest.raises(ApprovalNotPendingError, match=f"interrupted run {paused.run_id}"):
        await runtime.decide(
            "saga-busy",
            request.approval_id,
            "approve",
            args_sha256=request.args_sha256,
            **LEAD,  # type: ignore[arg-type]
        )
    assert (await get_approval(await runtime.checkpointer(), request.approval_id)).decision is None
    assert (await runtime.get(paused.run_id)).status == "interrupted"  # not closed by us
    await runtime.cancel(paused.run_id)
    await runtime.decide(
        "saga-busy",
        request.approval_id,
        "approve",
        args_sha256=request.args_sha256,
        **LEAD,  # type: ignore[arg-type]
    )
    await _continued(runtime, request.approval_id)
    assert _reversal_attempts(tmp_path / "refund_saga") == 1


@pytest.mark.parametrize("strategy", ["interrupt", "rollback"])
async def test_a_new_runs_multitask_strategy_never_cancels_a_continuation(
    runtime: Runtime, worker: Worker, tmp_path: Path, strategy: str
) -> None:
    """A decided undo's continuation is tether's, not the user's: a run created on the thread
    with ``interrupt`` or ``rollback`` waits behind it instead of cancelling it (which left
    the decision stored and never applied)."""
    (tmp_path / "undo_down").touch()
    thread = f"saga-multitask-{strategy}"
    run = await runtime.create("saga_undo_fails", thread_id=thread, input={"messages": []})
    failed = await runtime.wait(run.run_id, timeout=60)
    assert failed.error is not None
    (awaiting,) = failed.error["compensation"]["awaiting"]
    (tmp_path / "undo_down").unlink()
    request = (await get_approval(await runtime.checkpointer(), awaiting["approval_id"])).request
    await runtime.decide(
        thread, request.approval_id, "approve", by="dana", args_sha256=request.args_sha256
    )
    after = await runtime.create(
        "saga_fails", thread_id=thread, input={"messages": []}, multitask_strategy=strategy
    )
    continuation = await _continued(runtime, request.approval_id)
    assert continuation.kwargs[CONTINUES]["run_id"] == failed.run_id
    compensated = await runtime.get(failed.run_id)
    assert compensated.error is not None
    assert compensated.error["compensation"]["undone"] == ["email", "charge"]
    assert (await runtime.wait(after.run_id, timeout=60)).status == "error"  # it ran, after


async def test_a_run_request_may_not_mark_itself_as_tethers(runtime: Runtime) -> None:
    with pytest.raises(InvalidRunRequestError, match="metadata key 'tether_compensates' is"):
        await runtime.create("saga_fails", thread_id="marked", input={}, metadata={CONTINUES: "r1"})
    assert await runtime.list(thread_id="marked") == []
