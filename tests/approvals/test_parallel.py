"""Several approvals pending in one step are each decided by id, in any order."""

from __future__ import annotations

from langchain_core.runnables import RunnableConfig

from tests.approvals import graphs
from tests.backends import Backend
from tether.approvals import decide, list_approvals


async def test_parallel_approvals_are_decided_by_id(backend: Backend) -> None:
    async with backend.open() as saver:
        graph = graphs.parallel_graph(saver)
        config: RunnableConfig = {"configurable": {"thread_id": "t1"}}
        await graph.ainvoke({"log": []}, config)
        state = await graph.aget_state(config)
        assert len(state.interrupts) == 2
        assert len({i.id for i in state.interrupts}) == 2
        views = {v.request.args["amount"]: v.request for v in await list_approvals(saver)}
        assert sorted(views) == [10, 20]
        assert views[10].approval_id != views[20].approval_id

        # The second one first: only it is settled; the other still waits.
        second = views[20]
        result = await decide(
            saver, "t1", second.approval_id, "approve",
            graph=graph, by="alice", args_sha256=second.args_sha256,
        )  # fmt: skip
        assert [p["approval_id"] for p in result.pending] == [views[10].approval_id]
        assert not result.finished

        first = views[10]
        result = await decide(
            saver, "t1", first.approval_id, "reject",
            graph=graph, by="alice", args_sha256=first.args_sha256, reason="too small to bother",
        )  # fmt: skip
        assert result.finished
        log = (await graph.aget_state(config)).values["log"]
        assert sorted(log)[0] == "paid 20 to bob (approve)"
        assert sorted(log)[1].startswith("reject:-: alice rejected pay. Reason: too small")
        assert [v.status for v in await list_approvals(saver, status=None)] == [
            "rejected" if v.request.args["amount"] == 10 else "approved"
            for v in await list_approvals(saver, status=None)
        ]
