"""The runtime and server benchmarks still run: each one's ``--quick`` mode, end to end.

A smoke test only: it checks that a benchmark completes and prints its figures,
never what the figures are (the machine running the tests decides those).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tether.testing.services import ENV_POSTGRES

BENCH = Path(__file__).resolve().parents[2] / "bench"

EXPECTED = {
    "runtime_resume.py": "notify p50",
    "runtime_failover.py": "duplicate payments: 0 in 2 runs",
    "runtime_idle.py": "100 suspended vs none",
    "runtime_throughput.py": "ratio = tether / in-process LangGraph",
    "server_throughput.py": "tether / in-process",
    "server_resume.py": "tether first-event p50",
    "retention_sweep.py": "step latency ratio = during / no sweep",
}


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_a_runtime_benchmark_runs_in_quick_mode(script: str, servers: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / script), "--quick"],
        env={**os.environ, ENV_POSTGRES: servers["postgres"]},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert EXPECTED[script] in done.stdout, done.stdout


STEP_BENCHES = {
    "step_overhead.py": ["--steps", "5", "--repeat", "1"],
    "record_floor.py": ["--steps", "5", "--repeat", "1", "--calls", "5"],
}


@pytest.mark.parametrize("script", sorted(STEP_BENCHES))
def test_a_step_benchmark_runs_on_small_figures(script: str, tmp_path: Path) -> None:
    urls = ["--url", "memory://", "--url", f"sqlite:///{tmp_path}/bench.db"]
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *STEP_BENCHES[script], *urls],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line.split()[0] for line in done.stdout.splitlines() if line.endswith("x")]
    assert rows == ["memory", "sqlite"], done.stdout
