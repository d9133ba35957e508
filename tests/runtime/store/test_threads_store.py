"""Threads at the store: create, get, list with filters, delete with their runs."""

from __future__ import annotations

import asyncio

import pytest

from tests.runtime.store.actions import claim_one, create
from tether.runtime.errors import AlreadyExistsError, InvalidRunRequestError, ThreadNotFoundError
from tether.runtime.store import Outcome, RunStore


async def test_a_thread_is_created_idle_and_found_again(store: RunStore) -> None:
    thread = await store.create_thread(thread_id="ticket-42", metadata={"team": "billing"})
    assert (thread.thread_id, thread.status, thread.metadata) == (
        "ticket-42", "idle", {"team": "billing"},
    )  # fmt: skip
    assert (thread.active_run_id, thread.values, thread.temporary) == (None, None, False)
    assert await store.get_thread("ticket-42") == thread
    generated = await store.create_thread()
    assert len(generated.thread_id) == 36


async def test_an_existing_thread_raises_unless_do_nothing(store: RunStore) -> None:
    first = await store.create_thread(thread_id="t", metadata={"v": 1})
    with pytest.raises(AlreadyExistsError, match="thread 't' already exists"):
        await store.create_thread(thread_id="t")
    assert await store.create_thread(thread_id="t", if_exists="do_nothing") == first
    # Another tenant's thread is taken too, but never returned.
    with pytest.raises(AlreadyExistsError):
        await store.create_thread(thread_id="t", tenant="b", if_exists="do_nothing")


async def test_put_thread_says_which_of_concurrent_calls_made_the_thread(
    store: RunStore,
) -> None:
    made = await asyncio.gather(
        *(store.put_thread(thread_id="t", if_exists="do_nothing") for _ in range(5))
    )
    assert sorted(inserted for _, inserted in made) == [False, False, False, False, True]
    assert all(thread == made[0][0] for thread, _ in made)
    assert (await store.put_thread(thread_id="t", if_exists="do_nothing"))[1] is False
    with pytest.raises(AlreadyExistsError):
        await store.put_thread(thread_id="t")


@pytest.mark.parametrize(
    ("thread_id", "message"),
    [
        ("", "thread_id must not be empty"),
        ("x" * 256, "thread_id is 256 characters long; the limit is 255"),
        ("a\x00", "contains a NUL character"),
    ],
)
async def test_a_bad_thread_id_is_refused(store: RunStore, thread_id: str, message: str) -> None:
    with pytest.raises(InvalidRunRequestError, match=message):
        await store.create_thread(thread_id=thread_id)
    assert await store.list_threads() == []


async def test_list_filters_by_status_and_metadata(store: RunStore) -> None:
    await store.create_thread(thread_id="a", metadata={"team": "billing", "n": 1})
    await store.create_thread(thread_id="b", metadata={"team": "support", "n": 1})
    await create(store, "c")
    assert {t.thread_id for t in await store.list_threads(status="idle")} == {"a", "b"}
    assert [t.thread_id for t in await store.list_threads(status="busy")] == ["c"]
    billing = await store.list_threads(metadata={"team": "billing", "n": 1})
    assert [t.thread_id for t in billing] == ["a"]
    assert {t.thread_id for t in await store.list_threads(metadata={"n": 1})} == {"a", "b"}
    assert await store.list_threads(metadata={"n": 2}) == []
    assert len(await store.list_threads(limit=2)) == 2
    assert len(await store.list_threads(limit=2, offset=2)) == 1


async def test_nul_characters_are_refused_in_metadata_and_kept_in_values(
    store: RunStore,
) -> None:
    with pytest.raises(InvalidRunRequestError, match=r"metadata\['k'\] contains a NUL"):
        await store.create_thread(thread_id="a", metadata={"k": "a\x00"})
    with pytest.raises(InvalidRunRequestError, match=r"metadata filter.* contains a NUL"):
        await store.list_threads(metadata={"k": "\x00"})
    assert await store.list_threads() == []
    # A run's values keep them; the searchable copy of its interrupts shows U+FFFD (the
    # checkpoint keeps the exact value).
    await create(store)
    claim = await claim_one(store)
    interrupts = {"task": [{"id": "i1", "value": {"echo": "a\x00b"}}]}
    await store.finish(
        claim.hold,
        Outcome("interrupted", "interrupted", values={"text": "a\x00b"}, interrupts=interrupts),
    )
    thread = await store.get_thread("t1")
    assert thread.values == {"text": "a\x00b"}
    assert thread.interrupts == {"task": [{"id": "i1", "value": {"echo": "a\ufffdb"}}]}


async def test_finish_stores_the_threads_values_and_error(store: RunStore) -> None:
    await create(store)
    claim = await claim_one(store)
    error = {"error": "ValueError", "message": "bad"}
    await store.finish(
        claim.hold,
        Outcome("error", "error", error=error, thread_error=error, values={"messages": [1]}),
    )
    thread = await store.get_thread("t1")
    assert (thread.status, thread.values, thread.error) == ("error", {"messages": [1]}, error)
    assert (await store.get_run(claim.run.run_id)).error == error


async def test_delete_removes_the_thread_with_its_runs_and_events(store: RunStore) -> None:
    run = await create(store)
    await store.delete_thread("t1")
    with pytest.raises(ThreadNotFoundError):
        await store.get_thread("t1")
    assert await store.list_runs() == []
    with pytest.raises(ThreadNotFoundError):
        await store.delete_thread("t1")
    assert run.thread_id == "t1"
