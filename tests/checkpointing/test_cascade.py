"""Deleting checkpoints deletes everything tether stored beside them, on every backend.

The check reads raw storage (every table, every key under the prefix, the
in-memory dicts) for the thread or run id after the delete, on the refund agent
with an approval decided, so model records, tool intents and results, the
approval and its decision and the step log all exist before the delete.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import BaseTool
from langgraph.graph import START, StateGraph

from tests.backends import Backend
from tests.raw_storage import raw_dump
from tests.steps.graphs import State
from tests.steps.scripted import CountingScriptedModel, reply
from tests.steps.test_budget import looping_agent
from tether import open_checkpointer_sync
from tether.approvals import Approvers, Stop, decide, list_approvals, requires_approval
from tether.graphs import FakePaymentsProvider
from tether.graphs._refund_scenario import refund_input
from tether.graphs.refund import build_refund_graph
from tether.steps import Budget, read_steps, read_steps_sync, recorded
from tether.steps._budget import _ledgers
from tether.store import store_for

DOOMED, KEPT = "doomed-thread-x1", "kept-thread-y2"


def _gate(issue_refund: BaseTool, provider: FakePaymentsProvider) -> BaseTool:
    return requires_approval(
        issue_refund,
        approvers=Approvers(users=["alice"]),
        why=lambda a: f"refund {a['amount_cents']} cents",
        expires_in=timedelta(hours=1),
        on_expiry=Stop(),
        observe=lambda a: {"order": asdict(provider.get_order(a["order_id"]))},
    )


def _config(thread: str, run: str) -> Any:
    return {"configurable": {"thread_id": thread}, "metadata": {"run_id": run}}


async def _refund(saver: Any, workdir: Path, thread: str, run: str, *, approve: bool) -> None:
    """The gated refund agent on ``thread``, paused at its approval, then approved if asked.

    Only the first part runs with ``run`` as its run id: the resume is another run.
    """
    graph = build_refund_graph(checkpointer=saver, workdir=workdir, gate_refund=_gate)
    out = await graph.ainvoke(refund_input(), _config(thread, run))
    (pending,) = out["__interrupt__"]
    if approve:
        (view,) = await list_approvals(saver, thread_id=thread)
        await decide(
            saver, thread, pending.value["approval_id"], "approve",
            graph=graph, by="alice", args_sha256=view.request.args_sha256,
        )  # fmt: skip
        assert not (await graph.aget_state(_config(thread, run))).next


async def _two_refund_threads(
    backend: Backend, saver: Any, tmp_path: Path, *, approve: bool = True
) -> None:
    await _refund(saver, tmp_path / "a", DOOMED, "run-doomed-r1", approve=approve)
    await _refund(saver, tmp_path / "b", KEPT, "run-kept-r2", approve=approve)
    before = await raw_dump(backend, saver)
    for needle in (DOOMED, KEPT, "run-doomed-r1"):
        assert any(needle in row for row in before), f"the check must see {needle}"


async def _kept_thread_is_intact(saver: Any) -> None:
    steps = await read_steps(saver, KEPT)
    assert {"model", "tool"} <= {s.kind for s in steps}
    assert [v.request.thread_id for v in await list_approvals(saver, status=None)] == [KEPT]


async def test_delete_thread_removes_records_steps_and_approvals(
    backend: Backend, tmp_path: Path
) -> None:
    async with backend.open() as saver:
        await _two_refund_threads(backend, saver, tmp_path)

        await saver.adelete_thread(DOOMED)

        leftovers = [row for row in await raw_dump(backend, saver) if DOOMED in row]
        assert leftovers == []
        assert await read_steps(saver, DOOMED) == []
        await _kept_thread_is_intact(saver)


async def test_delete_for_runs_removes_what_the_runs_recorded(
    backend: Backend, tmp_path: Path
) -> None:
    async with backend.open() as saver:
        await _two_refund_threads(backend, saver, tmp_path, approve=False)

        await saver.adelete_for_runs(["run-doomed-r1"])

        after = await raw_dump(backend, saver)
        assert [row for row in after if "run-doomed-r1" in row] == []
        assert await read_steps(saver, DOOMED) == []
        await _kept_thread_is_intact(saver)


async def test_prune_delete_removes_records(backend: Backend, tmp_path: Path) -> None:
    async with backend.open() as saver:
        await _two_refund_threads(backend, saver, tmp_path)

        await saver.aprune([DOOMED], strategy="delete")

        assert [row for row in await raw_dump(backend, saver) if DOOMED in row] == []
        await _kept_thread_is_intact(saver)


def test_sync_delete_thread_cascades(backend: Backend, tmp_path: Path) -> None:
    model = recorded(CountingScriptedModel(replies=[reply("hi")], calls_file=str(tmp_path / "c")))

    def agent(state: State) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    with open_checkpointer_sync(backend.url, **backend.options) as saver:
        builder = StateGraph(State)
        builder.add_node("agent", agent)
        builder.add_edge(START, "agent")
        graph = builder.compile(checkpointer=saver)
        graph.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": DOOMED}})
        assert [s.kind for s in read_steps_sync(saver, DOOMED)] == ["model"]

        saver.delete_thread(DOOMED)

        assert read_steps_sync(saver, DOOMED) == []
        assert store_for(saver).sync.list("model", thread_id=DOOMED) == []


async def test_delete_for_runs_refuses_a_bare_string(backend: Backend, tmp_path: Path) -> None:
    async with backend.open() as saver:
        await _refund(saver, tmp_path, "a", "a", approve=False)
        with pytest.raises(TypeError, match=r"not a single string \('abc'\); pass \['abc'\]"):
            await saver.adelete_for_runs("abc")
        assert await read_steps(saver, "a") != []
        assert (await saver.aget_tuple({"configurable": {"thread_id": "a"}})) is not None


async def test_deleting_a_thread_forgets_its_cached_budget(
    backend: Backend, tmp_path: Path
) -> None:
    async with backend.open() as saver:
        graph = looping_agent(tmp_path, saver, Budget(max_tokens=1000))
        config = {"configurable": {"thread_id": DOOMED}}
        await graph.ainvoke({"messages": [HumanMessage("go")]}, config)
        assert any(root == DOOMED for _, root in _ledgers), "the run caches its ledger"

        await saver.adelete_thread(DOOMED)

        assert not any(root == DOOMED for _, root in _ledgers)
