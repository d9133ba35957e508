"""Crons through the official SDK against a real ``tether serve``, both backends."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError


@pytest.fixture
def client(server: str) -> LangGraphClient:
    return get_client(url=server)


async def test_create_search_count_update_delete(client: LangGraphClient) -> None:
    tag = str(uuid.uuid4())
    end = datetime(2100, 1, 1, tzinfo=UTC)
    cron = await client.crons.create(
        "echo",
        schedule="0 9 * * mon-fri",
        input={"text": "daily"},
        metadata={"tag": tag, "n": 1},
        config={"tags": ["x"]},
        timezone="Europe/Paris",
        end_time=end,
        on_run_completed="keep",
    )
    assert cron["thread_id"] is None
    assert cron["schedule"] == "0 9 * * mon-fri"
    assert cron["timezone"] == "Europe/Paris"
    assert cron["enabled"] is True
    assert cron["on_run_completed"] == "keep"
    assert cron["metadata"] == {"tag": tag, "n": 1}
    assert cron["payload"]["input"] == {"text": "daily"}
    assert cron["payload"]["config"] == {"tags": ["x"]}
    assert datetime.fromisoformat(cron["end_time"]) == end
    assert datetime.fromisoformat(cron["next_run_date"]) > datetime.now(UTC)
    second = await client.crons.create(
        "echo", schedule="*/5 * * * *", metadata={"tag": tag, "n": 2}
    )

    mine = await client.crons.search(assistant_id="echo", metadata={"tag": tag})
    assert [c["cron_id"] for c in mine] == [second["cron_id"], cron["cron_id"]]  # newest first
    oldest = await client.crons.search(
        metadata={"tag": tag}, sort_by="created_at", sort_order="asc", limit=1
    )
    assert [c["cron_id"] for c in oldest] == [cron["cron_id"]]
    picked = await client.crons.search(metadata={"tag": tag, "n": 2}, select=["cron_id"])
    assert picked == [{"cron_id": second["cron_id"]}]
    assert await client.crons.count(metadata={"tag": tag}) == 2
    assert await client.crons.count(assistant_id="chat", metadata={"tag": tag}) == 0

    updated = await client.crons.update(
        cron["cron_id"], schedule="30 8 * * *", enabled=False, end_time=None
    )
    assert updated["schedule"] == "30 8 * * *"
    assert updated["enabled"] is False
    assert updated["end_time"] is None
    assert await client.crons.search(metadata={"tag": tag}, enabled=False) == [updated]

    await client.crons.delete(cron["cron_id"])
    await client.crons.delete(second["cron_id"])
    assert await client.crons.count(metadata={"tag": tag}) == 0
    with pytest.raises(NotFoundError, match="no cron"):
        await client.crons.delete(cron["cron_id"])


async def test_a_thread_cron_fires_runs_on_its_thread(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    cron = await client.crons.create_for_thread(
        thread["thread_id"], "echo", schedule="* * * * * *", input={"text": "tick"}
    )
    assert cron["thread_id"] == thread["thread_id"]
    assert await client.crons.count(thread_id=thread["thread_id"]) == 1
    runs = await client.runs.list(thread["thread_id"])
    while not runs:  # the scheduler fires it within a second or two
        await asyncio.sleep(0.2)
        runs = await client.runs.list(thread["thread_id"])
    await client.crons.delete(cron["cron_id"])
    assert runs[0]["metadata"]["cron_id"] == cron["cron_id"]
    await client.runs.join(thread["thread_id"], runs[0]["run_id"])
    state = await client.threads.get_state(thread["thread_id"])
    assert state["values"]["text"] == "tick"


async def test_bad_cron_requests(client: LangGraphClient, server: str) -> None:
    with pytest.raises(UnprocessableEntityError, match="schedule"):
        await client.crons.create("echo", schedule="every day")
    with pytest.raises(NotFoundError, match="nope"):
        await client.crons.create("nope", schedule="* * * * *")
    with pytest.raises(NotFoundError):
        await client.crons.create_for_thread(str(uuid.uuid4()), "echo", schedule="* * * * *")
    with pytest.raises(UnprocessableEntityError, match="absolute http"):
        await client.crons.create("echo", schedule="* * * * *", webhook="ftp://x.example")
    cron = await client.crons.create(
        "echo", schedule="0 0 1 1 *", end_time=datetime.now(UTC) + timedelta(days=400)
    )
    with pytest.raises(UnprocessableEntityError, match="cannot change input"):
        await client.crons.update(cron["cron_id"], input={"text": "other"})
    with pytest.raises(UnprocessableEntityError, match="timezone"):
        await client.crons.update(cron["cron_id"], timezone="Mars/Olympus")
    with pytest.raises(NotFoundError):
        await client.crons.update(str(uuid.uuid4()), enabled=False)
    async with httpx.AsyncClient(base_url=server) as http:
        bad_select = await http.post("/runs/crons/search", json={"select": ["nope"]})
        assert bad_select.status_code == 422
        assert "nope" in bad_select.json()["detail"]
        no_schedule = await http.post("/runs/crons", json={"assistant_id": "echo"})
        assert no_schedule.status_code == 422
        assert no_schedule.json()["detail"][0]["loc"] == ["body", "schedule"]
        # what the run store cannot keep is refused, naming where, as for a run
        for body, named in (
            ({"metadata": {"x\u0000": 1}}, "metadata has a key with a NUL character"),
            ({"input": {"n": 10**30}}, "input"),
        ):
            unstorable = await http.post(
                "/runs/crons", json={"assistant_id": "echo", "schedule": "0 0 1 1 *", **body}
            )
            assert unstorable.status_code == 422, (body, unstorable.text)
            assert named in unstorable.json()["detail"], unstorable.text
    await client.crons.delete(cron["cron_id"])
