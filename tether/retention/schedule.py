"""The sweep as a job of the runtime's scheduler (one leader per run store).

:func:`scheduled_sweep` turns a policy into the ``retention`` hook of
:class:`~tether.runtime.scheduler.Scheduler`, which calls it on every tick (about
once a second); the hook sweeps when ``policy.every`` has passed since its last
sweep, so the first tick after a worker starts leading sweeps at once.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING

from tether.retention.policy import RetentionPolicy
from tether.retention.sweep import SweepReport, sweep

if TYPE_CHECKING:
    from tether.runtime import Runtime

__all__ = ["scheduled_sweep"]

log = logging.getLogger("tether.retention")


def scheduled_sweep(
    policy: RetentionPolicy, *, on_report: Callable[[SweepReport], None] | None = None
) -> Callable[[Runtime, datetime], Awaitable[None]]:
    """The scheduler hook that runs :func:`~tether.retention.sweep` every ``policy.every``.

    Args:
        policy: The rules.
        on_report: Called with each sweep's report (tests; the hook logs it too).
    """
    last: list[datetime] = []

    async def retention(runtime: Runtime, now: datetime) -> None:
        if last and now - last[0] < policy.every:
            return
        report = await sweep(runtime, policy, now=now)
        last[:] = [now]
        log.info(
            "retention: %d examined, %d deleted, %d pruned, %d kept for approvals (%.0f threads/s)",
            report.examined,
            report.deleted,
            report.pruned,
            report.kept_pending_approval + report.awaiting_expiry,
            report.threads_per_second,
        )
        if on_report is not None:
            on_report(report)

    return retention
