"""A worker refuses a checkpoint of another tenant, with an error and an event."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.graph import END, START, StateGraph

from tests.runtime.project.agents import Trace
from tests.runtime.workers import Workers
from tether import open_checkpointer
from tether.runtime import InvalidRunRequestError, Run, Runtime


async def _checkpoints(url: str, thread_id: str) -> list[str]:
    async with open_checkpointer(url) as saver:
        return [
            c.checkpoint["id"]
            async for c in saver.alist({"configurable": {"thread_id": thread_id}})
        ]


async def test_a_worker_refuses_to_load_another_tenant_s_checkpoint(
    runtime: Runtime, workers: Workers, runtime_url: str
) -> None:
    # Tenant "acme" stored a checkpoint for thread "shared" on the same database.
    graph = StateGraph(Trace)
    graph.add_node("secret", lambda state: {"answer": "acme's data", "trace": ["secret"]})
    graph.add_edge(START, "secret")
    graph.add_edge("secret", END)
    async with open_checkpointer(runtime_url) as saver:
        await graph.compile(checkpointer=saver).ainvoke(
            {"trace": []}, {"configurable": {"thread_id": "shared", "tenant_id": "acme"}}
        )
    stored = await _checkpoints(runtime_url, "shared")

    workers.start(1)
    run = await runtime.scoped("globex").create("three_node", thread_id="shared")
    done = await runtime.scoped("globex").wait(run.run_id, timeout=60)

    assert done.status == "error"
    assert done.error is not None
    assert done.error["error"] == "TenantMismatchError"
    assert "another tenant" in done.error["message"]
    events = await runtime.scoped("globex").events(run.run_id)
    mismatch = [e for e in events if e.kind == "tenant.mismatch"]
    assert [e.data["checkpoint_id"] for e in mismatch] == [stored[0]]
    # Nothing was read into the run's output, and nothing was written to the thread.
    assert all("acme's data" not in str(e.data) for e in events)
    assert await _checkpoints(runtime_url, "shared") == stored


def test_a_malformed_tenant_is_refused_when_the_runtime_is_made() -> None:
    for tenant, message in [("a\x00", "contains a NUL"), ("x" * 256, "the limit is 255")]:
        with pytest.raises(InvalidRunRequestError, match=message):
            Runtime("sqlite:///unused.db", tenant=tenant)
    assert Runtime("sqlite:///unused.db").tenant == ""


START_INPUT = {"trace": []}


async def test_a_run_cannot_share_the_budget_of_another_tenant_s_thread(
    runtime: Runtime, workers: Workers
) -> None:
    """``tether_root_thread_id`` names the thread whose budget a run charges: one of another
    tenant's threads would read and charge that tenant's budget."""
    acme, globex = runtime.scoped("acme"), runtime.scoped("globex")
    workers.start(1)

    async def finished(tenant: Any, thread_id: str, root: str | None = None) -> Run:
        config = {"configurable": {"tether_root_thread_id": root}} if root else None
        run = await tenant.create(
            "three_node", thread_id=thread_id, input=START_INPUT, config=config
        )
        return await tenant.wait(run.run_id, timeout=60)

    assert (await finished(acme, "acme-thread")).status == "success"
    done = await finished(globex, "globex-thread", root="acme-thread")
    assert done.status == "error"
    assert done.error is not None
    assert done.error["error"] == "InvalidRunRequestError"
    assert "'acme-thread' names no thread of this run's tenant" in done.error["message"]

    assert (await finished(globex, "globex-fork")).status == "success"
    other = await finished(globex, "globex-other", root="globex-fork")
    assert other.status == "success", other.error
