"""How the harness counts re-asked model calls and effects, on hand-made outcomes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tether.crashtest._harness import (
    BoundaryOutcome,
    CrashTestReport,
    _compare_effects,
    _reasked,
)


def _calls(path: Path, lines: list[tuple[int, str]]) -> Path:
    path.write_text("".join(f"{pid} {h} rule\n" for pid, h in lines), encoding="utf-8")
    return path


def test_a_recorded_call_asked_again_counts_as_reasked(tmp_path: Path) -> None:
    # The killed process (pid 1) made calls a, b, c; the step log had recorded a and b.
    calls = _calls(
        tmp_path / "calls.log", [(1, "a"), (1, "b"), (1, "c"), (2, "b"), (2, "c"), (2, "d")]
    )
    final = {"pid": 2, "recorded_model_calls_before": 2}
    # b was recorded and asked again; c was never recorded, so asking it again is right.
    assert _reasked(calls, final) == 1


def test_nothing_reasked_when_the_resume_only_asks_new_questions(tmp_path: Path) -> None:
    calls = _calls(tmp_path / "calls.log", [(1, "a"), (1, "b"), (2, "c")])
    assert _reasked(calls, {"pid": 2, "recorded_model_calls_before": 2}) == 0


def test_effects_beyond_the_reference_are_duplicates_and_missing_ones_mismatch() -> None:
    more = BoundaryOutcome("tool.before:1", killed=True, completed=True, state_equal=True)
    _compare_effects(more, {"refunds": 2, "emails": 1}, {"refunds": 1, "emails": 1})
    assert more.duplicate_effects == 1
    assert not more.ok
    fewer = BoundaryOutcome("tool.before:1", killed=True, completed=True, state_equal=True)
    _compare_effects(fewer, {"refunds": 0}, {"refunds": 1})
    assert fewer.duplicate_effects == 0
    assert not fewer.state_equal
    assert fewer.missing_compensations == 0  # a refund is no compensation


def test_fewer_compensations_than_the_unkilled_run_are_missing_compensations() -> None:
    missed = BoundaryOutcome("compensation.before:1", killed=True, completed=True, state_equal=True)
    _compare_effects(missed, {"reversals": 0}, {"reversals": 1}, ("reversals",))
    assert missed.missing_compensations == 1
    assert not missed.ok


def test_summary_line_and_verdict(tmp_path: Path) -> None:
    good = BoundaryOutcome("model.after:1", killed=True, completed=True, state_equal=True)
    bad = BoundaryOutcome(
        "model.after:2", killed=True, completed=True, state_equal=False, reasked_model_calls=1
    )
    report = CrashTestReport(2, [good, bad], tmp_path)
    assert report.summary() == (
        "crashtest: boundaries=2 kills=2 completed=2 state_mismatches=1 "
        "duplicate_effects=0 missing_compensations=0 reasked_model_calls=1"
    )
    assert not report.ok
    assert CrashTestReport(1, [good], tmp_path).ok
    assert not CrashTestReport(0, [], tmp_path).ok  # a run that tested nothing is no pass
    unkilled = BoundaryOutcome("x:1", killed=False, completed=True, state_equal=True)
    assert not CrashTestReport(1, [unkilled], tmp_path).ok


@pytest.mark.parametrize("module", ["tether.steps", "tether.crashtest", "tether.graphs", "tether"])
def test_imports_in_any_order(module: str) -> None:
    # The recording layer imports crash points; the harness imports graphs built on
    # that layer. Neither may need the other half-initialised.
    code = f"import {module}; from tether.crashtest import CrashTarget, run_crashtest"
    subprocess.run([sys.executable, "-c", code], check=True)
