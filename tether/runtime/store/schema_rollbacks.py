"""Version 3 of the run store's schema (both dialects): an index of rolled-back runs.

``tether_runs_rolled_back`` holds only the runs cancelled with ``rollback``,
by when they ended, so the scheduler's sweep for rollbacks nobody carried out
(:meth:`~tether.runtime.scheduler.Scheduler.tick`, "orphaned rollbacks") reads
a day's worth of them with a range scan instead of every run.
"""

from __future__ import annotations

__all__ = ["POSTGRES_V3", "SQLITE_V3"]

_INDEX = """\
CREATE INDEX tether_runs_rolled_back ON tether_runs (ended_at)
    WHERE status = 'cancelled' AND cancel_action = 'rollback'"""

POSTGRES_V3: tuple[str, ...] = (_INDEX,)
SQLITE_V3: tuple[str, ...] = (_INDEX,)
