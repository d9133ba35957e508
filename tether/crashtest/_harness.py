"""The crash harness: kill a graph at every boundary in turn, resume it, compare.

1. Run the target once, unkilled, in a child process with
   ``TETHER_CRASH_TRACE`` set: the trace lists every boundary the run reaches
   (``model.before:1``, ``checkpoint.put.after:3``, ...). Its final state and
   effect counts are the reference.
2. For each boundary, on a fresh database and a fresh working directory: start
   a child with ``TETHER_CRASH_AT=<boundary>``, which SIGKILLs itself there;
   then resume the thread in a new child without crash settings until it
   finishes.
3. Compare each resumed run with the reference: the final state, the effects
   on the outside world (more than the reference is a duplicate effect), and
   the model calls (a call the killed process had already recorded and the
   resuming process asked again is a re-asked call).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tether._calllog import read_calls
from tether._crashpoints import CRASH_AT_ENV, CRASH_TRACE_ENV
from tether.crashtest._child import ChildJob, forked_entry
from tether.crashtest._databases import check_url, fresh_database
from tether.crashtest._launch import run_forked
from tether.crashtest._target import CrashTarget, CrashTestError, load_target

__all__ = ["BoundaryOutcome", "CrashTestReport", "run_crashtest"]

_CHILD_TIMEOUT_S = 300.0
_SIGKILL_RC = -9


@dataclass
class BoundaryOutcome:
    """What happened when the run was killed at one boundary and resumed."""

    boundary: str
    killed: bool = False
    completed: bool = False
    state_equal: bool = False
    duplicate_effects: int = 0
    missing_compensations: int = 0
    reasked_model_calls: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            self.killed
            and self.completed
            and self.state_equal
            and not self.duplicate_effects
            and not self.missing_compensations
            and not self.reasked_model_calls
            and not self.problems
        )


@dataclass
class CrashTestReport:
    """The outcome of a whole crash test."""

    boundaries: int
    outcomes: list[BoundaryOutcome]
    scratch: Path

    def _count(self, pick: Callable[[BoundaryOutcome], int | bool]) -> int:
        return sum(int(pick(o)) for o in self.outcomes)

    @property
    def kills(self) -> int:
        return self._count(lambda o: o.killed)

    @property
    def completed(self) -> int:
        return self._count(lambda o: o.completed)

    @property
    def state_mismatches(self) -> int:
        return self._count(lambda o: o.completed and not o.state_equal)

    @property
    def duplicate_effects(self) -> int:
        return self._count(lambda o: o.duplicate_effects)

    @property
    def missing_compensations(self) -> int:
        return self._count(lambda o: o.missing_compensations)

    @property
    def reasked_model_calls(self) -> int:
        return self._count(lambda o: o.reasked_model_calls)

    @property
    def ok(self) -> bool:
        return (
            self.boundaries > 0
            and all(o.ok for o in self.outcomes)
            and (len(self.outcomes) == self.boundaries)
        )

    def summary(self) -> str:
        """The one-line summary ``tether crashtest`` prints last."""
        return (
            f"crashtest: boundaries={self.boundaries} kills={self.kills} "
            f"completed={self.completed} state_mismatches={self.state_mismatches} "
            f"duplicate_effects={self.duplicate_effects} "
            f"missing_compensations={self.missing_compensations} "
            f"reasked_model_calls={self.reasked_model_calls}"
        )


@dataclass(frozen=True)
class _Exit:
    returncode: int
    stderr: str


@dataclass(frozen=True)
class _Run:
    spec: str
    target: CrashTarget
    scratch: Path

    def child(
        self, db: tuple[str, dict[str, Any]], workdir: Path, result: Path, env: dict[str, str]
    ) -> _Exit:
        workdir.mkdir(parents=True, exist_ok=True)
        log = workdir.with_name(f"{workdir.name}-{uuid.uuid4().hex[:6]}.log")
        returncode = run_forked(
            forked_entry,
            (ChildJob(self.spec, *db, workdir, result, env, log, os.getcwd()),),
            name="tether-crashtest-child",
            timeout=_CHILD_TIMEOUT_S,
        )
        if returncode is None:
            raise CrashTestError(
                f"a child run of {self.spec!r} did not finish in "
                f"{_CHILD_TIMEOUT_S:.0f}s; its output is in {log}"
            )
        stderr = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        return _Exit(returncode, stderr)


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _reference(run: _Run, url: str) -> tuple[list[str], dict[str, Any]]:
    trace = run.scratch / "reference.trace"
    result = run.scratch / "reference.json"
    with fresh_database(url, "reference") as db:
        proc = run.child(db, run.scratch / "reference", result, {CRASH_TRACE_ENV: str(trace)})
    if proc.returncode != 0:
        raise CrashTestError(
            f"the unkilled reference run of {run.spec!r} failed with exit code "
            f"{proc.returncode}:\n{_tail(proc.stderr)}"
        )
    reference: dict[str, Any] = json.loads(result.read_text(encoding="utf-8"))
    if not reference["completed"]:
        raise CrashTestError(f"the unkilled reference run of {run.spec!r} did not finish")
    boundaries = trace.read_text(encoding="utf-8").split() if trace.exists() else []
    return boundaries, reference


def _one_boundary(
    run: _Run, url: str, index: int, boundary: str, reference: Mapping[str, Any]
) -> BoundaryOutcome:
    outcome = BoundaryOutcome(boundary)
    workdir = run.scratch / f"boundary-{index:03d}"
    result = workdir.with_suffix(".json")
    with fresh_database(url, f"b{index:03d}") as db:
        killed = run.child(db, workdir, result, {CRASH_AT_ENV: boundary})
        outcome.killed = killed.returncode == _SIGKILL_RC
        if not outcome.killed:
            outcome.problems.append(
                f"the run was not killed at {boundary} (exit code "
                f"{killed.returncode}){_tail(killed.stderr, 5)}"
            )
        resumed = run.child(db, workdir, result, {})
    if resumed.returncode != 0 or not result.exists():
        outcome.problems.append(
            f"the resume failed with exit code {resumed.returncode}:\n{_tail(resumed.stderr)}"
        )
        return outcome
    final: dict[str, Any] = json.loads(result.read_text(encoding="utf-8"))
    outcome.completed = bool(final["completed"])
    outcome.state_equal = final["state"] == reference["state"]
    if not outcome.state_equal:
        (workdir / "state.json").write_text(json.dumps(final["state"], indent=1), "utf-8")
        outcome.problems.append(
            f"final state differs from the unkilled run's (see "
            f"{workdir / 'state.json'} and {run.scratch / 'reference.json'})"
        )
    _compare_effects(outcome, final["effects"], reference["effects"], run.target.compensations)
    if run.target.calls_file:
        outcome.reasked_model_calls = _reasked(workdir / run.target.calls_file, final)
    return outcome


def _compare_effects(
    outcome: BoundaryOutcome,
    effects: Mapping[str, int],
    expected: Mapping[str, int],
    compensations: tuple[str, ...] = (),
) -> None:
    for kind in sorted({*effects, *expected}):
        got, want = effects.get(kind, 0), expected.get(kind, 0)
        if got > want:
            outcome.duplicate_effects += got - want
            outcome.problems.append(f"{got} {kind} where the unkilled run made {want}")
        elif got < want:
            if kind in compensations:
                outcome.missing_compensations += want - got
            outcome.state_equal = False
            outcome.problems.append(f"only {got} {kind} where the unkilled run made {want}")


def _reasked(calls_file: Path, final: Mapping[str, Any]) -> int:
    """Calls the resuming process made whose result the killed process had recorded."""
    calls = read_calls(calls_file)
    killed = [c for c in calls if c.pid != final["pid"]]
    resumed = [c for c in calls if c.pid == final["pid"]]
    # Model calls are recorded in the order they are made, so the step log's count
    # says which of the killed process's calls had their result written down.
    recorded = {c.input_hash for c in killed[: final["recorded_model_calls_before"]]}
    return sum(1 for c in resumed if c.input_hash in recorded)


def run_crashtest(
    spec: str,
    url: str,
    *,
    workers: int = 2,
    scratch: Path | None = None,
    progress: Callable[[str], None] = print,
) -> CrashTestReport:
    """Crash test the target ``spec`` (``MODULE:ATTR``) on the database at ``url``.

    Args:
        spec: Names a :class:`CrashTarget` (see :mod:`tether.crashtest._target`).
        url: A ``sqlite://``, ``postgresql://`` or ``redis://`` URL; every run
            gets a fresh database (or Redis key prefix) derived from it.
        workers: Boundaries tested at the same time.
        scratch: Directory for working files; a temporary one by default. It is
            removed after a clean run and kept (and named) after a failure.
        progress: Receives one line per finished boundary.

    Raises:
        CrashTestError: Bad target or URL, or the unkilled run itself failed.
    """
    check_url(url)
    if workers < 1:
        raise CrashTestError(f"workers must be at least 1, got {workers}")
    target = load_target(spec)
    own_scratch = scratch is None
    scratch = Path(tempfile.mkdtemp(prefix="tether-crashtest-")) if scratch is None else scratch
    scratch.mkdir(parents=True, exist_ok=True)
    run = _Run(spec, target, scratch)
    boundaries, reference = _reference(run, url)
    progress(f"crashtest: {spec}: the unkilled run reached {len(boundaries)} boundaries")
    outcomes: list[BoundaryOutcome] = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {
            pool.submit(_one_boundary, run, url, i, b, reference): b
            for i, b in enumerate(boundaries)
        }
        for future in as_completed(futures):
            outcome = future.result()
            outcomes.append(outcome)
            verdict = "ok" if outcome.ok else "FAIL: " + "; ".join(outcome.problems)
            progress(
                f"crashtest: [{len(outcomes)}/{len(boundaries)}] "
                f"killed at {outcome.boundary}: {verdict}"
            )
    outcomes.sort(key=lambda o: boundaries.index(o.boundary))
    report = CrashTestReport(len(boundaries), outcomes, scratch)
    if report.ok and own_scratch:
        shutil.rmtree(scratch, ignore_errors=True)
    elif not report.ok:
        progress(f"crashtest: working files kept in {scratch}")
    return report
