"""Resumers: a decision is checked and stored here, and the run continues wherever it is resumed.

On real SQLite and PostgreSQL, with :class:`QueueingResumer`, which queues the
decision as a runtime does and leaves the graph alone until its worker runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from tests.approvals import graphs
from tests.approvals.conftest import Paused, PauseFn
from tests.approvals.resumers import QueueingResumer, SyncQueueingResumer
from tests.backends import Backend
from tether import open_checkpointer_sync
from tether.approvals import (
    AlreadyDecidedError,
    ApprovalConfigError,
    ApprovalNotPendingError,
    ApprovalRequest,
    Decider,
    DecisionResult,
    GraphResumer,
    Resumer,
    SyncResumer,
    build_decision,
    decide,
    decide_as,
    decide_as_sync,
    decide_sync,
    expire_due,
    expire_due_sync,
    get_approval,
    get_approval_sync,
    list_approvals_sync,
    settle,
    settle_sync,
)


async def _still_paused(paused: Paused) -> None:
    state = await paused.graph.aget_state(paused.config)
    assert [i.value["approval_id"] for i in state.interrupts] == [paused.approval_id]
    assert await paused.log() == []


async def test_decide_stores_the_decision_and_hands_the_run_to_the_resumer(
    sql_pause: PauseFn,
) -> None:
    paused = await sql_pause()
    resumer = QueueingResumer(paused.graph)
    result = await decide(
        paused.saver,
        "t1",
        paused.approval_id,
        "approve",
        resumer=resumer,
        by="alice",
        args_sha256=paused.args_sha256,
    )
    assert resumer.calls == [("is_pending", paused.approval_id), ("resume", paused.approval_id)]
    assert (result.approval_id, result.decision["decision"], result.finished) == (
        paused.approval_id,
        "approve",
        False,
    )
    (queued_request, queued_doc) = resumer.queue[0]
    assert queued_request.approval_id == paused.approval_id
    view = await get_approval(paused.saver, paused.approval_id)
    assert view.status == "approved"
    assert view.decision == queued_doc == result.decision
    assert await paused.events() == ["requested", "decided"]
    await _still_paused(paused)  # the deciding call did not run the graph

    await resumer.work()
    assert await paused.log() == ["paid 500 to bob (approve)", "after"]


async def test_a_run_the_resumer_says_is_not_waiting_stores_nothing(sql_pause: PauseFn) -> None:
    paused = await sql_pause()
    # The resumer of some other deployment: its graph's checkpointer never saw this thread.
    resumer = QueueingResumer(graphs.gate_graph(InMemorySaver()))
    with pytest.raises(ApprovalNotPendingError, match="not paused at approval"):
        await paused.decide("approve", resumer=resumer)
    assert resumer.calls == [("is_pending", paused.approval_id)]
    assert resumer.queue == []
    assert (await get_approval(paused.saver, paused.approval_id)).status == "pending"
    assert await paused.events() == ["requested"]
    await _still_paused(paused)


async def test_concurrent_decisions_hand_over_exactly_once(sql_pause: PauseFn) -> None:
    paused = await sql_pause()
    resumer = QueueingResumer(paused.graph)

    async def submit(by: str, roles: list[str]) -> object:
        return await paused.decide("approve", by=by, roles=roles, resumer=resumer)

    outcomes = await asyncio.gather(
        submit("alice", []), submit("erin", ["finance"]), return_exceptions=True
    )
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(errors) == 1, outcomes
    assert isinstance(errors[0], AlreadyDecidedError), outcomes
    assert [c for c in resumer.calls if c[0] == "resume"] == [("resume", paused.approval_id)]
    assert len(resumer.queue) == 1
    assert (await paused.events()).count("decided") == 1


async def test_expire_due_hands_expired_runs_to_the_resumer(sql_pause: PauseFn) -> None:
    stopping = await sql_pause()
    escalating = await sql_pause(graphs.escalating_graph, thread_id="t2")
    resumer = QueueingResumer(stopping.graph)
    actions = await expire_due(stopping.saver, now=stopping.after_expiry(), resumer=resumer)
    assert sorted((a.thread_id, a.outcome) for a in actions) == [
        ("t1", "stopped"),
        ("t2", "escalated"),
    ]
    # Only the stop settles (and resumes); the escalation keeps its run waiting.
    assert [c for c in resumer.calls if c[0] == "resume"] == [("resume", stopping.approval_id)]
    assert resumer.queue[0][1]["decision"] == "expire"
    await _still_paused(stopping)
    await resumer.work()
    assert (await stopping.log())[0].startswith("expire:stop:")
    assert (await get_approval(escalating.saver, escalating.approval_id)).status == "pending"


async def test_settle_stores_a_built_decision_once(sql_pause: PauseFn) -> None:
    paused = await sql_pause()
    resumer = QueueingResumer(paused.graph)
    request = paused.view.request
    doc = build_decision(
        request, "reject", by="alice", args_sha256=paused.args_sha256, reason="not now"
    )
    result = await settle(paused.saver, request, doc, resumer=resumer)
    assert result.decision == doc
    with pytest.raises(AlreadyDecidedError, match="a moment ago"):
        await settle(paused.saver, request, doc, resumer=resumer)
    assert len(resumer.queue) == 1
    await resumer.work()
    assert (await paused.log())[0].startswith("reject:-: alice rejected pay. Reason: not now.")


async def test_settle_with_the_graph_resumes_here(sql_pause: PauseFn) -> None:
    paused = await sql_pause()
    request = paused.view.request
    doc = build_decision(request, "approve", by="alice", args_sha256=paused.args_sha256)
    result = await settle(paused.saver, request, doc, graph=paused.graph)
    assert result.finished
    assert await paused.log() == ["paid 500 to bob (approve)", "after"]


async def test_decide_as_takes_a_resumer(sql_pause: PauseFn) -> None:
    paused = await sql_pause()
    resumer = QueueingResumer(paused.graph)
    body = {"decision": "approve", "args_sha256": paused.args_sha256}
    await decide_as(paused.saver, Decider("alice"), paused.approval_id, body, resumer=resumer)
    assert [c[0] for c in resumer.calls] == ["is_pending", "resume"]
    assert (await get_approval(paused.saver, paused.approval_id)).decision["decider_source"] == (
        "caller"
    )


async def test_a_graph_resumer_is_what_graph_means(sql_pause: PauseFn) -> None:
    paused = await sql_pause()
    resumer = GraphResumer(paused.graph)
    assert isinstance(resumer, Resumer)
    assert await resumer.is_pending(paused.view.request)
    result = await paused.decide("approve", resumer=resumer)
    assert result.finished
    assert await paused.log() == ["paid 500 to bob (approve)", "after"]
    assert not await resumer.is_pending(paused.view.request)


def test_the_recording_resumers_are_resumers() -> None:
    assert isinstance(QueueingResumer(None), Resumer)
    assert isinstance(SyncQueueingResumer(None), SyncResumer)


def test_a_graph_resumer_needs_a_compiled_graph_with_a_checkpointer() -> None:
    with pytest.raises(ApprovalConfigError, match="compiled graph that runs the thread"):
        GraphResumer(object())
    with pytest.raises(ApprovalConfigError, match="compiled graph that runs the thread"):
        GraphResumer(graphs.gate_graph(None))  # type: ignore[arg-type]


# -- exactly one of graph= and resumer= ----------------------------------------------------
def _calls(paused: Paused) -> dict[str, Callable[..., Any]]:
    """Each entry point that takes graph=/resumer=, with its other arguments filled in."""
    saver, request = paused.saver, paused.view.request
    doc = build_decision(request, "approve", by="alice", args_sha256=paused.args_sha256)
    person = Decider("alice")
    body = {"decision": "approve", "args_sha256": paused.args_sha256}
    aid = paused.approval_id
    return {
        "decide": lambda **kw: decide(saver, "t1", aid, "approve", by="alice", **kw),
        "decide_sync": lambda **kw: decide_sync(saver, "t1", aid, "approve", by="alice", **kw),
        "decide_as": lambda **kw: decide_as(saver, person, aid, body, **kw),
        "decide_as_sync": lambda **kw: decide_as_sync(saver, person, aid, body, **kw),
        "expire_due": lambda **kw: expire_due(saver, now=paused.after_expiry(), **kw),
        "expire_due_sync": lambda **kw: expire_due_sync(saver, now=paused.after_expiry(), **kw),
        "settle": lambda **kw: settle(saver, request, doc, **kw),
        "settle_sync": lambda **kw: settle_sync(saver, request, doc, **kw),
    }


async def _called(entry: Callable[..., Any], kw: dict[str, Any]) -> Any:
    """Call an entry point, awaiting it if it is async."""
    outcome = entry(**kw)
    return (await outcome) if asyncio.iscoroutine(outcome) else outcome


ENTRY_POINTS = [
    "decide",
    "decide_sync",
    "decide_as",
    "decide_as_sync",
    "expire_due",
    "expire_due_sync",
    "settle",
    "settle_sync",
]


@pytest.mark.parametrize("entry", ENTRY_POINTS)
@pytest.mark.parametrize(
    ("given", "message"),
    [("both", "pass graph= or resumer=, not both"), ("neither", "say who resumes the run")],
)
async def test_exactly_one_of_graph_and_resumer(
    sql_pause: PauseFn, entry: str, given: str, message: str
) -> None:
    paused = await sql_pause()
    kw: dict[str, Any] = {}
    if given == "both":
        kw = {"graph": paused.graph, "resumer": GraphResumer(paused.graph)}
    with pytest.raises(ApprovalConfigError, match=message):
        await _called(_calls(paused)[entry], kw)
    await _still_paused(paused)
    assert (await get_approval(paused.saver, paused.approval_id)).status == "pending"


async def test_a_resumer_without_the_methods_is_refused(sql_pause: PauseFn) -> None:
    paused = await sql_pause()
    with pytest.raises(ApprovalConfigError, match="is_pending\\(request\\) and resume"):
        await paused.decide("approve", resumer=object())


async def test_a_resume_that_returns_something_else_is_named(sql_pause: PauseFn) -> None:
    class Careless(QueueingResumer):
        async def resume(self, request: ApprovalRequest, doc: dict[str, Any]) -> Any:
            return "queued"

    paused = await sql_pause()
    with pytest.raises(ApprovalConfigError, match=r"Careless\.resume must return .*got str"):
        await paused.decide("approve", resumer=Careless(paused.graph))


# -- the sync twins ------------------------------------------------------------------------
def test_the_sync_twins_take_a_sync_resumer(sql_backend: Backend) -> None:
    config: Any = {"configurable": {"thread_id": "t1"}}
    with open_checkpointer_sync(sql_backend.url) as saver:
        graph = graphs.gate_graph(saver)
        graph.invoke({"amount": 9, "log": []}, config)
        graph.invoke({"amount": 11, "log": []}, {"configurable": {"thread_id": "t2"}})
        first, second = (v.request for v in list_approvals_sync(saver))
        resumer = SyncQueueingResumer(graph)
        kw = {"resumer": resumer, "by": "alice", "args_sha256": first.args_sha256}
        result = decide_sync(saver, "t1", first.approval_id, "approve", **kw)
        assert isinstance(result, DecisionResult)
        assert not result.finished
        assert graph.get_state(config).values["log"] == []  # queued, not run
        expired = datetime.fromisoformat(second.expires_at) + timedelta(seconds=1)
        actions = expire_due_sync(saver, now=expired, resumer=resumer)
        assert [(a.thread_id, a.outcome) for a in actions] == [("t2", "stopped")]
        assert resumer.calls == [
            ("is_pending", first.approval_id),
            ("resume", first.approval_id),
            ("is_pending", second.approval_id),
            ("resume", second.approval_id),
        ]
        resumer.work()
        assert graph.get_state(config).values["log"] == ["paid 9 to bob (approve)", "after"]
        assert get_approval_sync(saver, second.approval_id).status == "expired"


def test_a_sync_twin_refuses_an_async_resumer(sql_backend: Backend) -> None:
    with open_checkpointer_sync(sql_backend.url) as saver:
        graph = graphs.gate_graph(saver)
        with pytest.raises(ApprovalConfigError, match="QueueingResumer has async methods"):
            decide_sync(saver, "t1", "apr_x", "approve", resumer=QueueingResumer(graph), by="a")
        with pytest.raises(ApprovalConfigError, match="has async methods"):
            expire_due_sync(saver, resumer=QueueingResumer(graph))
