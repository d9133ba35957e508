"""The model-call log: one line per real model call, read by tests and the crash harness.

A scripted model appends ``"<pid> <input sha256> <rule>"`` to a file for every
call it really makes (a replayed answer is not a call). The crash harness and
the tests read the file to prove that nothing was asked twice. The format
lives here, below both the reference agents that write it and the harness that
reads it, so neither has to import the other.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ScriptedCall", "append_call", "read_calls"]


@dataclass(frozen=True)
class ScriptedCall:
    """One line of a calls file: which process asked what, and which rule answered."""

    pid: int
    input_hash: str
    rule: str


def append_call(calls_file: str | os.PathLike[str], input_hash: str, rule: str) -> None:
    """Append one call for this process, durably (a SIGKILL right after loses nothing)."""
    with open(calls_file, "a", encoding="utf-8") as out:
        out.write(f"{os.getpid()} {input_hash} {rule}\n")
        out.flush()
        os.fsync(out.fileno())


def read_calls(calls_file: str | os.PathLike[str]) -> list[ScriptedCall]:
    """Every call recorded in ``calls_file``, in order (empty if it does not exist)."""
    path = Path(calls_file)
    if not path.exists():
        return []
    calls = []
    for line in path.read_text(encoding="utf-8").splitlines():
        pid, input_hash, rule = line.split(" ", 2)
        calls.append(ScriptedCall(int(pid), input_hash, rule))
    return calls
