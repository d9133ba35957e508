"""The crash harness: ``tether crashtest`` and what it is built from.

* :func:`crash_point` (defined in :mod:`tether._crashpoints`, at the bottom
  of the package) marks the boundaries where a run may be killed;
* :class:`CrashTarget` describes a graph to crash test;
* :func:`run_crashtest` kills a run at every boundary in turn, resumes it in a
  fresh process and compares it with an unkilled run.

The harness depends on the hook, never the reverse: the recording layer
imports :mod:`tether._crashpoints` directly and never loads this package. The
names here load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether._crashpoints import crash_point
from tether._lazy import lazy_attributes

if TYPE_CHECKING:
    from tether.crashtest._harness import BoundaryOutcome, CrashTestReport, run_crashtest
    from tether.crashtest._saver import CrashPointSaver
    from tether.crashtest._target import (
        CrashTarget,
        CrashTestError,
        load_target,
        normalize_state,
    )

__all__ = [
    "BoundaryOutcome",
    "CrashPointSaver",
    "CrashTarget",
    "CrashTestError",
    "CrashTestReport",
    "crash_point",
    "load_target",
    "normalize_state",
    "run_crashtest",
]

__getattr__ = lazy_attributes(
    __name__,
    {
        "BoundaryOutcome": "tether.crashtest._harness",
        "CrashTestReport": "tether.crashtest._harness",
        "run_crashtest": "tether.crashtest._harness",
        "CrashPointSaver": "tether.crashtest._saver",
        "CrashTarget": "tether.crashtest._target",
        "CrashTestError": "tether.crashtest._target",
        "load_target": "tether.crashtest._target",
        "normalize_state": "tether.crashtest._target",
    },
)
