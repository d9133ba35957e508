"""The sweep on every backend: raw storage holds exactly what the policy says afterwards."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.backends import Backend
from tests.retention.world import NOW, World, age, marker, open_world, seed
from tether.approvals import expire_due
from tether.retention import RetentionPolicy, Rule, audit_trail, retention_plane, sweep
from tether.runtime.resumer import RuntimeResumer
from tether.runtime.store.base import Outcome

DAYS = timedelta(days=1)
POLICY = RetentionPolicy(
    rules=(
        Rule("success", 30 * DAYS, "delete"),
        Rule("success", 1 * DAYS, "delete", tenant="acme"),
        Rule("error", 30 * DAYS, "keep_latest"),
        Rule("cancelled", 7 * DAYS, "delete"),
        Rule("timeout", 30 * DAYS, "delete"),
        Rule("interrupted", 30 * DAYS, "delete"),
    ),
    batch_size=3,  # several pages, so paging after deletions is exercised
)
DELETED = ["s-old", "c-old", "to-old", "i-old", "acme-s", "i-expired"]
KEPT = ["s-young", "to-young", "i-live", "pending-old", "e-old"]


async def _seed_all(world: World) -> None:
    await seed(world, "s-old", "success", days=40)
    await seed(world, "s-young", "success", days=10)
    await seed(world, "acme-s", "success", days=2, tenant="acme")
    await seed(world, "e-old", "error", days=40)
    await seed(world, "c-old", "cancelled", days=8)
    await seed(world, "to-old", "timeout", days=40)
    await seed(world, "to-young", "timeout", days=5)
    await seed(world, "i-old", "interrupted", days=40)
    await seed(world, "i-live", "interrupted", days=40, approval="live")
    await seed(world, "i-expired", "interrupted", days=40, approval="expired")
    await seed(world, "pending-old", "pending", days=40)


async def _apply_expiry(world: World) -> None:
    """The scheduler's expiry job, then the worker that continues the stopped run."""
    saver = await world.saver()
    actions = await expire_due(
        saver, now=NOW, resumer=RuntimeResumer(world.runtime, any_tenant=True)
    )
    assert [(a.approval_id, a.outcome) for a in actions] == [("ap-i-expired", "stopped")]
    store = world.runtime.store
    claims = await store.claim("seed:1:abc", graphs=["g"], limit=5, lease=30)
    resumed = [c for c in claims if c.run.thread_id == "i-expired"]
    assert len(resumed) == 1
    await store.finish(resumed[0].hold, Outcome("success", "idle"))
    for claim in claims:  # the pending-old thread's run stays with a live worker
        if claim is not resumed[0]:
            assert claim.run.thread_id == "pending-old"
    age(world, "i-expired", NOW - 40 * DAYS)
    age(world, "pending-old", NOW - 40 * DAYS)  # running, but quiet for long: still kept


async def test_the_sweep_leaves_exactly_what_the_policy_says(
    backend: Backend, tmp_path: Path
) -> None:
    async with open_world(backend, tmp_path) as world:
        await _seed_all(world)
        await _apply_expiry(world)
        report = await sweep(world.runtime, POLICY, now=NOW)

        raw = await world.raw()
        assert [t for t in DELETED if marker(t) in raw] == []
        assert [t for t in KEPT if marker(t) not in raw] == []
        assert (report.deleted, report.pruned) == (len(DELETED), 1)
        assert (report.kept_pending_approval, report.active, report.failed) == (1, 1, 0)
        assert await world.checkpoints("e-old") == 1  # pruned to its newest
        assert await world.checkpoints("s-young") == 3
        for thread_id in KEPT:
            assert (await world.runtime.store.thread_tenant(thread_id)) is not None

        for thread_id in DELETED:
            trail = await audit_trail(world.runtime.store, thread_id)
            (summary,) = trail.summaries
            assert summary["state"] == "done"
            assert summary["thread_id"] == thread_id
            assert summary["model_calls"] == 1
            assert summary["tokens"] == {"input": 10, "output": 5, "total": 15}
            assert summary["tool_effects"] == [
                {
                    "tool": "refund",
                    "idempotency_key": f"idem-{thread_id}",
                    "args_hash": "a" * 64,
                    "state": "done",
                }
            ]
            head = summary["step_chain_head"]
            assert head is not None
            assert len(head["link"]) == 64
            assert head["index"] >= 0
            assert marker(thread_id) not in str(summary)
        (expired,) = (await audit_trail(world.runtime.store, "i-expired")).summaries
        assert [(a["outcome"], a["args_sha256"]) for a in expired["approvals"]] == [
            ("expired", "b" * 64)
        ]
        assert [r["status"] for r in expired["runs"]] == ["success"]
        assert (await audit_trail(world.runtime.store, "acme-s")).summaries[0][
            "tenant_id"
        ] == "acme"

        again = await sweep(world.runtime, POLICY, now=NOW)
        assert (again.deleted, again.pruned, again.failed) == (0, 0, 0)
        assert await world.raw() == raw


async def test_an_overdue_approval_keeps_its_thread_until_its_policy_acted(
    backend: Backend, tmp_path: Path
) -> None:
    async with open_world(backend, tmp_path) as world:
        await seed(world, "i-overdue", "interrupted", days=40, approval="expired")
        report = await sweep(world.runtime, POLICY, now=NOW)
        assert (report.awaiting_expiry, report.deleted) == (1, 0)
        assert marker("i-overdue") in await world.raw()


async def test_a_dry_run_writes_nothing(backend: Backend, tmp_path: Path) -> None:
    async with open_world(backend, tmp_path) as world:
        await seed(world, "s-old", "success", days=40)
        await seed(world, "e-old", "error", days=40)
        before = await world.raw()
        seen: list[tuple[str, str]] = []
        report = await sweep(
            world.runtime,
            POLICY,
            now=NOW,
            dry_run=True,
            on_decision=lambda d: seen.append((d.thread.thread_id, d.outcome)),
        )
        assert sorted(seen) == [("e-old", "pruned"), ("s-old", "deleted")]
        assert (report.deleted, report.pruned) == (1, 1)
        assert await world.raw() == before


async def test_a_now_too_early_for_a_rule_is_refused_before_anything_is_written(
    backend: Backend, tmp_path: Path
) -> None:
    async with open_world(backend, tmp_path) as world:
        await seed(world, "half-done", "success", days=40)
        plane = retention_plane(world.runtime.store)
        await plane.put_audit_summary(
            "sum-half-done",
            thread_id="half-done",
            tenant_id="",
            summary="{}",
            written_at=NOW,
            keep_until=None,
        )  # an earlier sweep killed after the row went: its checkpoints are still to delete
        assert await plane.delete_quiet_thread("half-done", before=NOW, summary_id="sum-half-done")
        for now, message in [
            (datetime(1, 1, 1, tzinfo=UTC), "now: 0001-01-01T00:00:00+00:00 is too early for rule"),
            (
                datetime(2026, 11, 30),
                "now: datetime.datetime(2026, 11, 30, 0, 0) is not a datetime",
            ),
        ]:
            with pytest.raises(ValueError, match=re.escape(message)):
                await sweep(world.runtime, POLICY, now=now)
        assert marker("half-done") in await world.raw()  # the resumable deletion waited
        assert await plane.summaries_deleting() == [("sum-half-done", "half-done")]
        report = await sweep(world.runtime, POLICY, now=NOW)
        assert report.resumed == 1
        assert marker("half-done") not in await world.raw()
