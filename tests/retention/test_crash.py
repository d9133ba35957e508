"""A sweep killed mid-batch (a real SIGKILL) and run again completes without harm."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.backends import Backend
from tests.retention.world import World, marker, open_world, seed
from tether.retention import audit_trail

THREADS = [f"s{i}" for i in range(5)]
ROOT = Path(__file__).parents[2]


def _sweep(world: World, crash_at: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TETHER_CRASH_AT"}
    if crash_at is not None:
        env["TETHER_CRASH_AT"] = crash_at
    args = [world.store_url, world.backend.url]
    if world.backend.key_prefix:
        args.append(world.backend.key_prefix)
    return subprocess.run(
        [sys.executable, "-m", "tests.retention.sweep_child", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("crash_at", "resumed"),
    # At least the killed thread's deletion is finished first; with threads handled
    # concurrently, others may have been caught between their rows and checkpoints too.
    [("retention.rows_deleted:3", 1), ("retention.summary_written:2", 0)],
)
async def test_a_sweep_killed_mid_batch_completes_when_run_again(
    durable_backend: Backend, tmp_path: Path, crash_at: str, resumed: int
) -> None:
    async with open_world(durable_backend, tmp_path) as world:
        for thread_id in THREADS:
            await seed(world, thread_id, "success", days=40)
        await seed(world, "young", "success", days=1)

    killed = _sweep(world, crash_at)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    async with open_world(durable_backend, tmp_path) as world:
        raw = await world.raw()
        assert sum(marker(t) in raw for t in THREADS) > 0  # it died before the end

    finished = _sweep(world, None)
    assert finished.returncode == 0, finished.stderr
    report = json.loads(finished.stdout)
    assert report["resumed"] >= resumed
    async with open_world(durable_backend, tmp_path) as world:
        raw = await world.raw()
        assert [t for t in THREADS if marker(t) in raw] == []
        assert marker("young") in raw
        for thread_id in THREADS:
            (summary,) = (await audit_trail(world.runtime.store, thread_id)).summaries
            assert summary["state"] == "done"
            assert summary["model_calls"] == 1  # written before anything of it went
