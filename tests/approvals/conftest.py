"""Helpers for the approval tests: a paused run, and the times around its expiry."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver

from tests.approvals import graphs
from tests.backends import Backend
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
        """``decide`` on this run; the shown args hash unless ``args_sha256`` is given."""
        kw.setdefault("args_sha256", self.args_sha256)
        approval_id = kw.pop("approval_id", self.approval_id)
        return await decide(
            self.saver, self.thread_id, approval_id, decision, graph=self.graph, by=by, **kw
        )

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


@pytest.fixture
async def pause(backend: Backend) -> AsyncIterator[PauseFn]:
    """``await pause(factory, amount=..)``: run ``factory``'s graph until it waits on a person."""
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
