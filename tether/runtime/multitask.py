"""What creating a run does to the runs already in flight on its thread (design §3.10).

Pure: :func:`plan` maps a strategy and the thread's in-flight runs (``pending``
or ``running``) to a :class:`MultitaskPlan`; the store carries it out inside the
create transaction.

| strategy  | nothing in flight | runs in flight                                   |
|-----------|-------------------|--------------------------------------------------|
| reject    | insert            | reject (``ThreadBusyError``), insert nothing     |
| enqueue   | insert            | insert; the claim's FIFO-head rule orders it     |
| interrupt | insert            | insert, cancel each in-flight run ``interrupt``  |
| rollback  | insert            | insert, cancel each in-flight run ``rollback``   |

An ``interrupted`` run is not in flight (it holds nothing); the store closes it
as ``success`` ("continued by run <id>") whatever the strategy.

A run tether itself created to finish another run's compensation or rollback
(metadata :data:`TETHER_RUN_MARK`) is never cancelled by ``interrupt`` or
``rollback``: the new run waits behind it, as with ``enqueue``. Cancelling it
would leave a person's stored decision, or a rollback, never carried out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from tether.runtime.errors import InvalidRunRequestError
from tether.runtime.models import (
    ACTIVE,
    MULTITASK_STRATEGIES,
    CancelAction,
    MultitaskStrategy,
    RunStatus,
)

__all__ = [
    "BUSY_MESSAGE",
    "TETHER_RUN_MARK",
    "InflightRun",
    "MultitaskPlan",
    "check_strategy",
    "plan",
    "superseded_reason",
]

# LangGraph's 409 text (langgraph_api models/run.py).
BUSY_MESSAGE = (
    "Thread is already running a task. Wait for it to finish or choose a different "
    "multitask strategy."
)


TETHER_RUN_MARK = "tether_compensates"
"""Metadata key of a run tether created to continue a compensation or a rollback; the
value is the id of the run it finishes. A run request may not set it."""


class InflightRun(NamedTuple):
    """A run on the thread that is ``pending`` or ``running`` (``tethers``: one of tether's
    own, marked :data:`TETHER_RUN_MARK`)."""

    run_id: str
    status: RunStatus
    tethers: bool = False


@dataclass(frozen=True)
class MultitaskPlan:
    """Insert the new run or not, and which in-flight runs to cancel with which action."""

    insert: bool
    cancel: tuple[tuple[str, CancelAction], ...] = ()
    reject: bool = False


def check_strategy(strategy: object) -> MultitaskStrategy:
    """``strategy`` if it is one of LangGraph's four, else ``InvalidRunRequestError``."""
    if strategy not in MULTITASK_STRATEGIES:
        raise InvalidRunRequestError(
            f"multitask_strategy {strategy!r} is unknown; use one of "
            f"{', '.join(MULTITASK_STRATEGIES)}"
        )
    return strategy


def plan(strategy: MultitaskStrategy, inflight: Sequence[InflightRun]) -> MultitaskPlan:
    """The plan for a new run on a thread with ``inflight`` runs.

    Raises:
        InvalidRunRequestError: ``strategy`` is unknown, or an "in-flight" run
            is neither pending nor running.
    """
    check_strategy(strategy)
    for run in inflight:
        if run.status not in ACTIVE:
            raise InvalidRunRequestError(
                f"run {run.run_id} is {run.status}, not in flight (pending or running)"
            )
    if not inflight or strategy == "enqueue":
        return MultitaskPlan(insert=True)
    if strategy == "reject":
        return MultitaskPlan(insert=False, reject=True)
    action: CancelAction = "interrupt" if strategy == "interrupt" else "rollback"
    cancel = tuple((run.run_id, action) for run in inflight if not run.tethers)
    return MultitaskPlan(insert=True, cancel=cancel)


def superseded_reason(new_run_id: str, strategy: MultitaskStrategy) -> str:
    """The cancel reason of a run superseded by ``new_run_id`` (LangGraph's wording)."""
    return f"superseded by run {new_run_id} (multitask_strategy={strategy})"
