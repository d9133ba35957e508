"""CPU time per run, by process: where a benchmark's work is done, and how much of it.

Throughput on a shared 2-CPU machine moves by ±10-20% from run to run; the
CPU each peer spends per run moves far less, so a change of a few percent
shows there first. :class:`CpuMeter` reads the kernel's own accounting
(``/proc/<pid>/stat``: user + system time) of named groups of processes:

* a process group (``start_new_session=True`` makes a child the leader of its
  own): ``tether serve``, each ``tether worker``, ``langgraph dev``;
* every process named ``postgres`` (the server and its backends; a backend
  that exits during the measurement takes its time with it, so the bench
  peers keep theirs open);
* this process (``time.process_time()``): the SDK clients, or in-process
  LangGraph itself.

Linux only: elsewhere :meth:`CpuMeter.available` is false and the figures are
left out, not guessed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

_PROC = Path("/proc")
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid_dir: Path) -> tuple[str, int, float] | None:
    """``(comm, process group, CPU seconds)`` of one ``/proc/<pid>``, or ``None`` if gone."""
    try:
        raw = (pid_dir / "stat").read_text()
    except OSError:
        return None
    comm = raw[raw.index("(") + 1 : raw.rindex(")")]
    fields = raw[raw.rindex(")") + 2 :].split()
    # After "pid (comm) ": state ppid pgrp session tty tpgid flags minflt cminflt
    # majflt cmajflt utime stime ...
    return comm, int(fields[2]), (int(fields[11]) + int(fields[12])) / _TICK


def _processes() -> list[tuple[str, int, float]]:
    found = []
    for entry in _PROC.iterdir():
        if entry.name.isdigit() and (stat := _stat(entry)) is not None:
            found.append(stat)
    return found


def group_seconds(pgid: int) -> float:
    """CPU seconds used so far by the live processes of process group ``pgid``."""
    return sum(cpu for _, group, cpu in _processes() if group == pgid)


def postgres_seconds() -> float:
    """CPU seconds used so far by the live processes named ``postgres``."""
    return sum(cpu for comm, _, cpu in _processes() if comm == "postgres")


class CpuMeter:
    """CPU seconds of named groups of processes between :meth:`start` and :meth:`per_run`."""

    def __init__(self, groups: dict[str, Callable[[], float]]) -> None:
        self.groups = {**groups, "postgres": postgres_seconds, "this process": time.process_time}
        self._began: dict[str, float] = {}

    @staticmethod
    def available() -> bool:
        return (_PROC / "self" / "stat").exists()

    @classmethod
    def of_groups(cls, names: dict[str, int]) -> CpuMeter:
        """A meter of process groups by leader pid (``{"tether serve": pid}``)."""
        return cls({name: (lambda g=pgid: group_seconds(g)) for name, pgid in names.items()})

    def start(self) -> None:
        if self.available():
            self._began = {name: read() for name, read in self.groups.items()}

    def per_run(self, runs: int) -> dict[str, float]:
        """Milliseconds of CPU per run of each group since :meth:`start` (empty off Linux)."""
        if not self._began or runs <= 0:
            return {}
        return {
            name: (read() - self._began[name]) * 1000 / runs for name, read in self.groups.items()
        }
