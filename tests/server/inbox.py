"""What the inbox tests share: a ``tether serve --no-auth`` of the refund project, and runs
of it that wait on a person."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from langgraph_sdk.client import LangGraphClient

from tests.server.conftest import ServeProcess

PROJECT = Path(__file__).parent / "inbox_project" / "langgraph.json"
DANA = {"x-tether-user": "dana"}  # a named approver of every refund


@contextlib.contextmanager
def inbox_server(url: str | None, workdir: Path) -> Iterator[ServeProcess]:
    """``tether serve --no-auth`` of the refund project, stopped by PID afterwards."""
    process = ServeProcess(url, workdir, ("--no-auth",), project=PROJECT)
    try:
        process.start()
        yield process
    finally:
        process.stop()


async def waiting_refund(
    client: LangGraphClient, amount: int, note: str = "", expires_in_ms: int | None = None
) -> tuple[str, str]:
    """Start a refund run and wait until it stops at its approval; ``(thread_id, run_id)``."""
    thread = await client.threads.create()
    payload: dict[str, Any] = {"order_id": "o-1", "amount_cents": amount, "note": note}
    if expires_in_ms is not None:
        payload["expires_in_ms"] = expires_in_ms
    run = await client.runs.create(thread["thread_id"], "refund", input=payload)
    await client.runs.join(thread["thread_id"], run["run_id"])
    thread = await client.threads.get(thread["thread_id"])
    assert thread["status"] == "interrupted", thread
    return thread["thread_id"], run["run_id"]


async def approval_of(http: httpx.AsyncClient, thread_id: str, show: str = "all") -> dict[str, Any]:
    """The approval request of the thread's run, as ``GET /approvals`` lists it."""
    listed = await http.get("/approvals", params={"show": show}, headers=DANA)
    assert listed.status_code == 200, listed.text
    mine = [a for a in listed.json()["approvals"] if a["thread_id"] == thread_id]
    assert len(mine) == 1, listed.json()
    found: dict[str, Any] = mine[0]
    return found


async def finished(client: LangGraphClient, thread_id: str, run_id: str) -> dict[str, Any]:
    """The run's final values once it has run to its end after the decision."""
    await client.runs.join(thread_id, run_id)
    run = await client.runs.get(thread_id, run_id)
    assert run["status"] == "success", run
    thread = await client.threads.get(thread_id)
    assert thread["status"] == "idle", thread
    values: dict[str, Any] = thread["values"]
    return values
