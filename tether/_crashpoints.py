"""Named crash points: places where the crash harness may SIGKILL the process.

This hook sits at the bottom of the package: the recording layer and durable
tools call it, and the harness (``tether.crashtest``) drives it through the
environment. It imports nothing from tether, so production code never loads
the harness.

Production code calls :func:`crash_point` at every boundary a crash could fall
on (before and after a model call, a tool effect, a checkpoint write). It costs
one dictionary lookup when no crash test is running. Under ``tether crashtest``
the child process is started with ``TETHER_CRASH_AT=<name>:<n>``, and the n-th
time (1-based) the process reaches the point called ``name`` it kills itself
with SIGKILL: no cleanup, no flush, exactly like a power cut. With
``TETHER_CRASH_TRACE=<file>`` every point reached is appended to that file, so
the harness can enumerate the boundaries of an unkilled run.

The boundaries tether marks:

* ``model.before`` / ``model.after``: around a recorded model call; ``after``
  is reached once the answer is durably recorded.
* ``tool.before`` / ``tool.after``: around a durable tool's effect; ``before``
  is reached once the intent is claimed, ``after`` once the result is recorded.
* ``checkpoint.put.before`` / ``checkpoint.put.after`` and
  ``checkpoint.put_writes.before`` / ``checkpoint.put_writes.after``: around
  each checkpoint write (added by the harness's ``CrashPointSaver``).
"""

from __future__ import annotations

import os
import signal
from collections import Counter

__all__ = ["CRASH_AT_ENV", "CRASH_TRACE_ENV", "crash_point"]

CRASH_AT_ENV = "TETHER_CRASH_AT"
CRASH_TRACE_ENV = "TETHER_CRASH_TRACE"

_seen: Counter[str] = Counter()


def _target() -> tuple[str, int] | None:
    spec = os.environ.get(CRASH_AT_ENV)
    if not spec:
        return None
    name, _, nth = spec.rpartition(":")
    return name, int(nth)


def crash_point(name: str) -> None:
    """Mark a boundary; under the crash harness this may be where the process dies.

    Args:
        name: A stable boundary name such as ``"model.after"`` or
            ``"checkpoint.put.before"``.
    """
    trace = os.environ.get(CRASH_TRACE_ENV)
    target = _target() if not trace else None
    if trace is None and target is None:
        return
    _seen[name] += 1
    if trace:
        with open(trace, "a", encoding="utf-8") as out:
            out.write(f"{name}:{_seen[name]}\n")
            out.flush()
            os.fsync(out.fileno())
        target = _target()
    if target is not None and target == (name, _seen[name]):
        os.kill(os.getpid(), signal.SIGKILL)
