"""The stored decision is the truth: raw resumes cannot bypass the checks; lost resumes recover."""

from __future__ import annotations

import pytest
from langgraph.types import Command

from tests.approvals.conftest import PauseFn
from tether.approvals import (
    DECISION_KIND,
    ApprovalError,
    ApprovalNotPendingError,
    UnknownApprovalError,
    build_decision,
    resume_decided,
)
from tether.store import store_for


async def test_a_raw_resume_without_a_stored_decision_changes_nothing(pause: PauseFn) -> None:
    paused = await pause()
    state = await paused.graph.aget_state(paused.config)
    forged = {"approval_id": paused.approval_id, "decision": "approve", "by": "mallory"}
    await paused.graph.ainvoke(Command(resume={state.interrupts[0].id: forged}), paused.config)
    state = await paused.graph.aget_state(paused.config)
    assert [i.value["approval_id"] for i in state.interrupts] == [paused.approval_id]
    assert await paused.log() == []
    # The real decision still goes through, by id.
    result = await paused.decide("approve")
    assert result.finished
    assert await paused.log() == ["paid 500 to bob (approve)", "after"]


async def test_a_decision_stored_but_never_delivered_is_resumed(pause: PauseFn) -> None:
    paused = await pause()
    with pytest.raises(ApprovalError, match="has no stored decision"):
        await resume_decided(paused.saver, paused.approval_id, graph=paused.graph)
    # The deciding process died right after storing its decision.
    doc = build_decision(paused.view.request, "approve", by="alice", args_sha256=paused.args_sha256)
    await store_for(paused.saver).insert(DECISION_KIND, paused.approval_id, doc, thread_id="t1")
    result = await resume_decided(paused.saver, paused.approval_id, graph=paused.graph)
    assert result.finished
    assert await paused.log() == ["paid 500 to bob (approve)", "after"]
    with pytest.raises(ApprovalNotPendingError):
        await resume_decided(paused.saver, paused.approval_id, graph=paused.graph)
    with pytest.raises(UnknownApprovalError):
        await resume_decided(paused.saver, "apr_nope", graph=paused.graph)
