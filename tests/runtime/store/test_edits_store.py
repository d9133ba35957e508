"""Edits at the store: thread metadata and state, copies, run deletion, assistant
versions, temporary threads (the same on both backends)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.runtime.store.actions import claim_one, create
from tether.runtime.errors import (
    AlreadyExistsError,
    AssistantNotFoundError,
    InvalidRunRequestError,
    RunNotActiveError,
    RunNotFoundError,
    ThreadBusyError,
    ThreadNotFoundError,
)
from tether.runtime.ids import system_assistant_id
from tether.runtime.store import Outcome, RunStore

LATER = timedelta(seconds=5)


async def test_update_thread_merges_metadata_keys(store: RunStore) -> None:
    made = await store.create_thread(thread_id="t", metadata={"a": 1, "b": {"x": [1]}})
    updated = await store.update_thread("t", metadata={"b": "two", "c": None, "d": {"y": 2}})
    assert updated.metadata == {"a": 1, "b": "two", "c": None, "d": {"y": 2}}
    assert updated.updated_at >= made.updated_at
    assert (await store.get_thread("t")).metadata == updated.metadata
    assert (await store.list_threads(metadata={"d": {"y": 2}}))[0].thread_id == "t"


async def test_update_thread_refuses_missing_foreign_and_bad_metadata(store: RunStore) -> None:
    await store.create_thread(thread_id="t")
    with pytest.raises(ThreadNotFoundError, match="no thread 'nope' for this tenant"):
        await store.update_thread("nope", metadata={"a": 1})
    with pytest.raises(ThreadNotFoundError, match="no thread 't' for this tenant"):
        await store.update_thread("t", tenant="other", metadata={"a": 1})
    with pytest.raises(InvalidRunRequestError, match="metadata must be a mapping"):
        await store.update_thread("t", metadata=["a"])  # type: ignore[arg-type]
    with pytest.raises(InvalidRunRequestError, match="NUL"):
        await store.update_thread("t", metadata={"a": "x\x00"})
    assert (await store.get_thread("t")).metadata == {}


async def test_record_thread_state_writes_values_interrupts_and_status(store: RunStore) -> None:
    await store.create_thread(thread_id="t")
    interrupts = {"task-1": [{"id": "i1", "value": "ok?"}]}
    thread = await store.record_thread_state(
        "t", values={"n": 1}, interrupts=interrupts, status="interrupted"
    )
    assert (thread.status, thread.values, thread.interrupts) == (
        "interrupted", {"n": 1}, interrupts,
    )  # fmt: skip
    thread = await store.record_thread_state("t", values={"n": 2}, interrupts={}, status="idle")
    assert (thread.status, thread.values, thread.interrupts) == ("idle", {"n": 2}, {})
    with pytest.raises(InvalidRunRequestError, match="'idle' or 'interrupted', got 'busy'"):
        await store.record_thread_state("t", values={}, interrupts={}, status="busy")  # type: ignore[arg-type]
    with pytest.raises(ThreadNotFoundError):
        await store.record_thread_state("t", tenant="x", values={}, interrupts={}, status="idle")


async def test_record_thread_state_refuses_a_thread_with_a_run_in_flight(
    store: RunStore,
) -> None:
    run = await create(store, "t")
    with pytest.raises(ThreadBusyError, match=f"thread 't' has run '{run.run_id}' pending"):
        await store.record_thread_state("t", values={"n": 1}, interrupts={}, status="idle")
    assert (await store.get_thread("t")).values is None


async def test_copy_thread_copies_metadata_and_state_not_runs(store: RunStore) -> None:
    await store.create_thread(thread_id="src", metadata={"team": "a"})
    await store.record_thread_state(
        "src", values={"n": 1}, interrupts={"t1": [{"id": "i", "value": 1}]}, status="interrupted"
    )
    copy = await store.copy_thread("src", new_thread_id="dst")
    assert (copy.thread_id, copy.metadata, copy.values, copy.status) == (
        "dst", {"team": "a"}, {"n": 1}, "interrupted",
    )  # fmt: skip
    assert copy.interrupts == {"t1": [{"id": "i", "value": 1}]}
    assert await store.list_runs(thread_id="dst") == []
    generated = await store.copy_thread("src")
    assert generated.thread_id not in ("src", "dst")
    with pytest.raises(AlreadyExistsError, match="thread 'dst' already exists"):
        await store.copy_thread("src", new_thread_id="dst")
    with pytest.raises(ThreadNotFoundError):
        await store.copy_thread("src", tenant="other")


async def test_delete_run_deletes_a_stopped_run_and_its_events(store: RunStore) -> None:
    run = await create(store, "t")
    with pytest.raises(ThreadBusyError, match=f"run '{run.run_id}' is pending; cancel it"):
        await store.delete_run(run.run_id)
    claim = await claim_one(store)
    with pytest.raises(ThreadBusyError, match="is running"):
        await store.delete_run(run.run_id)
    await store.finish(claim.hold, Outcome(status="success", thread_status="idle", values={}))
    with pytest.raises(RunNotFoundError):
        await store.delete_run(run.run_id, tenant="other")
    deleted = await store.delete_run(run.run_id)
    assert deleted.status == "success"
    with pytest.raises(RunNotFoundError, match="no run"):
        await store.get_run(run.run_id)
    with pytest.raises(RunNotFoundError):
        await store.events(run.run_id)
    assert (await store.get_thread("t")).status == "idle"
    with pytest.raises(RunNotFoundError):
        await store.delete_run(run.run_id)


async def test_set_run_ending_rewrites_an_ended_run_s_error_and_reason_only(
    store: RunStore,
) -> None:
    run = await create(store, "t")
    with pytest.raises(RunNotActiveError, match=f"run {run.run_id} is pending, not ended"):
        await store.set_run_ending(run.run_id, error={"error": "X"}, reason="r")
    claim = await claim_one(store)
    with pytest.raises(RunNotActiveError, match="is running, not ended"):
        await store.set_run_ending(run.run_id, error={"error": "X"}, reason="r")
    error = {"error": "RuntimeError", "message": "boom"}
    outcome = Outcome("error", "error", error=error, thread_error=error)
    await store.finish(claim.hold, outcome)
    with pytest.raises(RunNotFoundError):
        await store.set_run_ending(run.run_id, tenant="other", error=None, reason=None)
    with pytest.raises(RunNotFoundError):
        await store.set_run_ending("nope", error=None, reason=None)
    compensated = {**error, "compensation": {"undone": ["refund"]}}
    ended = await store.set_run_ending(run.run_id, error=compensated, reason="undone: refund")
    assert (ended.status, ended.error, ended.ended_reason) == (
        "error", compensated, "undone: refund",
    )  # fmt: skip
    again = await store.get_run(run.run_id)
    assert (again.status, again.error, again.ended_at) == ("error", compensated, ended.ended_at)


async def test_assistant_versions_update_list_and_set_latest(store: RunStore) -> None:
    made = await store.put_assistant(
        "g", assistant_id="a1", name="first", config={"k": 1}, metadata={"team": "x"}
    )
    assert made.version == 1
    second = await store.update_assistant("a1", name="second", metadata={"env": "prod"})
    assert (second.version, second.name, second.config) == (2, "second", {"k": 1})
    assert second.metadata == {"team": "x", "env": "prod"}
    third = await store.update_assistant("a1", config={"k": 3}, context={"c": 1})
    # (a context without a configurable is the configurable too, as on LangGraph's server)
    assert (third.version, third.name, third.config, third.context) == (
        3, "second", {"k": 3, "configurable": {"c": 1}}, {"c": 1},
    )  # fmt: skip
    versions = await store.assistant_versions("a1")
    assert [v.version for v in versions] == [3, 2, 1]
    assert [v.name for v in versions] == ["second", "second", "first"]
    assert [v.version for v in await store.assistant_versions("a1", limit=1, offset=1)] == [2]
    prod = await store.assistant_versions("a1", metadata={"env": "prod"})
    assert [v.version for v in prod] == [3, 2]
    back = await store.set_assistant_version("a1", 1)
    assert (back.version, back.name, back.config, back.metadata) == (
        1, "first", {"k": 1}, {"team": "x"},
    )  # fmt: skip
    assert (await store.get_assistant("a1")).version == 1
    # A new version after going back is numbered after the highest one.
    assert (await store.update_assistant("a1", name="fourth")).version == 4
    with pytest.raises(AssistantNotFoundError, match="has no version 9 \\(its latest is 4\\)"):
        await store.set_assistant_version("a1", 9)
    with pytest.raises(InvalidRunRequestError, match="version must be an integer >= 1"):
        await store.set_assistant_version("a1", 0)


async def test_assistant_edits_refuse_missing_foreign_and_system_ones(store: RunStore) -> None:
    with pytest.raises(AssistantNotFoundError, match="no assistant 'nope'"):
        await store.update_assistant("nope", name="x")
    await store.put_assistant("g", assistant_id="default")  # the default tenant's own
    with pytest.raises(AssistantNotFoundError, match="no assistant 'default'"):
        await store.update_assistant("default", tenant="t1", name="x")
    with pytest.raises(AssistantNotFoundError, match="no assistant 'default'"):
        await store.delete_assistant("default", tenant="t1")
    # The graph's system assistant: no tenant may change it, the default one included.
    system = system_assistant_id("g")
    for tenant in ("", "t1"):
        with pytest.raises(InvalidRunRequestError, match="system assistant of graph 'g'"):
            await store.delete_assistant("g", tenant=tenant)
        with pytest.raises(InvalidRunRequestError, match="it cannot be updated"):
            await store.update_assistant(system, tenant=tenant, config={"k": "mine"})
        with pytest.raises(InvalidRunRequestError, match="cannot be given another version"):
            await store.set_assistant_version("g", 1, tenant=tenant)
    with pytest.raises(InvalidRunRequestError, match="config must be a mapping"):
        await store.update_assistant("default", config=[1])  # type: ignore[arg-type]
    assert (await store.get_assistant(system)).graph_id == "g"
    assert (await store.get_assistant(system)).config == {}


async def test_only_system_assistants_are_shared(store: RunStore) -> None:
    """An assistant the default tenant makes is its own; a graph id cannot be taken."""
    await store.put_assistant("g", assistant_id="secret", config={"api_key": "k"})
    for tenant in ("t1", "t2"):
        with pytest.raises(AssistantNotFoundError, match="no assistant 'secret'"):
            await store.get_assistant("secret", tenant=tenant)
        listed = [a.assistant_id for a in await store.list_assistants(tenant=tenant, limit=100)]
        assert listed == [system_assistant_id("g")]
    # Naming a graph reaches its system assistant, for every tenant: no caller can
    # make an assistant under the graph's id to capture other callers' runs.
    for tenant in ("", "t1"):
        with pytest.raises(InvalidRunRequestError, match="'g' is the id of graph 'g'"):
            await store.put_assistant("g", assistant_id="g", tenant=tenant)
        assert (await store.get_assistant("g", tenant=tenant)).assistant_id == (
            system_assistant_id("g")
        )
    # A look-alike of the system one (same metadata, another id) is not shared.
    await store.put_assistant("g", assistant_id="fake", metadata={"created_by": "system"})
    with pytest.raises(AssistantNotFoundError):
        await store.get_assistant("fake", tenant="t1")


async def test_delete_and_list_assistants(store: RunStore) -> None:
    await store.put_assistant("g", assistant_id="a1", name="Alpha", metadata={"k": 1})
    await store.put_assistant("g", assistant_id="a2", name="beta", tenant="t1")
    await store.put_assistant("h", assistant_id="a3", name="gamma", metadata={"k": 1})
    ids = [a.assistant_id for a in await store.list_assistants(limit=100)]
    assert ids == [system_assistant_id("g"), "a1", "a3"]
    mine = [a.assistant_id for a in await store.list_assistants(tenant="t1", limit=100)]
    assert mine == [system_assistant_id("g"), "a2"]
    assert [a.assistant_id for a in await store.list_assistants(graph_id="h")] == ["a3"]
    assert [a.assistant_id for a in await store.list_assistants(name="ALP")] == ["a1"]
    assert [a.assistant_id for a in await store.list_assistants(metadata={"k": 1})] == [
        "a1",
        "a3",
    ]
    gone = await store.delete_assistant("a1")
    assert gone.name == "Alpha"
    with pytest.raises(AssistantNotFoundError):
        await store.get_assistant("a1")
    with pytest.raises(AssistantNotFoundError):
        await store.assistant_versions("a1")


async def test_temporary_threads_are_deleted_once_their_runs_stopped(store: RunStore) -> None:
    kept = await create(store, None, on_completion="keep")
    temporary = await create(store, None)
    assert (await store.get_thread(temporary.thread_id)).temporary
    later = datetime.now(UTC) + LATER
    assert await store.delete_temporary_threads(ended_before=later) == []  # still pending
    for _ in range(2):
        claim = await claim_one(store)
        await store.finish(claim.hold, Outcome(status="success", thread_status="idle", values={}))
    assert await store.delete_temporary_threads(ended_before=datetime.now(UTC) - LATER) == []
    assert await store.delete_temporary_threads(ended_before=later) == [temporary.thread_id]
    with pytest.raises(ThreadNotFoundError):
        await store.get_thread(temporary.thread_id)
    with pytest.raises(RunNotFoundError):
        await store.get_run(temporary.run_id)
    assert (await store.get_thread(kept.thread_id)).temporary is False


async def test_a_temporary_thread_stopped_at_an_interrupt_is_deleted_too(
    store: RunStore,
) -> None:
    run = await create(store, None)
    claim = await claim_one(store)
    await store.finish(
        claim.hold, Outcome(status="interrupted", thread_status="interrupted", values={})
    )
    later = datetime.now(UTC) + LATER
    assert await store.delete_temporary_threads(ended_before=later) == [run.thread_id]
