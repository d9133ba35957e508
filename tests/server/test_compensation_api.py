"""Compensation requests decided over HTTP: the inbox's API and ``/v1/runs/{id}/resume``.

The server app runs in this process with one worker of its own, on the runtime
tests' project (its ``refund_saga``: refund, email, a courier booking that
fails); the run's policy ``ask`` sends the refund's undo to a person. The run
has ended (``error``), so no run waits on the request: the inbox lists it as
pending and deciding it enqueues a continuation run that the worker compensates.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.backends import fresh_postgres_database
from tests.runtime.workers import PROJECT
from tether.compensation import RUN_POLICY_KEY
from tether.graphs._refund_scenario import PAYMENTS_FILE, REFUND_REQUEST
from tether.runtime import Runtime
from tether.runtime.compensations import continuation_id, rollback_id
from tether.server import create_app

LEAD = {"x-tether-user": "dana", "x-tether-roles": "support-lead"}


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'runtime.db'}"
        return
    with fresh_postgres_database(request.getfixturevalue("servers")["postgres"]) as url:
        yield url


@pytest.fixture
async def http(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[httpx.AsyncClient]:
    monkeypatch.setenv("TETHER_TEST_WORKDIR", str(tmp_path))
    app = create_app(
        Runtime(store_url),
        PROJECT,
        workers=1,
        worker_options={"lease": 2.0, "scheduler": False},
        no_auth=True,
    )
    async with app.fastapi.router.lifespan_context(app.fastapi):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://tether", headers=LEAD, timeout=30
        ) as session:
            yield session


async def _ended(http: httpx.AsyncClient, run_id: str) -> dict[str, Any]:
    for _ in range(1200):
        run = await http.get(f"/v1/runs/{run_id}")
        assert run.status_code == 200, run.text
        if run.json()["status"] not in ("pending", "running"):
            found: dict[str, Any] = run.json()
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} never ended")


async def _failed_refund(http: httpx.AsyncClient) -> tuple[str, dict[str, Any]]:
    """A refund saga run failed, its refund's undo waiting on a person: run id, request."""
    thread = (await http.post("/threads", json={})).json()["thread_id"]
    answer = await http.post(
        f"/threads/{thread}/runs",
        json={
            "assistant_id": "refund_saga",
            "input": {"messages": [{"role": "user", "content": REFUND_REQUEST}]},
            "config": {"configurable": {RUN_POLICY_KEY: "ask"}},
        },
    )
    assert answer.status_code == 200, answer.text
    run_id: str = answer.json()["run_id"]
    assert (await _ended(http, run_id))["status"] == "error"
    listed = await http.get("/approvals", params={"show": "all"})
    assert listed.status_code == 200, listed.text
    (request,) = [a for a in listed.json()["approvals"] if a["thread_id"] == thread]
    return run_id, request


def _reversals(workdir: Path) -> int:
    with sqlite3.connect(workdir / "refund_saga" / PAYMENTS_FILE) as db:
        (n,) = db.execute("SELECT COUNT(*) FROM attempts WHERE kind = 'reversal'").fetchone()
    return int(n)


async def test_the_inbox_lists_and_decides_a_compensation_request(
    http: httpx.AsyncClient, tmp_path: Path
) -> None:
    _, request = await _failed_refund(http)
    assert request["action"] == "compensate:issue_refund"
    assert request["state"] == "pending"
    assert request["may_decide"] is True
    body = {"decision": "approve", "args_sha256": request["args_sha256"]}
    eve = {"x-tether-user": "eve", "x-tether-roles": "intern"}
    refused = await http.post(f"/approvals/{request['approval_id']}/decide", json=body, headers=eve)
    assert refused.status_code == 403, refused.text
    decided = await http.post(f"/approvals/{request['approval_id']}/decide", json=body)
    assert decided.status_code == 200, decided.text
    continuation = await _ended(http, continuation_id(request["approval_id"]))
    assert continuation["status"] == "success"
    assert _reversals(tmp_path) == 1
    again = await http.post(f"/approvals/{request['approval_id']}/decide", json=body)
    assert again.status_code == 409, again.text
    assert _reversals(tmp_path) == 1


async def test_v1_resume_decides_the_compensation_of_an_ended_run(
    http: httpx.AsyncClient, tmp_path: Path
) -> None:
    run_id, request = await _failed_refund(http)
    answer = await http.post(
        f"/v1/runs/{run_id}/resume",
        json={"decision": "reject", "payload": {"reason": "refunded by hand"}},
    )
    assert answer.status_code == 409, answer.text  # the arguments shown must be named
    assert "sha256" in answer.json()["detail"]
    payload = {"reason": "refunded by hand", "args_sha256": request["args_sha256"]}
    answer = await http.post(
        f"/v1/runs/{run_id}/resume", json={"decision": "reject", "payload": payload}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["approval_id"] == request["approval_id"]
    await _ended(http, continuation_id(request["approval_id"]))
    assert _reversals(tmp_path) == 0
    ended = await http.get(f"/v1/runs/{run_id}")
    assert ended.json()["status"] == "error"
    # Nothing waits any more: resuming again is refused.
    again = await http.post(
        f"/v1/runs/{run_id}/resume", json={"decision": "approve", "payload": {}}
    )
    assert again.status_code == 409, again.text


async def test_a_paused_run_cancelled_with_rollback_is_compensated_and_says_so(
    http: httpx.AsyncClient, tmp_path: Path
) -> None:
    """Through LangGraph's API: the run charged, emailed and paused; a rollback cancel undoes
    both before its checkpoints go, and ``/v1/runs/{id}`` says what was undone."""
    thread = (await http.post("/threads", json={})).json()["thread_id"]
    answer = await http.post(
        f"/threads/{thread}/runs", json={"assistant_id": "saga_asks", "input": {"messages": []}}
    )
    assert answer.status_code == 200, answer.text
    run_id = answer.json()["run_id"]
    assert (await _ended(http, run_id))["status"] == "interrupted"
    cancel = await http.post(
        f"/threads/{thread}/runs/{run_id}/cancel", params={"action": "rollback"}
    )
    assert cancel.status_code in (200, 202, 204), cancel.text
    rolled = await _ended(http, rollback_id(run_id))
    assert rolled["status"] == "success", rolled
    with sqlite3.connect(tmp_path / "world.db") as db:
        kinds = [k for (k,) in db.execute("SELECT kind FROM effects ORDER BY rowid")]
    assert kinds == ["charge", "email", "undo-email ada@example.com", "undo-charge 4200"]
    ended = (await http.get(f"/v1/runs/{run_id}")).json()
    assert ended["status"] == "cancelled"
    assert "undone: email, charge" in ended["ended_reason"]
    state = await http.get(f"/threads/{thread}/state")
    assert state.status_code == 200, state.text
    assert not state.json()["values"]  # rolled back: the run's checkpoints are gone
