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
    from tether.crashtest.harness import BoundaryOutcome, CrashTestReport, run_crashtest
    from tether.crashtest.saver import CrashPointSaver
    from tether.crashtest.target import (
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
        "BoundaryOutcome": "tether.crashtest.harness",
        "CrashTestReport": "tether.crashtest.harness",
        "run_crashtest": "tether.crashtest.harness",
        "CrashPointSaver": "tether.crashtest.saver",
        "CrashTarget": "tether.crashtest.target",
        "CrashTestError": "tether.crashtest.target",
        "load_target": "tether.crashtest.target",
        "normalize_state": "tether.crashtest.target",
    },
)
