"""A worker compensates a compensating graph's failed run, and its run cancelled with rollback."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.workers import PROJECT, in_process_worker
from tether.approvals import get_approval
from tether.errors import TetherError
from tether.runtime import Run, Runtime, Scheduler, Worker
from tether.runtime.compensations import awaiting, continuation_id, rollback_id
from tether.runtime.errors import RunNotActiveError


def _kinds(world: Path) -> list[str]:
    if not world.exists():
        return []
    with sqlite3.connect(world) as db:
        # The project's first effect creates the file a moment before its table.
        if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'effects'").fetchone() is None:
            return []
        return [k for (k,) in db.execute("SELECT kind FROM effects ORDER BY rowid")]


_serving: dict[Worker, asyncio.Task[None]] = {}


async def _until_emailed(runtime: Runtime, worker: Worker, run_id: str, world: Path) -> None:
    """Wait (30 s at most) for the run's email; fail saying why if the run or worker ended."""
    for _ in range(3000):
        if "email" in _kinds(world):
            return
        serving = _serving[worker]
        if serving.done():
            raise AssertionError(f"the worker stopped: {serving.exception()!r}")
        run = await runtime.get(run_id)
        if run.terminal:
            raise AssertionError(f"the run ended before it emailed: {run.status} {run.error}")
        await asyncio.sleep(0.01)
    run = await runtime.get(run_id)
    kinds = [e.kind for e in await runtime.events(run_id)]
    raise AssertionError(
        f"the run never emailed: {run.status}, attempt {run.attempt}, worker {run.worker_id}, "
        f"effects {_kinds(world)}, events {kinds}"
    )


@pytest.fixture
async def worker(
    runtime_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Worker]:
    monkeypatch.setenv("TETHER_TEST_WORKDIR", str(tmp_path))
    running = Worker(runtime_url, PROJECT, concurrency=2, lease=2.0)
    serving = asyncio.create_task(running.run())
    _serving[running] = serving
    try:
        yield running
    finally:
        del _serving[running]
        running.stop(grace=False)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(serving, 30)


async def test_a_failed_run_is_compensated_and_its_error_lists_what_was_not(
    runtime: Runtime, worker: Worker, tmp_path: Path
) -> None:
    run = await runtime.create("saga_fails", thread_id="saga-1", input={"messages": []})
    done = await runtime.wait(run.run_id, timeout=60)
    assert done.status == "error", done
    assert done.error is not None
    assert done.error["message"] == "the carrier refused the parcel"
    compensation = done.error["compensation"]
    assert compensation["undone"] == ["email", "charge"]
    assert compensation["not_undone"] == []  # ship never ran: nothing else happened
    assert _kinds(tmp_path / "world.db") == [
        "charge",
        "email",
        "undo-email ada@example.com",
        "undo-charge 4200",
    ]
    kinds = [e.kind for e in await runtime.events(run.run_id)]
    assert kinds.count("compensation.before") == 2
    assert "compensation" in kinds


async def test_a_transient_store_error_is_retried_not_compensated(
    runtime: Runtime, worker: Worker, tmp_path: Path
) -> None:
    (tmp_path / "blips").write_text("1")  # the step after the effects meets a locked store
    run = await runtime.create("saga_blips", thread_id="saga-blip", input={"messages": []})
    done = await runtime.wait(run.run_id, timeout=60)
    assert done.status == "success", done
    assert done.attempt >= 2
    assert _kinds(tmp_path / "world.db") == ["charge", "email", "ship"]
    kinds = [e.kind for e in await runtime.events(run.run_id)]
    assert "compensation.before" not in kinds


async def test_a_store_error_on_the_last_attempt_fails_the_run_and_is_compensated(
    runtime: Runtime, worker: Worker, tmp_path: Path
) -> None:
    (tmp_path / "blips").write_text("100")  # the store stays unavailable to that step
    run = await runtime.create("saga_blips", thread_id="saga-blips", input={"messages": []})
    done = await runtime.wait(run.run_id, timeout=60)
    assert done.status == "error", done
    assert done.error is not None
    assert done.error["compensation"]["undone"] == ["email", "charge"]
    assert _kinds(tmp_path / "world.db") == [
        "charge",
        "email",
        "undo-email ada@example.com",
        "undo-charge 4200",
    ]


async def _rolled_back_while_running(
    runtime: Runtime, worker: Worker, run_id: str, workdir: Path
) -> Run:
    """Cancel with rollback the run waiting for ``release`` once it emailed; the run, ended."""
    await _until_emailed(runtime, worker, run_id, workdir / "world.db")
    await runtime.cancel(run_id, action="rollback", reason="customer withdrew")
    for _ in range(3000):  # the worker has heard of the cancel: its next boundary stops the run
        held = worker._held.get(run_id)
        if held is None or held[0].cancel is not None:
            break
        await asyncio.sleep(0.01)
    (workdir / "release").touch()
    return await runtime.wait(run_id, timeout=60)


async def test_a_rollback_cancel_compensates_before_the_run_is_deleted(
    runtime: Runtime, worker: Worker, tmp_path: Path
) -> None:
    run = await runtime.create("saga_waits", thread_id="saga-2", input={"messages": []})
    done = await _rolled_back_while_running(runtime, worker, run.run_id, tmp_path)
    assert done.status == "cancelled", done
    assert done.ended_reason is not None
    assert "customer withdrew" in done.ended_reason
    assert "undone: email, charge" in done.ended_reason
    assert _kinds(tmp_path / "world.db")[-2:] == ["undo-email ada@example.com", "undo-charge 4200"]
    assert "ship" not in _kinds(tmp_path / "world.db")


async def _paused(runtime: Runtime, graph: str, thread: str, world: Path) -> str:
    run = await runtime.create(graph, thread_id=thread, input={"messages": []})
    paused = await runtime.wait(run.run_id, timeout=60)
    assert paused.status == "interrupted", paused
    assert _kinds(world) == ["charge", "email"]
    return run.run_id


async def _rolled_back(runtime: Runtime, run_id: str, thread: str) -> Run:
    """The run that rolls ``run_id`` back, once it ended; the thread's checkpoints are gone."""
    [rolling] = [r for r in await runtime.list(thread_id=thread) if r.run_id != run_id]
    assert rolling.run_id == rollback_id(run_id)
    rolled = await runtime.wait(rolling.run_id, timeout=60)
    assert rolled.status == "success", rolled
    saver = await runtime.checkpointer()
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    assert await saver.aget_tuple(config) is None
    return rolled


async def test_a_rollback_cancel_of_a_paused_run_compensates_it(
    runtime: Runtime, worker: Worker, tmp_path: Path
) -> None:
    """The run charged and emailed, then paused for a person: no worker holds it when the
    person cancels it with rollback, and its effects are still undone before it is deleted."""
    run_id = await _paused(runtime, "saga_asks", "saga-asks", tmp_path / "world.db")
    cancelled = await runtime.cancel(run_id, action="rollback", reason="customer withdrew")
    assert cancelled.status == "cancelled"
    await _rolled_back(runtime, run_id, "saga-asks")
    assert _kinds(tmp_path / "world.db") == [
        "charge",
        "email",
        "undo-email ada@example.com",
        "undo-charge 4200",
    ]
    done = await runtime.get(run_id)
    assert done.status == "cancelled", done
    assert done.ended_reason is not None
    assert "customer withdrew" in done.ended_reason
    assert "undone: email, charge" in done.ended_reason


async def test_a_rollback_cancel_of_a_paused_run_of_another_graph_deletes_it_on_a_worker(
    runtime: Runtime, worker: Worker, tmp_path: Path
) -> None:
    """The graph does not compensate: its effects stay, and the rollback deletes the run."""
    run_id = await _paused(runtime, "asks_uncompensated", "asks-plain", tmp_path / "world.db")
    cancelled = await runtime.cancel(run_id, action="rollback")
    assert cancelled.status == "cancelled"
    rolled = await _rolled_back(runtime, run_id, "asks-plain")
    assert rolled.ended_reason is not None
    assert f"run {run_id} rolled back" in rolled.ended_reason
    assert _kinds(tmp_path / "world.db") == ["charge", "email"]


async def test_a_rollback_left_undone_by_a_dead_process_is_done_by_cancelling_again(
    runtime: Runtime, worker: Worker, tmp_path: Path
) -> None:
    """The cancel was stored, then its process died before it enqueued the rollback."""
    run_id = await _paused(runtime, "saga_asks", "saga-dead-cancel", tmp_path / "world.db")
    await runtime.store.cancel_run(run_id, action="rollback", reason="withdrawn")
    assert [r.run_id for r in await runtime.list(thread_id="saga-dead-cancel")] == [run_id]
    again = await runtime.cancel(run_id, action="rollback")
    assert again.status == "cancelled"
    await _rolled_back(runtime, run_id, "saga-dead-cancel")
    assert _kinds(tmp_path / "world.db")[2:] == ["undo-email ada@example.com", "undo-charge 4200"]
    with pytest.raises(RunNotActiveError):  # rolled back: nothing is left to cancel
        await runtime.cancel(run_id, action="rollback")


@pytest.mark.parametrize("graph", ["saga_asks", "asks_uncompensated"])
async def test_a_rollback_left_undone_by_a_dead_process_is_enqueued_by_the_scheduler(
    runtime: Runtime, worker: Worker, tmp_path: Path, graph: str
) -> None:
    """The cancel was stored, then its process died before it enqueued the rollback: after
    the grace, the scheduler's sweep (which looks once per grace) enqueues it, once."""
    thread, world = f"orphan-{graph}", tmp_path / "world.db"
    run_id = await _paused(runtime, graph, thread, world)
    cancelled = await runtime.store.cancel_run(run_id, action="rollback", reason="withdrawn")
    scheduler = Scheduler(runtime, decision_grace=30)
    assert cancelled.ended_at is not None
    within = await scheduler.tick(cancelled.ended_at + timedelta(seconds=5))
    assert within.rolled_back == []  # its canceller may still be enqueueing it
    after = await scheduler.tick(cancelled.ended_at + timedelta(seconds=35))  # a grace later
    assert after.rolled_back == [rollback_id(run_id)], after.errors
    await _rolled_back(runtime, run_id, thread)
    undos = ["undo-email ada@example.com", "undo-charge 4200"] if graph == "saga_asks" else []
    assert _kinds(world) == ["charge", "email", *undos]
    again = await Scheduler(runtime, decision_grace=30).tick(
        cancelled.ended_at + timedelta(seconds=60)
    )
    assert again.rolled_back == [], again.errors  # rolled back: nothing is left to do


async def _approve_the_undo_then_rolled_back(
    runtime: Runtime, run_id: str, thread: str, world: Path
) -> None:
    """The rollback's undo of the charge waits on a person: the run's checkpoints stay (they
    say what to undo) until the person approves and a worker undoes it; then they go."""
    cancelled = await runtime.get(run_id)
    assert cancelled.ended_reason is not None
    assert "awaiting a person: charge" in cancelled.ended_reason
    assert _kinds(world) == ["charge", "email", "undo-email ada@example.com"]
    saver = await runtime.checkpointer()
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    assert await saver.aget_tuple(config) is not None
    [approval_id] = await awaiting(runtime, cancelled)
    request = (await get_approval(saver, approval_id)).request
    (world.parent / "undo_down").unlink()
    await runtime.decide(thread, approval_id, "approve", by="dana", args_sha256=request.args_sha256)
    continued = await runtime.wait(continuation_id(approval_id), timeout=60)
    assert continued.status == "success", continued
    assert _kinds(world)[3:] == ["undo-charge 4200"]
    after = await runtime.get(run_id)
    assert after.ended_reason is not None
    assert "undone: email, charge" in after.ended_reason
    assert await saver.aget_tuple(config) is None  # the compensation is complete: rolled back


async def test_a_rollback_whose_undo_waits_on_a_person_deletes_once_it_is_decided(
    runtime: Runtime, worker: Worker, tmp_path: Path
) -> None:
    (tmp_path / "undo_down").touch()
    run = await runtime.create("waits_undo_fails", thread_id="waits-down", input={"messages": []})
    done = await _rolled_back_while_running(runtime, worker, run.run_id, tmp_path)
    assert done.status == "cancelled", done
    assert done.ended_at is not None
    swept = await Scheduler(runtime).tick(done.ended_at + timedelta(seconds=60))
    assert swept.rolled_back == [], swept.errors  # its worker began compensating it: no orphan
    world = tmp_path / "world.db"
    await _approve_the_undo_then_rolled_back(runtime, run.run_id, "waits-down", world)


async def test_a_paused_runs_rollback_whose_undo_waits_on_a_person_deletes_once_decided(
    runtime: Runtime, worker: Worker, tmp_path: Path
) -> None:
    (tmp_path / "undo_down").touch()
    run_id = await _paused(runtime, "asks_undo_fails", "asks-down", tmp_path / "world.db")
    await runtime.cancel(run_id, action="rollback")
    rolling = await runtime.wait(rollback_id(run_id), timeout=60)
    assert rolling.status == "success", rolling
    assert rolling.ended_reason is not None
    assert "rolled back once complete" in rolling.ended_reason
    await _approve_the_undo_then_rolled_back(runtime, run_id, "asks-down", tmp_path / "world.db")


async def _resumed_and_left_pending(runtime: Runtime, paused: str, how: str) -> str:
    """Resume the paused run (no worker serves): the run that will continue it, ``pending``.

    ``how``: ``"v1"`` re-enqueues the paused run itself (``Runtime.resume``,
    ``/v1/runs/{id}/resume``); ``"command"`` creates a new run with a
    ``Command(resume=...)``, as LangGraph's SDK does, which closes the paused one.
    """
    thread = (await runtime.get(paused)).thread_id
    if how == "v1":
        resumed = await runtime.resume(paused, {"resume": "ship it"})
        assert (resumed.status, resumed.resumes) == ("pending", 1)
        return paused
    resuming = await runtime.create("saga_asks", thread_id=thread, command={"resume": "ship it"})
    closed = await runtime.get(paused)
    assert (closed.status, closed.ended_reason) == (
        "success",
        f"continued by run {resuming.run_id}",
    )
    return resuming.run_id


@pytest.mark.parametrize("how", ["v1", "command"])
async def test_a_new_run_with_rollback_undoes_a_started_pending_run_before_it_starts(
    runtime: Runtime, runtime_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """The run charged, emailed and paused; a person resumed it, but no worker has taken it
    up again (``pending``, started) when a new run supersedes it with ``rollback``. Its
    effects are undone, and its checkpoints deleted, before the new run starts."""
    monkeypatch.setenv("TETHER_TEST_WORKDIR", str(tmp_path))
    world, thread = tmp_path / "world.db", f"saga-superseded-{how}"
    async with in_process_worker(runtime_url):
        paused = await _paused(runtime, "saga_asks", thread, world)
    run_id = await _resumed_and_left_pending(runtime, paused, how)
    refused: list[dict[str, Any]] = [
        {"assistant_id": "no_such_graph"},
        {"assistant_id": "saga_asks", "run_id": run_id},  # a run id in use
        {"assistant_id": "saga_asks", "after_seconds": -1},
    ]
    for bad in refused:  # a request refused cancels nothing
        with pytest.raises(TetherError):
            await runtime.create(thread_id=thread, multitask_strategy="rollback", **bad)
        assert (await runtime.get(run_id)).status == "pending", bad
    new = await runtime.create(
        "saga_asks", thread_id=thread, input={"messages": []}, multitask_strategy="rollback"
    )
    old = await runtime.get(run_id)
    assert (old.status, old.cancel_action) == ("cancelled", "rollback")
    assert old.cancel_reason == f"superseded by run {new.run_id} (multitask_strategy=rollback)"
    async with in_process_worker(runtime_url):
        rolled = await runtime.wait(rollback_id(run_id), timeout=60)
        assert rolled.status == "success", rolled
        again = await runtime.wait(new.run_id, timeout=60)
        assert again.status == "interrupted", again
    assert _kinds(world) == [
        "charge",
        "email",
        "undo-email ada@example.com",
        "undo-charge 4200",
        "charge",  # the new run's, after the undos: it waited behind the rollback
        "email",
    ]
    done = await runtime.get(run_id)
    assert done.ended_reason is not None
    assert "undone: email, charge" in done.ended_reason
    saver = await runtime.checkpointer()
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    history = [c async for c in saver.alist(config)]
    assert history, "the new run's checkpoints"
    assert {c.metadata.get("run_id") for c in history} == {new.run_id}  # the old runs': gone


async def test_a_run_that_resumed_a_paused_run_and_failed_undoes_what_the_paused_run_did(
    runtime: Runtime, worker: Worker, tmp_path: Path
) -> None:
    """LangGraph's SDK resumes with a new run (``Command(resume=...)``), which closes the
    paused one: when it fails, the effects made before the pause are still the saga's."""
    world, thread = tmp_path / "world.db", "saga-resumed-fails"
    paused = await _paused(runtime, "asks_then_fails", thread, world)
    resuming = await runtime.create(
        "asks_then_fails", thread_id=thread, command={"resume": "ship it"}
    )
    done = await runtime.wait(resuming.run_id, timeout=60)
    assert done.status == "error", done
    assert done.error is not None
    assert done.error["compensation"]["undone"] == ["email", "charge"]
    assert _kinds(world) == ["charge", "email", "undo-email ada@example.com", "undo-charge 4200"]
    assert (await runtime.get(paused)).status == "success"  # continued by the resuming run


async def test_a_run_that_resumed_a_paused_run_rolled_back_while_running_undoes_both(
    runtime: Runtime, worker: Worker, tmp_path: Path
) -> None:
    """The resuming run is cancelled with rollback while it runs: what the paused run did is
    undone too, and both runs' checkpoints go, as when the paused run itself is resumed."""
    world, thread = tmp_path / "world.db", "saga-resumed-rolled-back"
    paused = await _paused(runtime, "asks_then_waits", thread, world)
    resuming = await runtime.create(
        "asks_then_waits", thread_id=thread, command={"resume": "ship it"}
    )
    for _ in range(3000):  # until its worker holds it (it waits for the release)
        if worker._held.get(resuming.run_id) is not None:
            break
        await asyncio.sleep(0.01)
    done = await _rolled_back_while_running(runtime, worker, resuming.run_id, tmp_path)
    assert done.status == "cancelled", done
    assert done.ended_reason is not None
    assert "undone: email, charge" in done.ended_reason
    assert _kinds(world) == ["charge", "email", "undo-email ada@example.com", "undo-charge 4200"]
    saver = await runtime.checkpointer()
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    assert [c async for c in saver.alist(config)] == []  # the paused run's went too
    assert (await runtime.get(paused)).status == "success"
