"""Compensation (sagas): when a run fails, undo what it already did, newest first.

A durable tool declares how to undo one of its effects
(``durable_tool(issue_refund, compensate=reverse_refund)``); a graph made with
:func:`compensating` has its failed runs compensated: the runtime's workers do
it when a run fails or is cancelled with rollback, and code that runs graphs
itself calls :func:`compensate`. Each undo is a recorded, crash-safe step with
its own idempotency key; an undo that fails goes to a person as an approval
request, never into a retry loop; effects without an undo are listed as not
undone. See docs/compensation.md.

The names below are the whole API; the modules behind them are private.
"""

from tether.compensation._api import (
    CompensationResumer,
    SyncCompensationResumer,
    compensate,
    compensate_sync,
    compensating_graph,
    stopped_run,
)
from tether.compensation._flow import COMPENSATION_KIND
from tether.compensation._report import CompensationReport, EffectOutcome
from tether.compensation._settings import RUN_POLICY_KEY, compensating, run_policy
from tether.compensation._waiting import (
    compensated_run,
    compensation_began,
    compensation_waits_on,
    is_compensation_request,
)
from tether.compensation.errors import CompensationConfigError, CompensationError

__all__ = [
    "COMPENSATION_KIND",
    "RUN_POLICY_KEY",
    "CompensationConfigError",
    "CompensationError",
    "CompensationReport",
    "CompensationResumer",
    "EffectOutcome",
    "SyncCompensationResumer",
    "compensate",
    "compensate_sync",
    "compensated_run",
    "compensating",
    "compensating_graph",
    "compensation_began",
    "compensation_waits_on",
    "is_compensation_request",
    "run_policy",
    "stopped_run",
]
