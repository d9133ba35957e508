"""``threads.join_stream`` through the official SDK against a real ``tether serve``."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import StreamPart


@pytest.fixture
def client(server: str) -> LangGraphClient:
    return get_client(url=server)


async def _until_done(stream: Any, runs: int) -> list[StreamPart]:
    """The parts of ``stream`` up to its ``runs``-th ``run_done``."""
    parts: list[StreamPart] = []
    async for part in await stream:  # threads.join_stream is a coroutine giving the iterator
        parts.append(part)
        if sum(p.event == "run_done" for p in parts) == runs:
            break
    return parts


async def test_replays_every_run_then_resumes_after_an_id(client: LangGraphClient) -> None:
    tid = (await client.threads.create())["thread_id"]
    first = await client.runs.wait(tid, "echo", input={"text": "one"})
    assert first["trace"] == ["a", "b", "c"]
    await client.runs.wait(tid, "echo", input={"text": "two"})
    runs = sorted(await client.runs.list(tid), key=lambda r: r["created_at"])

    parts = await _until_done(client.threads.join_stream(tid, last_event_id="0-done"), 2)
    metadata = [p.data["run_id"] for p in parts if p.event == "metadata"]
    assert metadata == [r["run_id"] for r in runs]
    done = [p.data for p in parts if p.event == "run_done"]
    assert done == [{"run_id": r["run_id"], "status": "success"} for r in runs]
    values = [p.data for p in parts if p.event == "values"]
    assert values[-1]["text"] == "two"
    assert values[-1]["trace"] == ["a", "b", "c", "a", "b", "c"]
    ids = [p.id for p in parts]
    assert len(set(ids)) == len(ids)

    # reconnect after the first run's second event: the rest, exactly
    middle = parts[1].id
    assert middle is not None
    rest = await _until_done(client.threads.join_stream(tid, last_event_id=middle), 2)
    assert [p.id for p in rest] == ids[2:]
    after_first = next(p.id for p in parts if p.event == "run_done")
    assert after_first is not None
    second = await _until_done(client.threads.join_stream(tid, last_event_id=after_first), 1)
    assert second == parts[parts.index(next(p for p in parts if p.id == after_first)) + 1 :]


async def test_follows_runs_started_after_it_joined(client: LangGraphClient) -> None:
    tid = (await client.threads.create())["thread_id"]
    seen: list[StreamPart] = []

    async def listen() -> None:
        # "0-done": from the thread's first run on, whenever this request reaches the server
        seen.extend(await _until_done(client.threads.join_stream(tid, last_event_id="0-done"), 2))

    listener = asyncio.create_task(listen())
    one = await client.runs.create(tid, "ticker", input={"until": 2})
    two = await client.runs.create(tid, "echo", input={"text": "next"})
    await listener
    done = [p.data for p in seen if p.event == "run_done"]
    assert [d["run_id"] for d in done] == [one["run_id"], two["run_id"]]
    assert all(d["status"] == "success" for d in done)


async def test_bad_join_requests(client: LangGraphClient, server: str) -> None:
    tid = (await client.threads.create())["thread_id"]
    async with httpx.AsyncClient(base_url=server) as http:
        mode = await http.get(f"/threads/{tid}/stream", params={"stream_mode": "lifecycle"})
        assert mode.status_code == 422
        assert "lifecycle" in mode.json()["detail"]
        bad_id = await http.get(f"/threads/{tid}/stream", headers={"Last-Event-ID": "seven"})
        assert bad_id.status_code == 422
        assert "seven" in bad_id.json()["detail"]
        missing = await http.get(f"/threads/{uuid.uuid4()}/stream")
        assert missing.status_code == 404
