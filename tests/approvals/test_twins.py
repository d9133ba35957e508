"""The async gate in an async node, and the sync twins over a sync checkpointer."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from langchain_core.runnables import RunnableConfig

from tests.approvals import graphs
from tests.approvals.conftest import PauseFn
from tether import open_checkpointer_sync
from tether.approvals import (
    AlreadyDecidedError,
    decide,
    decide_sync,
    expire_due_sync,
    get_approval_sync,
    list_approvals_sync,
)

CONFIG: RunnableConfig = {"configurable": {"thread_id": "t1"}}


async def test_async_gate_with_async_reader_voids_and_approves(pause: PauseFn) -> None:
    paused = await pause(graphs.async_graph, amount=70)
    graphs.VERSIONS["balance"] = 5
    kw = {"graph": paused.graph, "by": "alice", "args_sha256": paused.args_sha256}
    result = await decide(paused.saver, "t1", paused.approval_id, "approve", **kw)
    (fresh,) = result.pending
    assert fresh["depends_on"] == {"balance": 5}
    result = await decide(paused.saver, "t1", fresh["approval_id"], "approve", **kw)
    assert result.finished
    assert await paused.log() == ["paid 70 to bob (approve)"]


def test_sync_twins(tmp_path: Path) -> None:
    with open_checkpointer_sync(f"sqlite:///{tmp_path / 'sync.db'}") as saver:
        graph = graphs.gate_graph(saver)
        graph.invoke({"amount": 9, "log": []}, CONFIG)
        (view,) = list_approvals_sync(saver, thread_id="t1")
        assert get_approval_sync(saver, view.request.approval_id).status == "pending"
        kw = {"graph": graph, "by": "alice", "args_sha256": view.request.args_sha256}
        result = decide_sync(saver, "t1", view.request.approval_id, "approve", **kw)
        assert result.finished
        with pytest.raises(AlreadyDecidedError):
            decide_sync(saver, "t1", view.request.approval_id, "approve", **kw)
        assert graph.get_state(CONFIG).values["log"] == ["paid 9 to bob (approve)", "after"]

        graph.invoke({"amount": 11, "log": []}, {"configurable": {"thread_id": "t2"}})
        (waiting,) = list_approvals_sync(saver)
        later = graphs.EXPIRES_IN * 2
        now = datetime.fromisoformat(waiting.request.expires_at) + later
        assert [a.outcome for a in expire_due_sync(saver, graph, now=now)] == ["stopped"]
        assert [v.status for v in list_approvals_sync(saver, status=None)] == [
            "approved",
            "expired",
        ]
