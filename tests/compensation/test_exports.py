"""The compensation API is exactly what ``tether.compensation.__all__`` lists."""

from __future__ import annotations

import tether.compensation

EXPECTED = [
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


def test_all_is_locked_and_importable() -> None:
    assert tether.compensation.__all__ == EXPECTED
    for name in EXPECTED:
        assert getattr(tether.compensation, name) is not None, name
