"""The scheduler: deadlines, approval expiry, cleanup, the retention hook, and one leader.

Ticks take an explicit ``now`` (time moves forward without sleeping); the
runs are executed by real ``tether worker`` processes, and leadership is
checked between real processes and real connections.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from tests.runtime.waiting import waiting_on_approval
from tests.runtime.workers import Workers
from tether.approvals import (
    DECISION_KIND,
    ApprovalRequest,
    DecisionResult,
    build_decision,
    decide,
    get_approval,
)
from tether.runtime import FenceLostError, Runtime, Scheduler
from tether.runtime.store import Outcome, WorkerInfo
from tether.store import store_for


async def test_an_interrupted_run_past_its_deadline_times_out_and_its_approval_is_cancelled(
    runtime: Runtime, workers: Workers
) -> None:
    workers.start(1, extra_args=("--no-scheduler",))
    run_id = await waiting_on_approval(runtime, "t-deadline", deadline=timedelta(minutes=30))
    approval_id = (await runtime.get(run_id)).waiting_on[0].approval_id
    assert approval_id is not None
    scheduler = Scheduler(runtime)
    early = await scheduler.tick(datetime.now(UTC) + timedelta(minutes=10))
    assert early.timed_out == []
    # 45 minutes on: the run's deadline (30 min) passed, the approval (1 h) has not expired.
    report = await scheduler.tick(datetime.now(UTC) + timedelta(minutes=45))
    assert report.timed_out == [run_id]
    assert report.expired == []
    assert report.errors == []
    run = await runtime.get(run_id)
    assert run.status == "timeout"
    assert run.ended_reason == "deadline passed"
    assert run.ended_at is not None
    assert run.error is not None
    assert run.error["error"] == "TimeoutError"
    kinds = [e.kind for e in await runtime.events(run_id)]
    assert kinds[-3:] == ["timeout", "run.finished", "approval.cancelled"]
    view = await get_approval(await runtime.checkpointer(), approval_id)
    assert view.status == "cancelled"
    assert (await runtime.get_thread("t-deadline")).status == "error"
    # Idempotent: a second tick (another leader, a retry) changes nothing.
    again = await scheduler.tick(datetime.now(UTC) + timedelta(minutes=46))
    assert again.timed_out == []
    assert len(await runtime.events(run_id)) == len(kinds)


async def test_a_pending_run_past_its_deadline_times_out(runtime: Runtime) -> None:
    run = await runtime.create(
        "three_node",
        thread_id="t-late",
        input={"trace": []},
        after_seconds=3600,
        deadline=timedelta(minutes=5),
    )
    scheduler = Scheduler(runtime)
    report = await scheduler.tick(datetime.now(UTC) + timedelta(minutes=6))
    assert report.timed_out == [run.run_id]
    done = await runtime.get(run.run_id)
    assert done.status == "timeout"
    assert done.input_kind == "none"
    finished = (await runtime.events(run.run_id, kinds=["run.finished"]))[0]
    assert finished.data["status"] == "timeout"
    assert finished.data["reason"] == "deadline passed"
    assert (await runtime.wait(run.run_id, timeout=5)).status == "timeout"


async def test_a_running_run_whose_worker_is_gone_times_out_at_its_deadline(
    runtime: Runtime,
) -> None:
    run = await runtime.create(
        "three_node", thread_id="t-orphan", input={"trace": []}, deadline=timedelta(minutes=5)
    )
    # A worker claims it and dies; no worker with this graph is left to take it over.
    (claim,) = await runtime.store.claim("gone", graphs=["three_node"], limit=1, lease=1.0)
    scheduler = Scheduler(runtime)
    assert (await scheduler.tick(datetime.now(UTC) + timedelta(minutes=1))).timed_out == []
    report = await scheduler.tick(datetime.now(UTC) + timedelta(minutes=6))
    assert report.timed_out == [run.run_id]
    done = await runtime.get(run.run_id)
    assert (done.status, done.worker_id, done.lease_expires_at) == ("timeout", None, None)
    thread = await runtime.get_thread("t-orphan")
    assert thread.active_run_id is None
    assert thread.status == "error"
    # The dead worker, were it to wake up, writes nothing more.
    with pytest.raises(FenceLostError):
        await runtime.store.finish(claim.hold, Outcome("success", "idle"))
    assert (await runtime.get(run.run_id)).status == "timeout"


async def test_an_expired_approval_with_a_stop_policy_resumes_the_run_through_the_scheduler(
    runtime: Runtime, workers: Workers
) -> None:
    workers.start(1, extra_args=("--no-scheduler",))
    run_id = await waiting_on_approval(runtime, "t-expire")
    approval_id = (await runtime.get(run_id)).waiting_on[0].approval_id
    scheduler = Scheduler(runtime)
    assert (await scheduler.tick(datetime.now(UTC) + timedelta(minutes=30))).expired == []
    report = await scheduler.tick(datetime.now(UTC) + timedelta(hours=2))
    assert [(a.approval_id, a.outcome) for a in report.expired] == [(approval_id, "stopped")]
    assert report.errors == []
    done = await runtime.wait(run_id, timeout=60)
    assert done.status == "success", done
    decided = await runtime.events(run_id, kinds=["approval.decided"])
    assert decided[-1].data["decision"] == "expire"
    view = await get_approval(await runtime.checkpointer(), approval_id or "")
    assert view.status == "expired"


class _DiesAfterStoring:
    """A decider's resumer that dies after the decision is stored, before delivering it."""

    async def is_pending(self, request: ApprovalRequest) -> bool:
        return True

    async def resume(self, request: ApprovalRequest, doc: dict[str, Any]) -> DecisionResult:
        raise ConnectionError("the deciding process died")


async def test_a_stored_decision_its_decider_never_delivered_resumes_the_run(
    runtime: Runtime, workers: Workers
) -> None:
    workers.start(1, extra_args=("--no-scheduler",))
    run_id = await waiting_on_approval(runtime, "t-orphan-decision")
    approval_id = (await runtime.get(run_id)).waiting_on[0].approval_id
    assert approval_id is not None
    saver = await runtime.checkpointer()
    shown = await get_approval(saver, approval_id)
    with pytest.raises(ConnectionError):
        await decide(
            saver,
            "t-orphan-decision",
            approval_id,
            "approve",
            resumer=_DiesAfterStoring(),
            by="dana",
            args_sha256=shown.request.args_sha256,
        )
    assert (await runtime.get(run_id)).status == "interrupted"
    scheduler = Scheduler(runtime, decision_grace=30)
    # Within the grace period the decider might still deliver it: nothing happens.
    assert (await scheduler.tick(datetime.now(UTC))).resumed == []
    report = await scheduler.tick(datetime.now(UTC) + timedelta(minutes=1))
    assert report.resumed == [run_id]
    assert report.errors == []
    done = await runtime.wait(run_id, timeout=60)
    assert done.status == "success", done
    assert (await scheduler.tick(datetime.now(UTC) + timedelta(minutes=2))).resumed == []


async def test_a_decision_that_cannot_be_delivered_does_not_hold_up_the_others(
    runtime: Runtime, workers: Workers
) -> None:
    """A stored decision whose resume fails (here: text the run store cannot write, as an
    older version let through) ended the whole job, every second: no other run's stored
    decision was ever delivered. Now it is reported, once, and the others go on."""
    workers.start(1, extra_args=("--no-scheduler",))
    saver = await runtime.checkpointer()
    runs = {}
    for thread_id in ("t-undeliverable", "t-deliverable"):
        run_id = await waiting_on_approval(runtime, thread_id)
        approval_id = (await runtime.get(run_id)).waiting_on[0].approval_id or ""
        request = (await get_approval(saver, approval_id)).request
        doc = build_decision(request, "approve", by="dana", args_sha256=request.args_sha256)
        if thread_id == "t-undeliverable":
            doc["reason"] = "ok \ud800"  # written straight to the store, as before the check
        assert await store_for(saver).insert(DECISION_KIND, approval_id, doc, thread_id=thread_id)
        runs[thread_id] = run_id
    scheduler = Scheduler(runtime, decision_grace=30)
    report = await scheduler.tick(datetime.now(UTC) + timedelta(minutes=1))
    assert report.resumed == [runs["t-deliverable"]]
    assert [e for e in report.errors if runs["t-undeliverable"] in e], report.errors
    assert (await runtime.wait(runs["t-deliverable"], timeout=60)).status == "success"
    assert (await runtime.get(runs["t-undeliverable"])).status == "interrupted"
    again = await scheduler.tick(datetime.now(UTC) + timedelta(minutes=2))
    assert again.resumed == []
    assert len(again.errors) == 1


async def test_another_tenant_s_expired_approval_resumes_its_run(
    runtime: Runtime, workers: Workers
) -> None:
    workers.start(1, extra_args=("--no-scheduler",))
    acme = runtime.scoped("acme")
    await acme.create_thread(thread_id="t-acme")
    run_id = await waiting_on_approval(acme, "t-acme")
    report = await Scheduler(runtime).tick(datetime.now(UTC) + timedelta(hours=2))
    assert [a.outcome for a in report.expired] == ["stopped"]
    assert (await acme.wait(run_id, timeout=60)).status == "success"


async def test_stale_worker_rows_are_removed_and_the_retention_hook_runs_last(
    runtime: Runtime,
) -> None:
    await runtime.store.register_worker(WorkerInfo("gone", "host", 1, ["three_node"], 1))
    seen: list[tuple[Runtime, datetime]] = []

    async def retention(rt: Runtime, now: datetime) -> None:
        seen.append((rt, now))

    scheduler = Scheduler(runtime, retention=retention, worker_ttl=60)
    now = datetime.now(UTC)
    assert (await scheduler.tick(now)).workers_removed == 0
    report = await scheduler.tick(now + timedelta(minutes=5))
    assert report.workers_removed == 1
    assert seen == [(runtime, now), (runtime, now + timedelta(minutes=5))]


async def test_a_failing_job_is_reported_and_the_others_still_run(runtime: Runtime) -> None:
    async def retention(rt: Runtime, now: datetime) -> None:
        raise RuntimeError("disk full")

    cron = await runtime.create_cron("three_node", "* * * * *")
    report = await Scheduler(runtime, retention=retention).tick(cron.next_run_at)
    assert report.errors == ["retention: disk full"]
    assert len(report.fired) == 1


async def test_leadership_is_exclusive_and_passes_on_when_the_leader_resigns(
    runtime: Runtime, runtime_url: str
) -> None:
    async with Runtime(runtime_url) as other_rt:
        first, second = Scheduler(runtime), Scheduler(other_rt)
        try:
            assert await first.campaign() is True
            assert await second.campaign() is False
            assert await first.campaign() is True  # still leading
            await first.resign()
            assert await second.campaign() is True
            assert await first.campaign() is False
        finally:
            await first.resign()
            await second.resign()


async def test_a_postgres_leader_whose_connection_dies_loses_leadership(
    runtime: Runtime, runtime_url: str
) -> None:
    if not runtime_url.startswith("postgres"):
        pytest.skip("the session lock is PostgreSQL's; SQLite's flock goes with the process")
    async with Runtime(runtime_url) as other_rt:
        first, second = Scheduler(runtime), Scheduler(other_rt)
        try:
            assert await first.campaign() is True
            async with await psycopg.AsyncConnection.connect(runtime_url, autocommit=True) as conn:
                await conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_locks "
                    "WHERE locktype = 'advisory' AND granted AND database = "
                    "(SELECT oid FROM pg_database WHERE datname = current_database())"
                )
            assert await first.leadership.check() is False
            assert await second.campaign() is True
            assert await first.campaign() is False
        finally:
            await first.resign()
            await second.resign()


def _leading(workers: Workers, indexes: list[int]) -> list[int]:
    return [i for i in indexes if "scheduler: leading" in workers.log(i)]


async def test_of_two_workers_one_leads_and_the_other_takes_over_when_it_dies(
    runtime: Runtime, workers: Workers
) -> None:
    await runtime.checkpointer()  # the checkpoint tables exist before two workers start
    started = workers.start(2)
    end = time.monotonic() + 60
    while time.monotonic() < end:
        leaders = _leading(workers, started)
        standby = [i for i in started if "scheduler: standby" in workers.log(i)]
        if leaders and standby:
            break
        await asyncio.sleep(0.1)
    assert len(leaders) == 1, [workers.log(i) for i in started]
    assert standby != leaders
    # The leader does the work: a due cron fires from the worker's own ticks.
    cron = await runtime.create_cron("three_node", "* * * * * *", input={"trace": []})
    deadline = time.monotonic() + 60
    runs = await runtime.list()
    while not runs and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        runs = await runtime.list()
    assert runs, "no cron run was created by the leading worker"
    await runtime.update_cron(cron.cron_id, enabled=False)
    (leader,) = leaders
    (follower,) = [i for i in started if i != leader]
    workers.kill9(leader)
    workers.wait_log(follower, "scheduler: leading", timeout=60)


async def test_a_worker_with_no_scheduler_never_campaigns(
    runtime: Runtime, workers: Workers
) -> None:
    (index,) = workers.start(1, extra_args=("--no-scheduler",))
    run = await runtime.create("three_node", thread_id="t-plain", input={"trace": []})
    assert (await runtime.wait(run.run_id, timeout=60)).status == "success"
    assert "scheduler:" not in workers.log(index)
    scheduler = Scheduler(runtime)
    try:
        assert await scheduler.campaign() is True  # nobody else holds the lock
    finally:
        await scheduler.resign()
