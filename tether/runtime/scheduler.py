"""The scheduler: one leader per run store runs the periodic jobs (design §3.12).

Every worker campaigns by default (``tether worker --no-scheduler`` turns it
off); the one that holds the leadership lock (:mod:`.leadership`) ticks about
once a second, the others try again every few seconds. A tick runs, in order:

1. **expire approvals:** :func:`tether.approvals.expire_due` with a
   :class:`~tether.runtime.resumer.RuntimeResumer`, so a ``stop`` or
   ``safe_alternative`` policy enqueues the run's resume (a worker continues
   it) and an escalation keeps it waiting. An expired compensation request
   (its policy is always ``stop``) enqueues the compensation's continuation: a
   worker leaves the effect *not undone* (a timeout never undoes) and rewrites
   the failed run's outcome. This runs before the deadlines: an
   approval that expired no later than its run's deadline has had its policy
   applied first (§3.8);
2. **deadlines:** pending and interrupted runs past ``deadline_at`` become
   ``timeout`` (events ``timeout`` and ``run.finished``); the approvals an
   interrupted one waited on are cancelled (``by="tether:deadline"``), as a
   cancel does;
   A running run whose lease expired with no worker to take it over is timed
   out the same way;
3. **orphaned decisions:** an interrupted run waiting on an approval whose
   decision was stored ``decision_grace`` seconds ago or more and never
   delivered (the deciding process died in between) is resumed with it; a
   decided compensation request whose compensation still waits on it after
   that grace gets its continuation run enqueued (idempotent: one per request,
   see :mod:`.compensations`);
   **orphaned rollbacks:** a run cancelled with ``rollback`` (after it had started)
   ``decision_grace`` seconds ago or more, up to :data:`ROLLBACK_HORIZON`, that still has
   tool records, no rollback run and no compensation pass begun (the cancelling process
   died before it enqueued the rollback run, or a worker died between ending the run and
   compensating it) gets its rollback run enqueued (idempotent); this sweep looks once
   per ``decision_grace``;
4. **crons:** each due cron fires its slot once (``tether_cron_fires``), the
   run created as ``Runtime.create`` creates it; the next slot is the first
   after now, so slots missed while no scheduler ran collapse into one fire;
5. **cleanup:** ``tether_workers`` rows not heard of for ``worker_ttl``, and the
   temporary threads of stateless runs that stopped :data:`.temporary.GRACE`
   seconds ago (:mod:`.temporary`);
6. **retention:** the optional ``retention(runtime, now)`` hook.

Every job is idempotent, and a failing job is logged without stopping the
others. :meth:`Scheduler.tick` takes ``now``, so tests move time instead of
sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from tether.approvals import (
    ApprovalNotPendingError,
    ApprovalView,
    ExpiryAction,
    expire_due,
    list_approvals,
)
from tether.compensation import (
    compensation_began,
    compensation_waits_on,
    is_compensation_request,
)
from tether.errors import TetherError
from tether.runtime import compensations, temporary
from tether.runtime.compensations import continuation_id
from tether.runtime.errors import RunNotFoundError
from tether.runtime.leadership import Leadership, leadership_for
from tether.runtime.resumer import RuntimeResumer
from tether.runtime.store.transient import log_failure

if TYPE_CHECKING:
    from tether.runtime.api import Runtime
    from tether.runtime.models import Run

__all__ = ["Retention", "Scheduler", "TickReport"]

log = logging.getLogger("tether.runtime")

Retention = Callable[["Runtime", datetime], Awaitable[None]]
DEADLINE_REASON = "run deadline passed"


ROLLBACK_HORIZON = timedelta(days=1)
"""How far back the scheduler looks for runs cancelled with rollback and never rolled back."""
_SETTLED_KEPT = 100_000


async def _rollback_left(runtime: Runtime, run: Run) -> bool:
    """Whether ``run`` (cancelled with rollback) still has effects and nobody rolls it back:
    no rollback run, tool records left, and no compensation pass of it ever began."""
    with contextlib.suppress(RunNotFoundError):
        await runtime.store.get_run(compensations.rollback_id(run.run_id), tenant=run.tenant_id)
        return False  # enqueued: a worker rolls it back
    if not await compensations.acted(runtime, run):
        return False  # rolled back already (its records went with it), or it did nothing
    return not await compensation_began(await runtime.checkpointer(), run.thread_id, run.run_id)


@dataclass
class TickReport:
    """What one tick did.

    Attributes:
        expired: The expiry sweep's actions (escalated, stopped, …).
        timed_out: Runs ended as ``timeout`` by their deadline.
        resumed: Runs resumed with a decision their decider never delivered.
        rolled_back: Rollback runs enqueued for runs cancelled with rollback whose rollback
            was never carried out.
        fired: Runs created by crons.
        workers_removed: Stale worker rows deleted.
        temporary_threads_removed: Temporary threads of stateless runs deleted.
        errors: ``"job: message"`` for each job (or cron) that failed.
    """

    expired: list[ExpiryAction] = field(default_factory=list)
    timed_out: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    rolled_back: list[str] = field(default_factory=list)
    fired: list[str] = field(default_factory=list)
    workers_removed: int = 0
    errors: list[str] = field(default_factory=list)
    temporary_threads_removed: list[str] = field(default_factory=list)


class Scheduler:
    """Campaigns for leadership and, while leading, runs the periodic jobs.

    Args:
        runtime: An open :class:`Runtime` on the run store (any tenant: the
            scheduler serves them all).
        interval: Seconds between ticks while leading.
        campaign_every: Seconds between attempts while another process leads.
        retention: ``async retention(runtime, now)``, run last in every tick.
        worker_ttl: Worker rows whose last heartbeat is older are deleted.
        decision_grace: Seconds a stored decision gets to be delivered by its
            decider before the scheduler resumes the run with it.
        leadership: The lock (default: the one for ``runtime.url``).
    """

    def __init__(
        self,
        runtime: Runtime,
        *,
        interval: float = 1.0,
        campaign_every: float = 5.0,
        retention: Retention | None = None,
        worker_ttl: float = 60.0,
        decision_grace: float = 30.0,
        leadership: Leadership | None = None,
    ) -> None:
        if min(interval, campaign_every, worker_ttl, decision_grace) <= 0:
            raise ValueError(
                "interval, campaign_every, worker_ttl and decision_grace must be positive "
                f"seconds, got {interval}, {campaign_every}, {worker_ttl} and {decision_grace}"
            )
        self.runtime = runtime
        self.interval = interval
        self.campaign_every = campaign_every
        self.retention = retention
        self.worker_ttl = worker_ttl
        self.decision_grace = decision_grace
        self.leadership = leadership or leadership_for(runtime.url)
        self.leading = False
        self.ticks = 0
        self._stop = asyncio.Event()
        self._undeliverable: set[str] = set()  # decisions whose resume failed, logged once
        self._rollbacks_settled: set[str] = set()  # rollbacks seen done or under way
        self._rollbacks_swept: datetime | None = None  # when the sweep last looked

    # -- leadership ---------------------------------------------------------------------------

    async def campaign(self) -> bool:
        """Try once to lead (or confirm this process still does); whether it leads."""
        was = self.leading
        self.leading = await self.leadership.acquire()
        if self.leading and not was:
            log.info("scheduler: leading (%s)", self.runtime.store.dialect)
        elif was and not self.leading:
            log.warning("scheduler: leadership lost")
        return self.leading

    async def resign(self) -> None:
        """Stop leading (another process may take over at its next attempt)."""
        await self.leadership.release()
        self.leading = False

    def stop(self) -> None:
        """Make :meth:`run` return (after the tick under way)."""
        self._stop.set()

    async def run(self) -> None:
        """Campaign, and tick while leading, until :meth:`stop`; then resign."""
        standby_logged = False
        try:
            while not self._stop.is_set():
                try:
                    leading = await self.campaign() if not self.leading else await self._still()
                    if leading:
                        await self.tick()
                    elif not standby_logged:
                        log.info("scheduler: standby (another process leads)")
                        standby_logged = True
                except Exception as exc:  # e.g. the lock file's folder is gone: try again later
                    log_failure(log, exc, "scheduler: campaign failed")
                    leading = False
                wait = self.interval if leading else self.campaign_every
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await self._stop.wait()
        finally:
            await self.resign()

    async def _still(self) -> bool:
        if await self.leadership.check():
            return True
        self.leading = False
        log.warning("scheduler: leadership lost")
        return False

    # -- one tick -------------------------------------------------------------------------------

    async def tick(self, now: datetime | None = None) -> TickReport:
        """Run every job once at ``now`` (default: the current time), in order.

        It does not check leadership: :meth:`run` calls it only while leading,
        and tests call it directly.
        """
        now = now or datetime.now(UTC)
        report = TickReport()
        jobs = (
            ("expire_approvals", self._expire_approvals),
            ("deadlines", self._deadlines),
            ("orphaned_decisions", self._orphaned_decisions),
            ("orphaned_rollbacks", self._orphaned_rollbacks),
            ("crons", self._crons),
            ("cleanup", self._cleanup),
            ("retention", self._retention),
        )
        for name, job in jobs:
            try:
                await job(now, report)
            except Exception as exc:
                log_failure(log, exc, "scheduler: job %s failed", name)
                report.errors.append(f"{name}: {exc}")
        self.ticks += 1
        return report

    async def _expire_approvals(self, now: datetime, report: TickReport) -> None:
        saver = await self.runtime.checkpointer()
        resumer = RuntimeResumer(self.runtime, any_tenant=True)
        report.expired = await expire_due(saver, now=now, resumer=resumer)
        for action in report.expired:
            if action.outcome != "skipped":
                log.info("scheduler: approval %s %s", action.approval_id, action.outcome)

    async def _deadlines(self, now: datetime, report: TickReport) -> None:
        for run in await self.runtime.store.expire_deadlines(now):
            report.timed_out.append(run.run_id)
            log.info("scheduler: run %s timed out (%s past its deadline)", run.run_id, run.status)
            if any(w.approval_id for w in run.waiting_on):
                scoped = self.runtime.scoped(run.tenant_id)
                try:
                    await scoped._cancel_approvals(run, DEADLINE_REASON, by="tether:deadline")
                except Exception as exc:
                    log_failure(
                        log, exc, "scheduler: cancelling the approvals of run %s", run.run_id
                    )
                    report.errors.append(f"deadlines: run {run.run_id}: {exc}")

    async def _orphaned_decisions(self, now: datetime, report: TickReport) -> None:
        settled = now - timedelta(seconds=self.decision_grace)
        saver = await self.runtime.checkpointer()
        views = {v.request.approval_id: v for v in await list_approvals(saver, status=None)}
        await self._orphaned_compensations(list(views.values()), settled, report)
        waiting = await self.runtime.store.waiting_on_approvals()
        if not waiting:
            return
        for run in waiting:
            for waiting_on in run.waiting_on:
                view = views.get(waiting_on.approval_id or "")
                doc = None if view is None else view.decision
                if view is None or doc is None or doc.get("decision") == "cancelled":
                    continue
                if datetime.fromisoformat(doc["at"]) > settled:
                    continue  # its decider may still be delivering it
                resumer = RuntimeResumer(self.runtime.scoped(run.tenant_id))
                try:
                    await resumer.resume(view.request, doc)
                except ApprovalNotPendingError:
                    break  # resumed meanwhile
                except Exception as exc:
                    # One decision that cannot be delivered must not keep the others
                    # waiting: it is reported (logged once) and the next is tried.
                    self._report_undeliverable(waiting_on.approval_id or "", run.run_id, exc)
                    report.errors.append(f"orphaned_decisions: run {run.run_id}: {exc}")
                    break
                report.resumed.append(run.run_id)
                log.info("scheduler: run %s resumed with its stored decision", run.run_id)
                break

    def _report_undeliverable(self, approval_id: str, run_id: str, exc: Exception) -> None:
        if approval_id in self._undeliverable:
            log.debug("scheduler: run %s: decision %s still undeliverable", run_id, approval_id)
            return
        self._undeliverable.add(approval_id)
        log.error(
            "scheduler: run %s: its stored decision %s could not resume it (%s: %s); "
            "the other runs go on",
            run_id,
            approval_id,
            type(exc).__name__,
            exc,
        )

    async def _orphaned_compensations(
        self, views: list[ApprovalView], settled: datetime, report: TickReport
    ) -> None:
        """Decided compensation requests whose continuation was never enqueued."""
        saver = await self.runtime.checkpointer()
        resumer = RuntimeResumer(self.runtime, any_tenant=True)
        for view in views:
            doc = view.decision
            request = view.request
            if doc is None or not is_compensation_request(request):
                continue
            if datetime.fromisoformat(doc["at"]) > settled:
                continue  # its decider may still be enqueueing it
            if not await compensation_waits_on(saver, request):
                continue  # continued already
            continuation = continuation_id(request.approval_id)
            with contextlib.suppress(RunNotFoundError):
                await self.runtime.store.get_run(
                    continuation, tenant=await self._tenant(request.thread_id)
                )
                continue  # enqueued; a worker will continue it
            try:
                await resumer.resume(request, doc)
            except ApprovalNotPendingError as exc:
                log.info("scheduler: compensation %s not continued: %s", request.approval_id, exc)
                continue
            report.resumed.append(continuation)
            log.info(
                "scheduler: compensation %s continued by run %s", request.approval_id, continuation
            )

    async def _orphaned_rollbacks(self, now: datetime, report: TickReport) -> None:
        """Runs cancelled with rollback whose rollback nobody carries out: the cancelling
        process died before it enqueued the rollback run, or a worker died between ending
        the run as cancelled and compensating it. Each gets its rollback run (idempotent)."""
        grace = timedelta(seconds=self.decision_grace)
        if self._rollbacks_swept is not None and now - self._rollbacks_swept < grace:
            return  # once per grace: what it finds waited that long anyway
        self._rollbacks_swept = now
        since, until = now - ROLLBACK_HORIZON, now - grace
        if len(self._rollbacks_settled) > _SETTLED_KEPT:
            self._rollbacks_settled.clear()
        for run in await self.runtime.store.rolled_back_runs(since, until):
            if run.run_id in self._rollbacks_settled:
                continue
            scoped = self.runtime.scoped(run.tenant_id)
            try:
                if await _rollback_left(scoped, run):
                    rolling = await compensations.enqueue_rollback(scoped, run)
                    report.rolled_back.append(rolling.run_id)
                    log.info("scheduler: run %s rolled back by run %s", run.run_id, rolling.run_id)
            except Exception as exc:
                log_failure(log, exc, "scheduler: rolling back run %s", run.run_id)
                report.errors.append(f"orphaned_rollbacks: run {run.run_id}: {exc}")
                continue
            self._rollbacks_settled.add(run.run_id)

    async def _tenant(self, thread_id: str) -> str:
        return await self.runtime.store.thread_tenant(thread_id) or ""

    async def _crons(self, now: datetime, report: TickReport) -> None:
        store = self.runtime.store
        for cron in await store.due_crons(now):
            try:
                created = await store.fire_cron(cron, now)
            except TetherError as exc:  # the run was refused: this slot is skipped
                log.warning("scheduler: cron %s could not create its run: %s", cron.cron_id, exc)
                report.errors.append(f"crons: cron {cron.cron_id}: {exc}")
                await store.skip_cron_slot(cron, now)
                continue
            except Exception as exc:  # e.g. a deadlock with a thread's deletion: next tick
                log_failure(log, exc, "scheduler: cron %s failed to fire", cron.cron_id)
                report.errors.append(f"crons: cron {cron.cron_id}: {exc}")
                continue
            if created is not None:
                await self.runtime.scoped(cron.tenant_id)._after_create(created)
                report.fired.append(created.run.run_id)
                log.info("scheduler: cron %s created run %s", cron.cron_id, created.run.run_id)

    async def _cleanup(self, now: datetime, report: TickReport) -> None:
        before = now - timedelta(seconds=self.worker_ttl)
        report.workers_removed = await self.runtime.store.remove_stale_workers(before)
        report.temporary_threads_removed = await temporary.delete_temporary_threads(
            self.runtime.store,
            await self.runtime.checkpointer(),
            ended_before=now - timedelta(seconds=temporary.GRACE),
        )

    async def _retention(self, now: datetime, report: TickReport) -> None:
        if self.retention is not None:
            await self.retention(self.runtime, now)
