"""The sweep beside live workers: their runs finish untouched while old threads go."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

from tests.backends import fresh_backend
from tests.retention.world import NOW, marker, open_world, seed
from tests.runtime.workers import Workers
from tether.retention import RetentionPolicy, Rule, sweep
from tether.runtime import Runtime

OLD = [f"old-{i}" for i in range(12)]


async def test_a_sweep_beside_running_workers(servers: dict[str, str], tmp_path: Path) -> None:
    policy = RetentionPolicy(rules=(Rule("success", timedelta(days=30)),), batch_size=4)
    with fresh_backend("postgres", servers, tmp_path) as backend:
        workdir = tmp_path / "world"
        workdir.mkdir()
        workers = Workers(backend.url, workdir)
        try:
            async with open_world(backend, tmp_path) as world:
                for thread_id in OLD:
                    await seed(world, thread_id, "success", days=40)
                workers.start(2)
                async with Runtime(backend.url, graphs=["three_node"]) as rt:
                    runs = [
                        await rt.create("three_node", thread_id=f"live-{i}", input={"trace": []})
                        for i in range(10)
                    ]
                    report, done = await asyncio.gather(
                        sweep(world.runtime, policy, now=NOW),
                        asyncio.gather(*(rt.wait(r.run_id, timeout=120) for r in runs)),
                    )
                assert [r.status for r in done] == ["success"] * 10
                assert report.failed == 0
                assert report.deleted == len(OLD)
                raw = await world.raw()
                assert [t for t in OLD if marker(t) in raw] == []
        finally:
            workers.stop_all()
