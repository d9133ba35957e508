"""The crash harness: ``tether crashtest`` and what it is built from.

* :func:`~tether.crashtest.points.crash_point` marks the boundaries where a run
  may be killed;
* :class:`CrashTarget` describes a graph to crash test;
* :func:`run_crashtest` kills a run at every boundary in turn, resumes it in a
  fresh process and compares it with an unkilled run.

Only :mod:`tether.crashtest.points` is imported eagerly: the recording layer
calls ``crash_point`` and must not pull in the harness, which itself runs
graphs built on that layer. The other names load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tether.crashtest.points import crash_point

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

_LAZY = {
    "BoundaryOutcome": "harness",
    "CrashTestReport": "harness",
    "run_crashtest": "harness",
    "CrashPointSaver": "saver",
    "CrashTarget": "target",
    "CrashTestError": "target",
    "load_target": "target",
    "normalize_state": "target",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tether.crashtest' has no attribute {name!r}")
    return getattr(importlib.import_module(f"tether.crashtest.{module}"), name)
