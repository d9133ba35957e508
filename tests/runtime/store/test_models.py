"""``Run.as_langgraph``: tether's statuses as LangGraph's API shows them (design §2.12)."""

from __future__ import annotations

from tests.runtime.store.actions import claim_one, create
from tether.runtime.store import Outcome, RunStore


async def test_each_status_maps_to_langgraphs(store: RunStore) -> None:
    pending = await create(store, "t1", metadata={"m": 1})
    shown = pending.as_langgraph()
    assert shown == {
        "run_id": pending.run_id,
        "thread_id": "t1",
        "assistant_id": pending.assistant_id,
        "created_at": pending.created_at.isoformat(),
        "updated_at": pending.updated_at.isoformat(),
        "status": "pending",
        "metadata": {"m": 1},
        "multitask_strategy": "enqueue",
        "kwargs": {"on_completion": "keep", "temporary": False},
    }
    claim = await claim_one(store)
    assert claim.run.as_langgraph()["status"] == "running"  # type: ignore[index]
    paused = await store.finish(claim.hold, Outcome("interrupted", "interrupted"))
    assert paused.as_langgraph()["status"] == "success"  # type: ignore[index]
    stopped = await store.cancel_run(paused.run_id, reason="enough")
    assert stopped.as_langgraph()["status"] == "interrupted"  # type: ignore[index]
    assert stopped.as_langgraph()["cancel_reason"] == "enough"  # type: ignore[index]
    rolled_back = await store.cancel_run((await create(store, "t2")).run_id, action="rollback")
    assert rolled_back.as_langgraph() is None
