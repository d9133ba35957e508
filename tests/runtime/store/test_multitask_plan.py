"""``multitask.plan``: the table of §3.10, row by row."""

from __future__ import annotations

from typing import Any

import pytest

from tether.runtime.errors import InvalidRunRequestError
from tether.runtime.multitask import InflightRun, MultitaskPlan, plan, superseded_reason

PENDING = InflightRun("r1", "pending")
RUNNING = InflightRun("r2", "running")
TETHERS = InflightRun("r0", "running", tethers=True)
TABLE: list[tuple[Any, tuple[InflightRun, ...], MultitaskPlan]] = [
    ("reject", (), MultitaskPlan(insert=True)),
    ("reject", (RUNNING,), MultitaskPlan(insert=False, reject=True)),
    ("enqueue", (), MultitaskPlan(insert=True)),
    ("enqueue", (RUNNING, PENDING), MultitaskPlan(insert=True)),
    ("interrupt", (), MultitaskPlan(insert=True)),
    (
        "interrupt",
        (RUNNING, PENDING),
        MultitaskPlan(insert=True, cancel=(("r2", "interrupt"), ("r1", "interrupt"))),
    ),
    ("rollback", (), MultitaskPlan(insert=True)),
    ("rollback", (PENDING,), MultitaskPlan(insert=True, cancel=(("r1", "rollback"),))),
    # tether's own run (a continuation, a rollback) is waited for, never cancelled
    ("interrupt", (TETHERS, PENDING), MultitaskPlan(insert=True, cancel=(("r1", "interrupt"),))),
    ("rollback", (TETHERS,), MultitaskPlan(insert=True)),
    ("reject", (TETHERS,), MultitaskPlan(insert=False, reject=True)),
]


@pytest.mark.parametrize(("strategy", "inflight", "expected"), TABLE)
def test_plan(strategy: Any, inflight: tuple[InflightRun, ...], expected: MultitaskPlan) -> None:
    assert plan(strategy, inflight) == expected


def test_an_unknown_strategy_is_refused() -> None:
    with pytest.raises(InvalidRunRequestError, match="multitask_strategy 'race' is unknown"):
        plan("race", ())  # type: ignore[arg-type]


def test_a_run_that_is_not_in_flight_is_refused() -> None:
    with pytest.raises(InvalidRunRequestError, match="run r3 is interrupted, not in flight"):
        plan("interrupt", [InflightRun("r3", "interrupted")])


def test_the_superseded_reason_is_langgraphs() -> None:
    assert superseded_reason("new", "rollback") == (
        "superseded by run new (multitask_strategy=rollback)"
    )
