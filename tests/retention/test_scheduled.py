"""The sweep as the scheduler's job: in a tick, and in a real ``tether worker --retention``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from tests.backends import Backend, fresh_backend
from tests.retention.world import NOW, marker, open_world, seed
from tests.runtime.workers import PROJECT, Workers
from tether.retention import RetentionPolicy, Rule, SweepReport, audit_trail, scheduled_sweep
from tether.runtime.scheduler import Scheduler

POLICY = RetentionPolicy(rules=(Rule("success", timedelta(days=30)),), every=timedelta(hours=1))


@pytest.fixture
def sqlite_backend(tmp_path: Path) -> Iterator[Backend]:
    with fresh_backend("sqlite", {}, tmp_path) as backend:
        yield backend


async def test_the_scheduler_sweeps_every_policy_interval(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    reports: list[SweepReport] = []
    async with open_world(sqlite_backend, tmp_path) as world:
        await seed(world, "old", "success", days=40)
        await seed(world, "young", "success", days=1)
        scheduler = Scheduler(
            world.runtime, retention=scheduled_sweep(POLICY, on_report=reports.append)
        )
        first = await scheduler.tick(NOW)
        await scheduler.tick(NOW + timedelta(minutes=30))  # not due yet
        await seed(world, "later", "success", days=29.99)  # 30 days old an hour on
        await scheduler.tick(NOW + timedelta(hours=1))
        assert first.errors == []
        assert [r.deleted for r in reports] == [1, 1]
        raw = await world.raw()
        assert (marker("old") in raw, marker("later") in raw, marker("young") in raw) == (
            False,
            False,
            True,
        )


def test_a_worker_with_retention_sweeps_as_it_leads(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    import asyncio

    async def prepare() -> None:
        async with open_world(sqlite_backend, tmp_path) as world:
            await seed(world, "old", "success", days=40)
            await seed(world, "young", "success", days=1)

    asyncio.run(prepare())
    policy = tmp_path / "tether.json"
    policy.write_text(
        json.dumps({"retention": {"rules": [{"status": "success", "max_age": "30d"}]}})
    )
    workdir = tmp_path / "world"
    workdir.mkdir()
    workers = Workers(sqlite_backend.url, workdir)
    try:
        workers.start(1, extra_args=["--retention", str(policy)])
        workers.wait_log(0, "retention: 1 examined, 1 deleted", timeout=60)
    finally:
        workers.stop_all()

    async def check() -> tuple[list[str], str]:
        async with open_world(sqlite_backend, tmp_path) as world:
            trail = await audit_trail(world.runtime.store, "old")
            return [s["state"] for s in trail.summaries], await world.raw()

    states, raw = asyncio.run(check())
    assert states == ["done"]
    assert marker("old") not in raw
    assert marker("young") in raw


def test_a_worker_refuses_a_bad_retention_file(tmp_path: Path) -> None:
    from tether.cli import main

    bad = tmp_path / "tether.json"
    bad.write_text('{"retention": {"rules": [{"status": "success", "max_age": "soon"}]}}')
    url = f"sqlite:///{tmp_path / 'x.db'}"
    assert main(["worker", "--url", url, "--retention", str(bad)]) == 1
    time.sleep(0)  # nothing started: the error came before the worker


def test_a_worker_refuses_an_age_past_100_years(tmp_path: Path) -> None:
    """Refused at load: before, the worker started and its retention job failed every tick."""
    huge = tmp_path / "tether.json"
    huge.write_text(
        json.dumps(
            {
                "retention": {
                    "rules": [{"status": "success", "max_age": "1000000w"}],
                    "every": "2s",
                }
            }
        )
    )
    url = f"sqlite:///{tmp_path / 'x.db'}"
    command = [sys.executable, "-m", "tether", "worker", "--url", url, "--config", str(PROJECT)]
    env = {**os.environ, "TETHER_TEST_WORKDIR": str(tmp_path)}
    done = subprocess.run(
        [*command, "--retention", str(huge)],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,  # without the check the worker runs on, failing its sweep every tick
    )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"tether: error: {huge}: retention.rules[0].max_age: '1000000w' is longer than 100 "
        "years (36500d), the longest duration a policy takes"
    )
    assert not (tmp_path / "x.db").exists()  # refused before the worker opened anything


async def test_a_100_year_rule_sweeps_on_the_scheduler(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    from tether.retention.policy import MAX_DURATION

    reports: list[SweepReport] = []
    policy = RetentionPolicy(rules=(Rule("success", MAX_DURATION),), every=timedelta(seconds=1))
    async with open_world(sqlite_backend, tmp_path) as world:
        await seed(world, "young", "success", days=40)
        scheduler = Scheduler(
            world.runtime, retention=scheduled_sweep(policy, on_report=reports.append)
        )
        first = await scheduler.tick()  # the real now: now - 100 years is a date
        assert first.errors == []
        assert [(r.examined, r.deleted) for r in reports] == [(0, 0)]
        assert marker("young") in await world.raw()
