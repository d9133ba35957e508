"""The retention sweep: apply a policy to every thread, a bounded batch at a time.

:func:`sweep` pages through the threads last active before the policy's
youngest ``max_age`` using the run store's activity index (never a scan of the
checkpoints), ``policy.batch_size`` threads per page, and for each one:

1. skips it if a run of it is pending or running, no rule covers it, or it is
   younger than its rule's ``max_age``;
2. keeps it while an approval of it is pending: unexpired, or expired and not
   yet acted on by its expiry policy (the scheduler's expiry job acts first;
   after that the thread is judged by its run's resulting status);
3. ``keep_latest``: prunes its checkpoints to the newest and marks it, so the
   next sweep skips it until it is active again;
4. ``delete``: writes its audit summary (``pending``), deletes its run store
   row only if it is still quiet and old (its runs, events and crons cascade)
   while moving the summary to ``deleting`` in the same transaction, deletes
   its checkpoints, records and step log, and marks the summary ``done``.

Every step is idempotent and the order makes a crash harmless: killed before
the row went, the thread is found again next time and its ``pending`` summary
rewritten; killed after, the ``deleting`` summary says which checkpoints to
delete, and the next sweep starts by finishing those. No statement locks more
than the one thread's rows, so running workers are not held up.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from tether._crashpoints import crash_point
from tether.approvals import canonical_json, list_approvals
from tether.errors import TetherError
from tether.retention.plane import retention_plane
from tether.retention.policy import RetentionPolicy, Rule
from tether.retention.summary import build_summary, summary_id
from tether.runtime.store import RetentionPlane, RunStore, ThreadActivity

if TYPE_CHECKING:
    from tether.runtime import Runtime, SyncRuntime

__all__ = ["Decision", "SweepReport", "sweep", "sweep_store", "sweep_sync"]


@dataclass(frozen=True)
class Decision:
    """What the sweep did (or, in a dry run, would do) with one thread.

    Attributes:
        thread: The thread as the activity index showed it.
        outcome: ``deleted``, ``pruned``, ``kept_pending_approval``,
            ``awaiting_expiry`` (an approval past its expiry, not yet acted on),
            ``changed`` (became active between reading and deleting) or ``failed``.
        rule: The rule that applied.
        error: For ``failed``, what went wrong.
    """

    thread: ThreadActivity
    outcome: str
    rule: Rule
    error: str | None = None


@dataclass
class SweepReport:
    """Counts of one sweep (no per-thread lists: its memory does not grow with the store).

    Attributes:
        examined: Threads read from the activity index.
        deleted: Threads deleted (or that would be, in a dry run).
        pruned: Threads pruned to their newest checkpoint (or would be).
        kept_pending_approval: Threads kept for a pending, unexpired approval.
        awaiting_expiry: Threads kept for an expired approval not yet acted on.
        active: Threads skipped because a run of them is pending or running.
        not_due: Threads no rule covers, or younger than their rule's max age.
        changed: Threads that became active between being read and deleted.
        resumed: Deletions an earlier, interrupted sweep left half done, finished.
        audit_expired: Audit summaries and receipts past their own retention, deleted.
        failed: Threads whose handling raised (the sweep goes on; see the log).
        errors: The first few ``"thread: message"`` of those failures.
        batches: Pages read.
        seconds: Wall time.
        dry_run: Nothing was written.
    """

    examined: int = 0
    deleted: int = 0
    pruned: int = 0
    kept_pending_approval: int = 0
    awaiting_expiry: int = 0
    active: int = 0
    not_due: int = 0
    changed: int = 0
    resumed: int = 0
    audit_expired: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)
    batches: int = 0
    seconds: float = 0.0
    dry_run: bool = False

    def count(self, decision: Decision) -> None:
        setattr(self, decision.outcome, getattr(self, decision.outcome) + 1)
        if decision.error is not None and len(self.errors) < 20:
            self.errors.append(f"{decision.thread.thread_id}: {decision.error}")

    @property
    def threads_per_second(self) -> float:
        return self.examined / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """Every field, for ``--json`` and logs."""
        return {
            **vars(self),
            "threads_per_second": round(self.threads_per_second, 1),
        }


Progress = Callable[[SweepReport], None]
OnDecision = Callable[[Decision], None]


@dataclass
class _Sweep:
    plane: RetentionPlane
    store: RunStore
    saver: BaseCheckpointSaver[Any]
    policy: RetentionPolicy
    now: datetime
    report: SweepReport
    on_decision: OnDecision | None

    async def finish_interrupted(self) -> None:
        """Delete the checkpoints of deletions an earlier sweep did not finish."""
        while batch := await self.plane.summaries_deleting(limit=self.policy.batch_size):
            for sid, thread_id in batch:
                await self.saver.adelete_thread(thread_id)
                await self.plane.finish_summary(sid)
                self.report.resumed += 1

    async def decide(self, thread: ThreadActivity) -> Decision | None:
        if thread.active:
            self.report.active += 1
            return None
        rule = self.policy.rule_for(
            thread.status, thread.tenant_id, thread.assistant_id, thread.graph_id
        )
        if rule is None or thread.updated_at >= self.now - rule.max_age:
            self.report.not_due += 1
            return None
        pending = await list_approvals(self.saver, thread_id=thread.thread_id)
        if pending:
            overdue = all(v.overdue(self.now) for v in pending)
            return Decision(thread, "awaiting_expiry" if overdue else "kept_pending_approval", rule)
        action = "deleted" if rule.action == "delete" else "pruned"
        return Decision(thread, action, rule)

    async def apply(self, decision: Decision) -> Decision:
        thread, rule = decision.thread, decision.rule
        try:
            if decision.outcome == "pruned":
                await self.saver.aprune([thread.thread_id], strategy="keep_latest")
                await self.plane.mark_pruned(thread.thread_id, thread.updated_at)
                return decision
            if decision.outcome == "deleted" and not await self.delete(thread, rule):
                return Decision(thread, "changed", rule)
        except (TetherError, ValueError) as exc:
            return Decision(thread, "failed", rule, str(exc))
        return decision

    async def delete(self, thread: ThreadActivity, rule: Rule) -> bool:
        summary = await build_summary(
            self.store, self.saver, thread, reason=f"retention: {rule.describe()}", now=self.now
        )
        sid = summary_id(thread)
        keep = self.policy.audit_max_age
        await self.plane.put_audit_summary(
            sid,
            thread_id=thread.thread_id,
            tenant_id=thread.tenant_id,
            summary=canonical_json(summary),
            written_at=self.now,
            keep_until=None if keep is None else self.now + keep,
        )
        crash_point("retention.summary_written")
        before = self.now - rule.max_age
        if not await self.plane.delete_quiet_thread(
            thread.thread_id, before=before, summary_id=sid
        ):
            await self.plane.drop_pending_summary(sid)
            return False
        crash_point("retention.rows_deleted")
        await self.saver.adelete_thread(thread.thread_id)
        await self.plane.finish_summary(sid)
        return True

    async def page(self, threads: list[ThreadActivity], concurrency: int) -> None:
        """Handle one page, ``concurrency`` threads at a time (each is independent)."""
        slots = asyncio.Semaphore(concurrency)

        async def one(thread: ThreadActivity) -> None:
            async with slots:
                self.report.examined += 1
                decision = await self.decide(thread)
                if decision is None:
                    return
                if not self.report.dry_run:
                    decision = await self.apply(decision)
                self.report.count(decision)
                if self.on_decision is not None:
                    self.on_decision(decision)

        await asyncio.gather(*(one(t) for t in threads))


async def sweep_store(
    store: RunStore,
    saver: BaseCheckpointSaver[Any],
    policy: RetentionPolicy,
    *,
    now: datetime | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
    on_decision: OnDecision | None = None,
    concurrency: int = 4,
) -> SweepReport:
    """:func:`sweep` on an open run store and the checkpointer of its workers."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be a positive integer, not {concurrency!r}")
    now = now or datetime.now(UTC)
    policy.check_now(now)  # before anything is written: every cutoff must be a date
    started = time.monotonic()
    report = SweepReport(dry_run=dry_run)
    job = _Sweep(retention_plane(store), store, saver, policy, now, report, on_decision)
    if not dry_run:
        await job.finish_interrupted()
    youngest = policy.youngest
    after: tuple[datetime, str] | None = None
    while youngest is not None:
        threads = await job.plane.activity_page(
            before=job.now - youngest, after=after, limit=policy.batch_size
        )
        await job.page(threads, concurrency)
        report.batches += 1
        report.seconds = time.monotonic() - started
        if progress is not None:
            progress(report)
        if len(threads) < policy.batch_size:
            break
        after = (threads[-1].updated_at, threads[-1].thread_id)
    if not dry_run:
        while expired := await job.plane.expire_audit(job.now, limit=policy.batch_size):
            report.audit_expired += expired
    report.seconds = time.monotonic() - started
    return report


async def sweep(
    runtime: Runtime,
    policy: RetentionPolicy,
    *,
    now: datetime | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
    on_decision: OnDecision | None = None,
    concurrency: int = 4,
) -> SweepReport:
    """Apply ``policy`` to every tenant's threads (see the module docstring).

    Args:
        runtime: An open :class:`~tether.runtime.Runtime` (any tenant).
        policy: The rules.
        now: The time ages are measured from (default: now); a ``ValueError``
            names it when a rule's ``now - max_age`` is no date.
        dry_run: Decide and count, write nothing.
        progress: Called with the report after every batch.
        on_decision: Called with every thread a rule was due for.
        concurrency: Threads of a batch handled at once (each holds at most
            one database connection at a time).

    Returns:
        What the sweep did, as counts.
    """
    saver = await runtime.checkpointer()
    return await sweep_store(
        runtime.store,
        saver,
        policy,
        now=now,
        dry_run=dry_run,
        progress=progress,
        on_decision=on_decision,
        concurrency=concurrency,
    )


def sweep_sync(
    runtime: SyncRuntime,
    policy: RetentionPolicy,
    *,
    now: datetime | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
    on_decision: OnDecision | None = None,
    concurrency: int = 4,
) -> SweepReport:
    """Sync twin of :func:`sweep`, on an open :class:`~tether.runtime.SyncRuntime`."""
    coro = sweep(
        runtime.runtime,
        policy,
        now=now,
        dry_run=dry_run,
        progress=progress,
        on_decision=on_decision,
        concurrency=concurrency,
    )
    report: SweepReport = runtime._call(coro)  # the runtime's own loop thread runs it
    return report
