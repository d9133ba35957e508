"""The compact durability API (``/v1``) of a real ``tether serve --no-auth``, both backends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client

from tests.server.conftest import PROJECT, ServeProcess, _store_url
from tether.runtime import Runtime
from tether.server import create_app

DANA = {"x-tether-user": "dana"}
EVE = {"x-tether-user": "eve"}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def base(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    workdir: Path = tmp_path_factory.mktemp("v1")
    with _store_url(request, request.param, workdir) as url:
        process = ServeProcess(url, workdir, ("--no-auth",))
        try:
            process.start()
            yield process.base
        finally:
            process.stop()


@pytest.fixture
async def http(base: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=base, timeout=60, headers=DANA) as session:
        yield session


async def _start(http: httpx.AsyncClient, agent: str, payload: Any, **more: Any) -> str:
    answer = await http.post("/v1/runs", json={"agent": agent, "input": payload, **more})
    assert answer.status_code == 201, answer.text
    assert answer.json()["status"] == "pending"
    run_id: str = answer.json()["run_id"]
    return run_id


async def _stopped(http: httpx.AsyncClient, run_id: str) -> dict[str, Any]:
    """The run once it is neither pending nor running (long-polling its events)."""
    after = 0
    while True:
        page = await http.get(f"/v1/runs/{run_id}/events", params={"after": after, "wait": 5})
        assert page.status_code == 200, page.text
        after = page.json()["next_after"]
        run = await http.get(f"/v1/runs/{run_id}")
        assert run.status_code == 200, run.text
        if run.json()["status"] not in ("pending", "running"):
            shown: dict[str, Any] = run.json()
            return shown


async def test_plain_interrupt_status_checkpoint_and_resume(http: httpx.AsyncClient) -> None:
    run_id = await _start(http, "ask", {"text": "v1"})
    run = await _stopped(http, run_id)
    assert run["status"] == "interrupted", run
    assert run["agent"] == "ask"
    interrupt = run["interrupt"]
    assert interrupt["node"] == "question"
    assert interrupt["approval_id"] is None
    assert interrupt["value"] == {"question": "ship v1?"}
    assert interrupt["reason"] == '{"question": "ship v1?"}'
    assert run["interrupts"] == [interrupt]

    checkpoint = await http.get(f"/v1/runs/{run_id}/checkpoints/{run['checkpoint_id']}")
    assert checkpoint.status_code == 200, checkpoint.text
    shown = checkpoint.json()
    assert shown["nodes_completed"] == ["before"]
    assert shown["created_at"]
    state = await http.get(shown["state_uri"])
    assert state.status_code == 200, state.text
    assert state.json()["values"]["trace"] == ["before"]

    refused = await http.post(f"/v1/runs/{run_id}/resume", json={"decision": "approve"})
    assert refused.status_code == 422
    assert "plain interrupt()" in refused.json()["detail"]

    resumed = await http.post(
        f"/v1/runs/{run_id}/resume", json={"decision": "resume", "payload": "yes"}
    )
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["status"] == "pending"
    done = await _stopped(http, run_id)
    assert done["status"] == "success", done
    assert done["interrupt"] is None

    final = await http.get(f"/threads/{done['thread_id']}/state")
    assert final.json()["values"]["answer"] == "yes"
    assert final.json()["values"]["trace"] == ["before", "asked", "after"]

    again = await http.post(f"/v1/runs/{run_id}/resume", json={"decision": "resume"})
    assert again.status_code == 409
    assert "not interrupted" in again.json()["detail"]


async def test_approval_goes_through_the_decision_checks(http: httpx.AsyncClient) -> None:
    run_id = await _start(http, "gated", {"text": "crate"})
    run = await _stopped(http, run_id)
    assert run["status"] == "interrupted", run
    interrupt = run["interrupt"]
    assert interrupt["node"] == "approve"
    assert interrupt["reason"] == "a person checks what ships"
    approval_id = interrupt["approval_id"]
    assert approval_id
    assert approval_id.startswith("apr_")
    sha = interrupt["value"]["args_sha256"]
    path = f"/v1/runs/{run_id}/resume"

    not_approver = await http.post(
        path, json={"decision": "approve", "payload": {"args_sha256": sha}}, headers=EVE
    )
    assert not_approver.status_code == 403, not_approver.text
    assert "'eve'" in not_approver.json()["detail"]

    plain = await http.post(path, json={"decision": "resume", "payload": "ok"})
    assert plain.status_code == 422
    assert "tether approval" in plain.json()["detail"]

    no_reason = await http.post(path, json={"decision": "reject", "payload": {"args_sha256": sha}})
    assert no_reason.status_code == 422
    assert "reason" in no_reason.json()["detail"]

    stale = await http.post(path, json={"decision": "approve", "payload": {"args_sha256": "0"}})
    assert stale.status_code == 409
    assert "sha256" in stale.json()["detail"]

    who = await http.post(path, json={"decision": "approve", "by": "eve"})
    assert who.status_code == 422
    assert who.json()["detail"][0]["loc"] == ["body", "by"]

    other = await http.post(
        path, json={"decision": "approve", "payload": {"args_sha256": sha, "approval_id": "x"}}
    )
    assert other.status_code == 422
    assert "does not wait on approval 'x'" in other.json()["detail"]

    approved = await http.post(path, json={"decision": "approve", "payload": {"args_sha256": sha}})
    assert approved.status_code == 200, approved.text
    assert approved.json()["approval_id"] == approval_id
    assert approved.json()["decision"] == "approve"
    done = await _stopped(http, run_id)
    assert done["status"] == "success", done
    state = await http.get(f"/threads/{done['thread_id']}/state")
    assert state.json()["values"]["answer"] == "approve"


async def test_events_while_running_and_after(http: httpx.AsyncClient) -> None:
    run_id = await _start(http, "ticker", {"until": 3})
    first = await http.get(f"/v1/runs/{run_id}/events", params={"after": 0, "wait": 10})
    assert first.status_code == 200, first.text
    events = first.json()["events"]
    assert events
    assert (events[0]["seq"], events[0]["kind"]) == (1, "run.created")
    await _stopped(http, run_id)
    rest = await http.get(f"/v1/runs/{run_id}/events", params={"after": 1, "limit": 1000})
    seqs = [e["seq"] for e in rest.json()["events"]]
    assert seqs == list(range(2, seqs[-1] + 1))
    kinds = [e["kind"] for e in rest.json()["events"]]
    assert kinds[-1] == "run.finished"
    assert rest.json()["status"] == "success"
    counts = [e["data"].get("n") for e in rest.json()["events"] if e["kind"] == "values"]
    assert counts[-1] == 3
    nothing = await http.get(f"/v1/runs/{run_id}/events", params={"after": seqs[-1]})
    assert nothing.json()["events"] == []
    assert nothing.json()["next_after"] == seqs[-1]


async def test_checkpoints_of_a_finished_run(http: httpx.AsyncClient) -> None:
    run_id = await _start(http, "echo", {"text": "x"})
    done = await _stopped(http, run_id)
    history = await http.post(f"/threads/{done['thread_id']}/history", json={"limit": 10})
    newest = history.json()[0]["checkpoint"]["checkpoint_id"]
    checkpoint = await http.get(f"/v1/runs/{run_id}/checkpoints/{newest}")
    assert checkpoint.status_code == 200, checkpoint.text
    assert checkpoint.json()["nodes_completed"] == ["a", "b", "c"]

    # a second run on the thread: its checkpoints only count its own nodes
    again = await _start(http, "echo", {"text": "y"}, thread_id=done["thread_id"])
    await _stopped(http, again)
    history = await http.post(f"/threads/{done['thread_id']}/history", json={"limit": 1})
    latest = history.json()[0]["checkpoint"]["checkpoint_id"]
    mine = await http.get(f"/v1/runs/{again}/checkpoints/{latest}")
    assert mine.json()["nodes_completed"] == ["a", "b", "c"]
    foreign = await http.get(f"/v1/runs/{run_id}/checkpoints/{latest}")
    assert foreign.status_code == 404
    assert "saved no checkpoint" in foreign.json()["detail"]


async def test_cancel(http: httpx.AsyncClient) -> None:
    run_id = await _start(http, "ticker", {"until": 100000})
    cancelled = await http.post(f"/v1/runs/{run_id}/cancel", json={"reason": "enough"})
    assert cancelled.status_code == 200, cancelled.text
    done = await _stopped(http, run_id)
    assert done["status"] == "cancelled", done
    assert done["cancel_reason"] == "enough"
    again = await http.post(f"/v1/runs/{run_id}/cancel")  # no body: the body is optional
    assert again.status_code == 409, again.text

    waiting = await _start(http, "ask", {"text": "stop"})
    assert (await _stopped(http, waiting))["status"] == "interrupted"
    stopped = await http.post(f"/v1/runs/{waiting}/cancel")
    assert stopped.status_code == 200, stopped.text
    assert stopped.json()["status"] == "cancelled"
    bad = await http.post(f"/v1/runs/{waiting}/cancel", json={"action": "explode"})
    assert bad.status_code == 422


async def test_bad_requests(http: httpx.AsyncClient, base: str) -> None:
    async with httpx.AsyncClient(base_url=base) as anonymous:
        nobody = await anonymous.post("/v1/runs", json={"agent": "echo"})
    assert nobody.status_code == 401
    missing = await http.post("/v1/runs", json={"input": {}})
    assert missing.status_code == 422
    assert missing.json()["detail"][0]["loc"] == ["body", "agent"]
    typo = await http.post("/v1/runs", json={"agent": "echo", "thread": "t"})
    assert typo.status_code == 422
    assert typo.json()["detail"][0]["loc"] == ["body", "thread"]
    unknown_agent = await http.post("/v1/runs", json={"agent": "nope"})
    assert unknown_agent.status_code == 404
    assert "nope" in unknown_agent.json()["detail"]
    unknown_run = await http.get("/v1/runs/no-such-run")
    assert unknown_run.status_code == 404
    bad_decision = await http.post("/v1/runs/no-such-run/resume", json={"decision": "maybe"})
    assert bad_decision.status_code == 422
    assert bad_decision.json()["detail"][0]["loc"] == ["body", "decision"]
    bad_after = await http.get("/v1/runs/x/events", params={"after": -1})
    assert bad_after.status_code == 422


def test_openapi_documents_v1(tmp_path: Path) -> None:
    # the test project's own http.app answers /openapi.json, so read the API's schema
    app = create_app(Runtime(f"sqlite:///{tmp_path / 'rt.db'}"), PROJECT)
    schema = app.fastapi.openapi()
    for path in (
        "/v1/runs",
        "/v1/runs/{run_id}",
        "/v1/runs/{run_id}/resume",
        "/v1/runs/{run_id}/cancel",
        "/v1/runs/{run_id}/events",
        "/v1/runs/{run_id}/checkpoints/{checkpoint_id}",
    ):
        assert path in schema["paths"], path
    assert {"RunCreateBody", "RunStatusOut", "ResumeBody", "CheckpointOut"} <= set(
        schema["components"]["schemas"]
    )


async def test_thread_stream_follows_a_run_resumed_in_place(
    http: httpx.AsyncClient, base: str
) -> None:
    thread = await http.post("/threads", json={})
    tid = thread.json()["thread_id"]
    client = get_client(url=base)
    parts: list[Any] = []
    stopped_once = asyncio.Event()

    async def listen() -> None:
        # from the thread's first run on, whenever this request reaches the server
        async for part in await client.threads.join_stream(tid, last_event_id="0-done"):
            parts.append(part)
            if part.event == "run_done":
                stopped_once.set()
            if sum(p.event == "run_done" for p in parts) == 2:
                return

    listener = asyncio.create_task(listen())
    run_id = await _start(http, "ask", {"text": "s"}, thread_id=tid)
    assert (await _stopped(http, run_id))["status"] == "interrupted"
    await stopped_once.wait()  # the stream has sent the run up to its interrupt
    resumed = await http.post(
        f"/v1/runs/{run_id}/resume", json={"decision": "resume", "payload": "ok"}
    )
    assert resumed.status_code == 200, resumed.text
    await listener
    done = [p.data for p in parts if p.event == "run_done"]
    assert done == [{"run_id": run_id, "status": "success"}] * 2
    assert [p.data["run_id"] for p in parts if p.event == "metadata"] == [run_id, run_id]
    values = [p.data for p in parts if p.event == "values"]
    assert values[-1]["answer"] == "ok"
    ids = [p.id for p in parts]
    assert len(set(ids)) == len(ids) - 1  # "<seq>-done" twice: the same run stopped twice
