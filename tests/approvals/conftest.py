"""Helpers for the approval tests: a paused run, and the times around its expiry."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver

from tests.approvals import graphs
from tests.backends import Backend, fresh_backend
from tether.approvals import ApprovalView, DecisionResult, decide, list_approvals
from tether.store import store_for


@dataclass
class Paused:
    """A run paused at one approval request."""

    saver: BaseCheckpointSaver[Any]
    graph: Any
    thread_id: str
    view: ApprovalView

    @property
    def config(self) -> RunnableConfig:
        return {"configurable": {"thread_id": self.thread_id}}

    @property
    def approval_id(self) -> str:
        return self.view.request.approval_id

    @property
    def args_sha256(self) -> str:
        return self.view.request.args_sha256

    def after_expiry(self, extra: timedelta = timedelta(seconds=1)) -> datetime:
        return datetime.fromisoformat(self.view.request.expires_at) + extra

    async def decide(
        self, decision: str = "approve", *, by: str = "alice", **kw: Any
    ) -> DecisionResult:
        """``decide`` on this run; the shown args hash unless ``args_sha256`` is given.

        The run's graph resumes it, unless a ``resumer`` is given.
        """
        kw.setdefault("args_sha256", self.args_sha256)
        if "resumer" not in kw:
            kw.setdefault("graph", self.graph)
        approval_id = kw.pop("approval_id", self.approval_id)
        return await decide(self.saver, self.thread_id, approval_id, decision, by=by, **kw)

    async def log(self) -> list[str]:
        state = await self.graph.aget_state(self.config)
        return list(state.values.get("log", []))

    async def events(self) -> list[str]:
        steps = await store_for(self.saver).steps(self.thread_id)
        return [s["output"]["event"] for s in steps if s["kind"] == "approval"]


@pytest.fixture(autouse=True)
def _fresh_versions() -> Iterator[None]:
    graphs.VERSIONS["balance"] = 1
    yield
    graphs.VERSIONS["balance"] = 1


PauseFn = Callable[..., Any]


@asynccontextmanager
async def _pausing(backend: Backend) -> AsyncIterator[PauseFn]:
    async with backend.open() as saver:

        async def run(
            factory: Callable[[BaseCheckpointSaver[Any]], Any] = graphs.gate_graph,
            amount: int = 500,
            thread_id: str = "t1",
        ) -> Paused:
            graph = factory(saver)
            config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
            await graph.ainvoke({"amount": amount, "log": []}, config)
            views = await list_approvals(saver, thread_id=thread_id)
            assert len(views) == 1, views
            return Paused(saver, graph, thread_id, views[0])

        yield run


@pytest.fixture
async def pause(backend: Backend) -> AsyncIterator[PauseFn]:
    """``await pause(factory, amount=..)``: run ``factory``'s graph until it waits on a person."""
    async with _pausing(backend) as run:
        yield run


@pytest.fixture(params=["sqlite", "postgres"])
def sql_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """A private SQLite or PostgreSQL database (the runtime's two backends)."""
    name: str = request.param
    urls = request.getfixturevalue("servers") if name == "postgres" else {}
    with fresh_backend(name, urls, tmp_path) as b:
        yield b


@pytest.fixture
async def sql_pause(sql_backend: Backend) -> AsyncIterator[PauseFn]:
    """``pause`` on SQLite and PostgreSQL only."""
    async with _pausing(sql_backend) as run:
        yield run
