"""Erasure on every backend: nothing of the subject stays in raw storage; the receipt lists it."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from tests.backends import Backend
from tests.retention.world import GRAPH, NOW, marker, open_world, seed
from tether.retention import ErasureError, audit_trail, erase
from tether.retention.summary import sha256_text


async def test_erasing_a_user_leaves_nothing_of_theirs(backend: Backend, tmp_path: Path) -> None:
    async with open_world(backend, tmp_path) as world:
        await seed(world, "u1-a", "success", days=3, owner="u1")
        await seed(world, "u1-b", "interrupted", days=1, owner="u1", tenant="acme", approval="live")
        await seed(world, "u2-a", "success", days=3, owner="u2")
        receipt = await erase(world.runtime, user="u1", now=NOW)

        raw = await world.raw()
        assert [t for t in ("u1-a", "u1-b") if marker(t) in raw] == []
        assert "u1-a" not in raw.replace(sha256_text("u1-a"), "")
        assert marker("u2-a") in raw
        assert receipt.subject_kind == "user"
        assert receipt.subject_sha256 == sha256_text("u1")
        assert sorted(receipt.threads) == sorted(sha256_text(t) for t in ("u1-a", "u1-b"))
        assert receipt.counts == {
            "threads": 2,
            "runs": 2,
            "run_events": receipt.counts["run_events"],
            "crons": 0,
            "assistants": 0,
            "store_items": 0,
            "api_keys": 0,
            "checkpoints": 6,
            "steps": 2,
            "approvals": 1,
            "tool_records": 2,
            "audit_summaries": 0,
        }
        assert receipt.counts["run_events"] > 0
        (kept,) = (await audit_trail(world.runtime.store, "u1-b")).receipts
        assert kept == receipt.to_dict()


async def test_erasing_a_tenant_or_a_thread(backend: Backend, tmp_path: Path) -> None:
    async with open_world(backend, tmp_path) as world:
        await seed(world, "acme-1", "success", days=1, tenant="acme")
        await seed(world, "acme-2", "pending", days=1, tenant="acme")  # a live run goes too
        await seed(world, "other", "error", days=1)
        await seed(world, "lone", "success", days=1)
        store = world.runtime.store
        kept_assistant = await store.put_assistant(GRAPH, name="shared", tenant="other")
        assistant = await store.put_assistant(
            GRAPH, tenant="acme", name="acme's", metadata={"note": marker("acme-assistant")}
        )
        await store.create_cron(  # a thread-less cron of the tenant
            assistant.assistant_id,
            "0 0 1 1 *",
            tenant="acme",
            payload={"input": {"note": marker("acme-cron")}},
        )
        by_tenant = await erase(world.runtime, tenant="acme")
        by_thread = await erase(world.runtime, thread="lone")
        again = await erase(world.runtime, thread="lone")  # idempotent: nothing more to find

        raw = await world.raw()
        assert [t for t in ("acme-1", "acme-2", "lone") if marker(t) in raw] == []
        assert marker("other") in raw
        assert [m for m in ("acme-assistant", "acme-cron") if marker(m) in raw] == []
        assert kept_assistant.assistant_id in raw
        assert (by_tenant.counts["threads"], by_tenant.counts["runs"]) == (2, 2)
        assert (by_tenant.counts["crons"], by_tenant.counts["assistants"]) == (1, 1)
        assert by_tenant.tenant_sha256 == sha256_text("acme")
        assert (by_thread.counts["threads"], by_thread.counts["checkpoints"]) == (1, 3)
        assert (again.counts["threads"], again.counts["checkpoints"]) == (0, 0)
        trail = await audit_trail(world.runtime.store, "lone")
        assert [r["receipt_id"] for r in trail.receipts] == [
            by_thread.receipt_id,
            again.receipt_id,
        ]


@pytest.mark.parametrize(
    ("subject", "message"),
    [
        ({}, "an erasure names exactly one subject: thread=, tenant= or user= "),
        ({"thread": "t", "user": "u"}, "an erasure names exactly one subject"),
        ({"tenant": ""}, "tenant: expected a non-empty id, got ''"),
        (
            {"tenant": "a", "within": "b"},
            "an erasure confined to tenant 'b' cannot erase tenant 'a'",
        ),
    ],
)
async def test_an_erasure_without_exactly_one_subject_is_refused(
    tmp_path: Path, subject: dict[str, str], message: str
) -> None:
    from tests.backends import fresh_backend

    with fresh_backend("sqlite", {}, tmp_path) as backend:
        async with open_world(backend, tmp_path) as world:
            with pytest.raises(ErasureError) as caught:
                await erase(world.runtime, **subject)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    "keep_for",
    [timedelta(days=10**6), timedelta(0), timedelta(days=-1), 30],
    ids=["past-100-years", "zero", "negative", "not-a-timedelta"],
)
async def test_a_receipt_that_could_not_be_kept_is_refused_before_anything_is_erased(
    tmp_path: Path, keep_for: object
) -> None:
    """The receipt is written last: a keep_for that fails there would erase with no receipt."""
    from tests.backends import fresh_backend

    with fresh_backend("sqlite", {}, tmp_path) as backend:
        async with open_world(backend, tmp_path) as world:
            await seed(world, "u1-a", "success", days=3, owner="u1")
            with pytest.raises(ErasureError, match="keep_for"):
                await erase(world.runtime, user="u1", now=NOW, keep_for=keep_for)  # type: ignore[arg-type]
            assert marker("u1-a") in await world.raw()
            assert (await audit_trail(world.runtime.store, "u1-a")).receipts == []
