"""Crons: the API on both backends, and each slot firing exactly once.

The scheduler's ticks are called with an explicit ``now``, so a test moves
time forward instead of sleeping; two schedulers on two connections tick at
the same moment to show a slot still fires once.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from tests.runtime.workers import PROJECT, Workers
from tether.runtime import (
    AssistantNotFoundError,
    CronNotFoundError,
    InvalidRunRequestError,
    Runtime,
    Scheduler,
    SyncRuntime,
    ThreadNotFoundError,
)
from tether.runtime.project import Project

GRAPHS = Project.load(PROJECT).graph_ids


async def test_a_cron_fires_each_slot_once_even_with_two_schedulers(
    runtime: Runtime, runtime_url: str
) -> None:
    cron = await runtime.create_cron(
        "three_node", "*/5 * * * *", input={"trace": []}, metadata={"team": "ops"}
    )
    slot = cron.next_run_at
    assert slot.minute % 5 == 0
    assert slot.second == 0
    assert slot > datetime.now(UTC)
    async with Runtime(runtime_url) as other:
        first, second = Scheduler(runtime), Scheduler(other)
        before = await first.tick(slot - timedelta(seconds=1))
        assert before.fired == []
        at = slot + timedelta(seconds=1)
        reports = await asyncio.gather(first.tick(at), second.tick(at), first.tick(at))
        assert sum(len(r.fired) for r in reports) == 1
        assert [r.errors for r in reports] == [[], [], []]
        again = await second.tick(at)
        assert again.fired == []
    runs = await runtime.list()
    assert len(runs) == 1
    run = runs[0]
    assert run.status == "pending"
    assert run.input == {"trace": []}
    assert run.metadata == {"team": "ops", "cron_id": cron.cron_id}
    assert run.kwargs["temporary"] is True  # stateless: on_run_completed defaults to delete
    moved = await runtime.get_cron(cron.cron_id)
    assert moved.next_run_at == slot + timedelta(minutes=5)


async def test_missed_slots_collapse_into_one_fire(runtime: Runtime) -> None:
    cron = await runtime.create_cron("three_node", "* * * * *", input={"trace": []})
    scheduler = Scheduler(runtime)
    late = cron.next_run_at + timedelta(minutes=30, seconds=10)
    report = await scheduler.tick(late)
    assert len(report.fired) == 1
    assert (await scheduler.tick(late)).fired == []
    moved = await runtime.get_cron(cron.cron_id)
    assert moved.next_run_at == cron.next_run_at + timedelta(minutes=31)
    assert len(await runtime.list()) == 1


async def test_a_thread_cron_continues_its_thread_and_a_worker_runs_it(
    runtime: Runtime, workers: Workers
) -> None:
    await runtime.create_thread(thread_id="t-cron")
    cron = await runtime.create_cron(
        "three_node", "0 * * * * *", thread_id="t-cron", payload={"input": {"trace": []}}
    )
    assert cron.on_run_completed is None
    workers.start(1)
    report = await Scheduler(runtime).tick(cron.next_run_at)
    assert len(report.fired) == 1
    done = await runtime.wait(report.fired[0], timeout=60)
    assert done.status == "success", done
    assert done.thread_id == "t-cron"


async def test_disabled_and_ended_crons_do_not_fire_and_re_enabling_skips_missed_slots(
    runtime: Runtime,
) -> None:
    now = datetime.now(UTC)
    off = await runtime.create_cron("three_node", "* * * * *", enabled=False)
    ended = await runtime.create_cron(
        "three_node", "* * * * *", end_time=now + timedelta(minutes=2)
    )
    scheduler = Scheduler(runtime)
    assert (await scheduler.tick(now + timedelta(minutes=10))).fired == []
    assert await runtime.list() == []
    assert (await runtime.get_cron(ended.cron_id)).enabled is True
    on = await runtime.update_cron(off.cron_id, enabled=True)
    assert on.enabled is True
    assert on.next_run_at > now
    assert (await scheduler.tick(on.next_run_at)).fired != []


async def test_the_cron_api_creates_lists_updates_and_deletes(runtime: Runtime) -> None:
    await runtime.create_thread(thread_id="t-list")
    a = await runtime.create_cron("three_node", "@hourly", metadata={"k": 1})
    b = await runtime.create_cron(
        "pause", "0 9 * * mon-fri", thread_id="t-list", timezone="Europe/Paris"
    )
    assert b.next_run_at.tzinfo is not None
    local = b.next_run_at.astimezone(__import__("zoneinfo").ZoneInfo("Europe/Paris"))
    assert (local.hour, local.minute) == (9, 0)
    assert local.weekday() < 5
    assert [c.cron_id for c in await runtime.list_crons()] == [a.cron_id, b.cron_id]
    assert [c.cron_id for c in await runtime.list_crons(thread_id="t-list")] == [b.cron_id]
    assert [c.cron_id for c in await runtime.list_crons(assistant_id=a.assistant_id)] == [a.cron_id]
    updated = await runtime.update_cron(a.cron_id, schedule="*/10 * * * *", enabled=False)
    assert (updated.schedule, updated.enabled) == ("*/10 * * * *", False)
    assert updated.next_run_at.minute % 10 == 0
    assert [c.cron_id for c in await runtime.list_crons(enabled=False)] == [a.cron_id]
    await runtime.delete_cron(a.cron_id)
    with pytest.raises(CronNotFoundError, match=a.cron_id):
        await runtime.get_cron(a.cron_id)
    with pytest.raises(CronNotFoundError):
        await runtime.delete_cron(a.cron_id)
    # Another tenant sees none of them.
    other = runtime.scoped("acme")
    assert await other.list_crons() == []
    with pytest.raises(CronNotFoundError):
        await other.get_cron(b.cron_id)


@pytest.mark.parametrize(
    ("schedule", "options", "message"),
    [
        ("61 * * * *", {}, r"schedule '61 \* \* \* \*' is not a valid cron expression"),
        ("every day", {}, "schedule 'every day' is not a valid cron expression"),
        ("", {}, "schedule must be a cron expression"),
        ("0 0 30 2 *", {}, r"schedule '0 0 30 2 \*' never fires"),
        ("* * * * *", {"timezone": "Mars/Olympus"}, "timezone 'Mars/Olympus' is not a known"),
        ("* * * * *", {"payload": {"ttl": 5}}, "payload key 'ttl' is not a run option"),
        ("* * * * *", {"payload": {"webhook": "x"}}, "webhook .x. must be an absolute http"),
        ("* * * * *", {"payload": {"stream_mode": "nope"}}, "stream_mode 'nope' is unknown"),
        ("* * * * *", {"on_run_completed": "later"}, "on_run_completed 'later' is unknown"),
        ("* * * * *", {"end_time": datetime(2030, 1, 1)}, "end_time must be a timezone-aware"),
    ],
)
async def test_a_bad_cron_is_refused_with_a_message_naming_the_problem(
    runtime: Runtime, schedule: str, options: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidRunRequestError, match=message):
        await runtime.create_cron("three_node", schedule, **options)  # type: ignore[arg-type]
    assert await runtime.list_crons() == []


async def test_a_cron_of_a_missing_assistant_or_thread_is_refused(runtime: Runtime) -> None:
    with pytest.raises(AssistantNotFoundError):
        await runtime.create_cron("no-such-graph", "* * * * *")
    with pytest.raises(ThreadNotFoundError):
        await runtime.create_cron("three_node", "* * * * *", thread_id="missing")
    cron = await runtime.create_cron("three_node", "* * * * *")
    with pytest.raises(InvalidRunRequestError, match="schedule '1 2 3' is not a valid"):
        await runtime.update_cron(cron.cron_id, schedule="1 2 3")
    with pytest.raises(InvalidRunRequestError, match="timezone 'Nowhere'"):
        await runtime.update_cron(cron.cron_id, timezone="Nowhere")
    assert (await runtime.get_cron(cron.cron_id)).schedule == "* * * * *"


async def test_a_fire_whose_run_is_refused_skips_its_slot(runtime: Runtime) -> None:
    await runtime.create_thread(thread_id="t-busy")
    await runtime.create("three_node", thread_id="t-busy", input={"trace": []})
    cron = await runtime.create_cron(
        "three_node",
        "* * * * *",
        thread_id="t-busy",
        payload={"multitask_strategy": "reject"},
    )
    scheduler = Scheduler(runtime)
    report = await scheduler.tick(cron.next_run_at)
    assert report.fired == []
    assert any("already running a task" in e for e in report.errors), report.errors
    moved = await runtime.get_cron(cron.cron_id)
    assert moved.next_run_at > cron.next_run_at  # the slot is not tried again
    assert (await scheduler.tick(cron.next_run_at)).errors == []


def test_sync_runtime_has_the_cron_api(runtime_url: str) -> None:
    with SyncRuntime(runtime_url, graphs=GRAPHS) as rt:
        cron = rt.create_cron("three_node", "*/2 * * * *", input={"trace": []})
        assert rt.get_cron(cron.cron_id) == cron
        assert [c.cron_id for c in rt.list_crons()] == [cron.cron_id]
        assert rt.update_cron(cron.cron_id, enabled=False).enabled is False
        rt.delete_cron(cron.cron_id)
        assert rt.list_crons() == []
