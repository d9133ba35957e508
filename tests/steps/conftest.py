"""Helpers for the steps tests: running the child process and reading its output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.backends import Backend, fresh_backend

ROOT = Path(__file__).resolve().parents[2]
ChildRunner = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture
def run_child(tmp_path: Path) -> ChildRunner:
    """Run ``tests.steps.child`` once; ``crash_at`` sets TETHER_CRASH_AT."""

    def run(
        scenario: str, backend: Backend, thread: str = "t1", crash_at: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_CRASH")}
        if crash_at:
            env["TETHER_CRASH_AT"] = crash_at
        env["PYTHONPATH"] = str(ROOT)
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "tests.steps.child",
                scenario,
                backend.url,
                json.dumps(backend.options),
                thread,
                str(tmp_path),
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    return run


def output(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The JSON line a finished child printed (fails with its stderr otherwise)."""
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def sqlite_backend(tmp_path: Path) -> Iterator[Backend]:
    """A private SQLite database: for multi-process variants whose logic is backend-neutral."""
    with fresh_backend("sqlite", {}, tmp_path) as b:
        yield b
