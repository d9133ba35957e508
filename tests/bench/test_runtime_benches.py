"""The runtime and server benchmarks still run: each one's ``--quick`` mode, end to end.

A smoke test only: it checks that a benchmark completes and prints its figures,
never what the figures are (the machine running the tests decides those).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psycopg
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


def test_the_latency_relay_delays_each_round_trip(servers: dict[str, str]) -> None:
    """``--latency-ms``: PostgreSQL through ``bench/_latency.py`` answers at least 2 x delay later.

    Checked against the shortest round trip of several, so a loaded machine
    cannot make it pass: only the relay's delay can.
    """
    sys.path.insert(0, str(BENCH))
    try:
        from _latency import delayed_url
    finally:
        sys.path.remove(str(BENCH))

    def shortest_round_trip(url: str) -> float:
        with psycopg.connect(url, autocommit=True) as conn:
            times = []
            for _ in range(20):
                started = time.perf_counter()
                assert conn.execute("SELECT 41 + 1").fetchone() == (42,)
                times.append(time.perf_counter() - started)
        return min(times)

    with delayed_url(servers["postgres"], 5) as url:
        assert url != servers["postgres"]
        assert shortest_round_trip(url) >= 0.010


def test_the_step_benchmark_takes_a_latency(servers: dict[str, str]) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "step_overhead.py"),
            *STEP_BENCHES["step_overhead.py"],
            "--latency-ms",
            "0.5",
            "--url",
            servers["postgres"],
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PostgreSQL and Redis 0.5 ms away each way" in done.stdout, done.stdout
    rows = [line.split()[0] for line in done.stdout.splitlines() if line.endswith("x")]
    assert rows == ["postgresql"], done.stdout
