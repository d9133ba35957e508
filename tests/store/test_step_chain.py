"""The step log's hash chain on every backend: one line under concurrency, raw edits found."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.backends import Backend
from tests.checkpointing.encryption_helpers import ring
from tests.store.raw_steps import RawSteps
from tether.steps import chain_head, verify_chain, verify_chain_sync
from tether.store import ChainHead, store_for
from tether.store._chain import GENESIS, chain_link, step_digest


async def _fill(saver: object, thread: str, count: int) -> None:
    store = store_for(saver)  # type: ignore[arg-type]
    for i in range(count):
        await store.append_step(thread, {"n": i})


async def test_concurrent_appends_form_one_chain_in_index_order(backend: Backend) -> None:
    async with backend.open() as saver:
        store = store_for(saver)
        writes = [store.append_step("t", {"n": i}) for i in range(8)]
        writes += [
            store.put_with_step("model", f"k{i}", {"v": i}, thread_id="t", step={"m": i})
            for i in range(4)
        ]
        await asyncio.gather(*writes)
        report = await verify_chain(saver, "t")
        assert report.ok, report
        assert (report.steps, report.unchained_before, report.removed) == (12, None, ())
        # The links are exactly the documented recurrence over the stored steps.
        raw, prev = RawSteps(backend, saver), GENESIS
        for index in range(12):
            digest, link = await raw.entry("t", index)
            text = await raw.text("t", index)
            assert digest == step_digest(None, "t", text)
            assert link == chain_link(prev, index, digest)
            prev = link
        assert report.head == ChainHead(11, prev) == await chain_head(saver, "t")
        assert await store.step_threads() == ["t"]


async def test_a_step_edited_in_raw_storage_breaks_the_chain_there(backend: Backend) -> None:
    async with backend.open() as saver:
        await _fill(saver, "t", 5)
        raw = RawSteps(backend, saver)
        await raw.set_text("t", 2, json.dumps({"n": 200}, separators=(",", ":")))
        report = await verify_chain(saver, "t")
        assert not report.ok
        assert report.broken_at == 2
        assert "edited" in (report.reason or "")


async def test_a_step_removed_in_raw_storage_breaks_the_chain_after_it(backend: Backend) -> None:
    async with backend.open() as saver:
        await _fill(saver, "t", 5)
        await RawSteps(backend, saver).delete("t", 2)
        report = await verify_chain(saver, "t")
        assert (report.ok, report.broken_at) == (False, 3)
        assert "removed or inserted" in (report.reason or "")


async def test_a_step_inserted_with_a_valid_digest_breaks_the_chain_after_it(
    backend: Backend,
) -> None:
    async with backend.open() as saver:
        await _fill(saver, "t", 4)
        raw = RawSteps(backend, saver)
        # Make room at 3 (move the last step to 4), then forge a well-formed step at 3.
        moved_text, (moved_digest, moved_link) = await raw.text("t", 3), await raw.entry("t", 3)
        await raw.delete("t", 3)
        await raw.put("t", 4, moved_text, (moved_digest, moved_link))
        forged = json.dumps({"n": "forged"}, separators=(",", ":"))
        digest = step_digest(None, "t", forged)
        _, link_2 = await raw.entry("t", 2)
        await raw.put("t", 3, forged, (digest, chain_link(link_2, 3, digest)))
        report = await verify_chain(saver, "t")
        assert (report.ok, report.broken_at) == (False, 4)


async def test_a_step_without_a_link_after_the_chain_began_is_a_break(backend: Backend) -> None:
    async with backend.open() as saver:
        await _fill(saver, "t", 3)
        raw = RawSteps(backend, saver)
        text = json.dumps({"n": "slipped in"}, separators=(",", ":"))
        await raw.put("t", 3, text, None)
        report = await verify_chain(saver, "t")
        assert (report.ok, report.broken_at) == (False, 3)


async def test_steps_written_before_the_chain_read_and_are_reported_unchained(
    backend: Backend,
) -> None:
    async with backend.open() as saver:
        await _fill(saver, "t", 3)
        await RawSteps(backend, saver).drop_chain("t")  # as an older version left them
        only_old = await verify_chain(saver, "t")
        assert only_old.ok
        assert only_old.head is None
        assert only_old.steps == 3
        await _fill(saver, "t", 2)
        report = await verify_chain(saver, "t")
        assert report.ok, report
        assert report.unchained_before == 3
        assert report.head is not None
        assert report.head.index == 4
        assert [s["n"] for s in await store_for(saver).steps("t")] == [0, 1, 2, 0, 1]


async def test_steps_deleted_with_their_run_leave_their_links(backend: Backend) -> None:
    async with backend.open() as saver:
        store = store_for(saver)
        for i, run in enumerate(["r1", "r2", "r1", "r2"]):
            await store.append_step("t", {"n": i}, run_id=run)
        await store.delete_runs(["r2"])
        report = await verify_chain(saver, "t")
        assert report.ok, report
        assert report.removed == (1, 3)
        assert await store.append_step("t", {"n": 4}) == 4  # removed indexes are not reused
        assert (await verify_chain(saver, "t")).ok


async def test_a_deleted_log_no_longer_reaches_the_head_kept_elsewhere(backend: Backend) -> None:
    async with backend.open() as saver:
        await _fill(saver, "t", 3)
        kept = await chain_head(saver, "t")
        assert kept is not None
        assert (await verify_chain(saver, "t", expected_head=kept)).ok
        await store_for(saver).delete_thread("t")
        assert await chain_head(saver, "t") is None
        report = await verify_chain(saver, "t", expected_head=kept)
        assert (report.ok, report.broken_at, report.steps) == (False, 2, 0)
        assert "expected head" in (report.reason or "")


async def test_encrypted_chain_is_keyed_and_survives_a_swapped_ciphertext_check(
    backend: Backend,
) -> None:
    async with backend.open(encryption=ring("a")) as saver:
        await _fill(saver, "t", 4)
        store = store_for(saver)
        keyed = await store.keyed_hash()
        raw = RawSteps(backend, saver)
        digest, _ = await raw.entry("t", 1)
        plain = json.dumps({"n": 1}, separators=(",", ":"))
        assert digest == step_digest(keyed, "t", plain) != step_digest(None, "t", plain)
        assert (await verify_chain(saver, "t")).ok
        # A ciphertext moved onto another index (a row changed directly in the database).
        await raw.set_text("t", 2, await raw.text("t", 1))
        report = await verify_chain(saver, "t")
        assert (report.ok, report.broken_at) == (False, 2)
        assert "cannot be read" in (report.reason or "")


def test_sync_twin_reports_the_same(tmp_path: object) -> None:
    from tether.checkpointing import open_checkpointer_sync

    with open_checkpointer_sync("memory://") as saver:
        store = store_for(saver)
        for i in range(3):
            store.sync.append_step("t", {"n": i})
        report = verify_chain_sync(saver, "t")
        assert report.ok
        assert report.head is not None
        assert report.head.index == 2


async def test_writers_with_a_stale_view_of_the_log_still_form_one_chain(
    durable_backend: Backend,
) -> None:
    # Two connections (on Redis, two drivers, each guessing the log's end from its own
    # last write): every write of one moves the end the other expects.
    async with durable_backend.open() as a, durable_backend.open() as b:
        for i in range(6):
            store = store_for(a if i % 2 else b)
            if i % 3:
                assert await store.append_step("t", {"n": i}) == i
            else:
                index = await store.put_with_step("m", f"k{i}", {}, thread_id="t", step={"n": i})
                assert index == i
        report = await verify_chain(a, "t")
        assert (report.ok, report.steps, report.unchained_before) == (True, 6, None), report
        assert [s["n"] for s in await store_for(b).steps("t")] == list(range(6))


async def test_a_log_deleted_by_another_connection_starts_again_at_zero(
    durable_backend: Backend,
) -> None:
    async with durable_backend.open() as a, durable_backend.open() as b:
        await _fill(a, "t", 3)
        await store_for(b).delete_thread("t")
        assert await store_for(a).append_step("t", {"n": "again"}) == 0
        report = await verify_chain(b, "t")
        assert (report.ok, report.steps, report.head.index if report.head else None) == (True, 1, 0)


async def test_a_redis_step_over_a_head_that_moved_is_refused_with_the_actual_end(
    backend: Backend,
) -> None:
    if backend.name != "redis":
        pytest.skip("the compare-and-set of Redis's step scripts")
    async with backend.open() as saver:
        await _fill(saver, "t", 2)
        driver = RawSteps(backend, saver).driver
        _, head = await RawSteps(backend, saver).entry("t", 1)
        p = driver._p
        keys = [f"{p}:steps:t", f"{p}:stepseq:t", f"{p}:run:", f"{p}:thread:t"]
        keys += [f"{p}:stepchain:t", f"{p}:stephead:t"]
        forged = ["2", "{}", "", "d" * 64, GENESIS, "f" * 64]  # a stale head
        assert await driver._append(keys=keys, args=forged) == [2, 2, head.encode()]
        ahead = ["3", "{}", "", "d" * 64, head, "f" * 64]  # a gap
        assert await driver._append(keys=keys, args=ahead) == [2, 2, head.encode()]
        report = await verify_chain(saver, "t")
        assert (report.ok, report.steps) == (True, 2)


async def test_verifying_while_another_connection_appends_sees_a_whole_chain(
    durable_backend: Backend,
) -> None:
    async with durable_backend.open() as writer, durable_backend.open() as reader:
        store = store_for(writer)

        async def append() -> None:
            for i in range(30):
                await store.append_step("t", {"n": i})

        async def check() -> list[bool]:
            seen = []
            for _ in range(15):
                report = await verify_chain(reader, "t")
                seen.append(report.ok and not report.removed)
                await asyncio.sleep(0)
            return seen

        _, seen = await asyncio.gather(append(), check())
        assert all(seen), seen
        assert (await verify_chain(reader, "t")).steps == 30
