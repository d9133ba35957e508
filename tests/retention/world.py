"""Threads of every status and age, stored as tether stores them, for the retention tests.

Each thread gets a run driven to its status through the run store's worker
plane (claim, then finish, as a worker does), three checkpoints, a model step,
a durable tool's record and, if asked, an approval request. Every value it
stores carries :func:`marker`, so a test can search raw storage for what is
left of a thread. Only the ages are written behind the store's back: the
thread's and its run's times are moved into the past with one ``UPDATE``.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint

from tests.backends import Backend
from tests.raw_storage import raw_dump
from tests.runtime.store.raw import every_row, execute
from tether.approvals import APPROVAL_KIND, ApprovalRequest, Approvers, Stop
from tether.runtime import Runtime
from tether.runtime.models import WaitingOn
from tether.runtime.store.base import Outcome, WorkerInfo
from tether.steps import append_step
from tether.store import store_for

GRAPH = "g"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
WORKER = "seed:1:abc"


def marker(thread_id: str) -> str:
    """The text every stored value of ``thread_id`` carries."""
    return f"SECRET<{thread_id}>"


@dataclass
class World:
    """A runtime on a run store, with its checkpoints on the test's backend."""

    runtime: Runtime
    backend: Backend
    store_url: str

    async def saver(self) -> BaseCheckpointSaver[Any]:
        return await self.runtime.checkpointer()

    async def raw(self) -> str:
        """Every row or key of the checkpoint backend and of the run store, as text."""
        text = "\n".join(await raw_dump(self.backend, await self.saver()))
        if self.store_url != self.backend.url:
            text += every_row(self.store_url)
        return text

    async def checkpoints(self, thread_id: str) -> int:
        saver = await self.saver()
        config: Any = {"configurable": {"thread_id": thread_id}}
        return len([c async for c in saver.alist(config)])


def store_url_for(backend: Backend, tmp_path: Path) -> str:
    """The run store beside the backend: the same database for SQLite and PostgreSQL."""
    if backend.name in {"sqlite", "postgres"}:
        return backend.url
    return f"sqlite:///{tmp_path / 'runstore.db'}"


@asynccontextmanager
async def open_world(backend: Backend, tmp_path: Path) -> AsyncIterator[World]:
    url = store_url_for(backend, tmp_path)
    async with Runtime(url, checkpoints_url=backend.url, graphs=[GRAPH], **backend.options) as rt:
        await rt.store.register_worker(WorkerInfo(WORKER, socket.gethostname(), 1, [GRAPH], 10))
        yield World(rt, backend, url)


def _literal(url: str, at: datetime) -> str:
    return repr(at.timestamp()) if url.startswith("sqlite") else f"'{at.isoformat()}'::timestamptz"


def age(world: World, thread_id: str, last_active: datetime) -> None:
    """Move the thread's and its runs' times to ``last_active``."""
    at = _literal(world.store_url, last_active)
    execute(
        world.store_url,
        f"UPDATE tether_runs SET created_at = {at}, updated_at = {at}, started_at = {at}, "
        f"ended_at = CASE WHEN ended_at IS NULL THEN NULL ELSE {at} END "
        f"WHERE thread_id = '{thread_id}'",
    )
    execute(
        world.store_url,
        f"UPDATE tether_threads SET created_at = {at}, updated_at = {at}, "
        f"state_updated_at = {at} WHERE thread_id = '{thread_id}'",
    )


async def seed(
    world: World,
    thread_id: str,
    status: str,
    *,
    days: float,
    tenant: str = "",
    approval: str | None = None,
    owner: str | None = None,
) -> None:
    """One thread whose newest run ended ``status`` ``days`` before :data:`NOW`.

    ``status`` ``"pending"`` leaves its run waiting for a worker. ``approval``
    ``"live"`` stores a request expiring after :data:`NOW`, ``"expired"`` one
    that expired before it.
    """
    rt = world.runtime.scoped(tenant)
    metadata = {"owner": owner} if owner else None
    await rt.create_thread(thread_id=thread_id, metadata=metadata)
    await rt.create(GRAPH, thread_id=thread_id, input={"note": marker(thread_id)})
    saver = await world.saver()
    await _checkpoints(saver, thread_id)
    await _steps(saver, thread_id)
    approval_id = f"ap-{thread_id}"
    if approval is not None:
        expires = NOW + (timedelta(days=1) if approval == "live" else -timedelta(days=1))
        await _approval(saver, thread_id, approval_id, expires)
    if status == "cancelled":
        await rt.cancel((await rt.list(thread_id=thread_id))[0].run_id)
    elif status != "pending":
        await _finish(world, status, approval_id if approval else None)
    age(world, thread_id, NOW - timedelta(days=days))


async def _finish(world: World, status: str, approval_id: str | None) -> None:
    store = world.runtime.store
    (claim,) = await store.claim(WORKER, graphs=[GRAPH], limit=1, lease=30)
    waiting = [WaitingOn("int-1", "", approval_id)] if status == "interrupted" else []
    thread_status = {"interrupted": "interrupted", "error": "error"}.get(status, "idle")
    outcome = Outcome(
        status,  # type: ignore[arg-type]
        thread_status,  # type: ignore[arg-type]
        error={"error": "E", "message": "boom"} if status == "error" else None,
        waiting_on=waiting,
    )
    await store.finish(claim.hold, outcome)


async def _checkpoints(saver: BaseCheckpointSaver[Any], thread_id: str, n: int = 3) -> None:
    config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    for i in range(1, n + 1):
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"note": f"{marker(thread_id)} #{i}"}
        checkpoint["channel_versions"] = {"note": i}
        config = await saver.aput(config, checkpoint, {"step": i}, {"note": i})


async def _steps(saver: BaseCheckpointSaver[Any], thread_id: str) -> None:
    usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    await append_step(
        saver,
        thread_id,
        "model",
        name="scripted",
        output=marker(thread_id),
        usage=usage,
        cost_usd=0.01,
    )
    await store_for(saver).insert(
        "tool",
        f"tool-{thread_id}",
        {
            "state": "done",
            "tool": "refund",
            "args_hash": "a" * 64,
            "idempotency_key": f"idem-{thread_id}",
            "output": marker(thread_id),
        },
        thread_id=thread_id,
    )


async def _approval(
    saver: BaseCheckpointSaver[Any], thread_id: str, approval_id: str, expires: datetime
) -> None:
    request = ApprovalRequest(
        approval_id=approval_id,
        thread_id=thread_id,
        action="refund",
        args={"note": marker(thread_id)},
        args_sha256="b" * 64,
        why="a refund",
        affects="the customer's card",
        if_denied="no refund",
        observations={"note": marker(thread_id)},
        observations_sha256="c" * 64,
        approvers=Approvers(users=["ann"]),
        requested_at=(expires - timedelta(days=2)).isoformat(timespec="seconds"),
        expires_at=expires.isoformat(timespec="seconds"),
        on_expiry=Stop(),
        depends_on={},
    )
    await store_for(saver).insert(
        APPROVAL_KIND, approval_id, request.to_dict(), thread_id=thread_id
    )
