"""Decided by whom: an authenticated identity, separate from what the request body says.

The library and the CLI trust ``by=`` and roles (the caller is the trust
boundary). A server instead passes who the authenticated user is as a
:class:`Decider`, and the body of the request as a :class:`DecisionPayload`;
nothing in the body can name, add to or replace the decider.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.approvals.conftest import Paused, PauseFn
from tether.approvals import (
    DECISION_KIND,
    ApprovalConfigError,
    ApproverNotAllowedError,
    Decider,
    DecisionPayload,
    decide,
    decide_as,
    decide_as_sync,
    get_approval,
)
from tether.store import store_for


async def _stored(paused: Paused) -> dict[str, Any] | None:
    record = await store_for(paused.saver).get(DECISION_KIND, paused.approval_id)
    return None if record is None else record.value


@pytest.mark.parametrize(
    "smuggled",
    [
        {"by": "alice"},
        {"roles": ["finance"]},
        {"by": "alice", "roles": ["finance"]},
        {"decider": {"user_id": "alice", "roles": ["finance"]}},
        {"user_id": "alice"},
        {"role": "finance"},
    ],
    ids=["by", "roles", "by-and-roles", "decider", "user_id", "role"],
)
async def test_a_payload_cannot_name_or_change_the_decider(
    pause: PauseFn, smuggled: dict[str, Any]
) -> None:
    paused = await pause(amount=500)
    body = {"decision": "approve", "args_sha256": paused.args_sha256, **smuggled}
    mallory = Decider("mallory")  # authenticated, but not an approver of this request
    with pytest.raises(ApprovalConfigError, match="authenticated") as refused:
        await decide_as(paused.saver, mallory, paused.approval_id, body, graph=paused.graph)
    for key in smuggled:
        assert key in str(refused.value)
    with pytest.raises(ApprovalConfigError, match="authenticated"):
        DecisionPayload.from_body(body)
    assert await _stored(paused) is None
    # Without the smuggled fields, the request is judged on mallory's own identity.
    clean = DecisionPayload.from_body({"decision": "approve", "args_sha256": paused.args_sha256})
    with pytest.raises(ApproverNotAllowedError, match="'mallory'"):
        await decide_as(paused.saver, mallory, paused.approval_id, clean, graph=paused.graph)
    assert await _stored(paused) is None
    assert (await get_approval(paused.saver, paused.approval_id)).status == "pending"


async def test_the_recorded_decider_is_the_authenticated_one(pause: PauseFn) -> None:
    paused = await pause(amount=500)
    erin = Decider("erin", roles=["finance"], source="oidc:https://id.example")
    payload = DecisionPayload.from_body(
        {"decision": "approve", "args_sha256": paused.args_sha256, "reason": "checked"}
    )
    result = await decide_as(paused.saver, erin, paused.approval_id, payload, graph=paused.graph)
    assert result.finished
    stored = await _stored(paused)
    assert stored is not None
    assert (stored["by"], stored["roles"], stored["decider_source"]) == (
        "erin",
        ["finance"],
        "oidc:https://id.example",
    )
    assert result.decision["by"] == "erin"
    steps = await store_for(paused.saver).steps(paused.thread_id)
    decided = [s["output"] for s in steps if s["output"].get("event") == "decided"]
    assert [(d["by"], d["decider_source"]) for d in decided] == [
        ("erin", "oidc:https://id.example")
    ]


async def test_a_typed_payload_has_no_identity_fields(pause: PauseFn) -> None:
    paused = await pause(amount=500)
    with pytest.raises(TypeError):
        DecisionPayload(decision="approve", args_sha256=paused.args_sha256, by="alice")  # type: ignore[call-arg]
    # decide_as takes no by=/roles= either: a body splatted into it fails loudly.
    body: dict[str, Any] = {"by": "alice"}
    payload = DecisionPayload("approve", paused.args_sha256)
    with pytest.raises(TypeError):
        await decide_as(  # type: ignore[call-arg]
            paused.saver, Decider("mallory"), paused.approval_id, payload,
            graph=paused.graph, **body,
        )  # fmt: skip
    assert await _stored(paused) is None


async def test_the_library_call_records_the_trusted_caller(pause: PauseFn) -> None:
    paused = await pause(amount=500)
    await decide(
        paused.saver, "t1", paused.approval_id, "approve", graph=paused.graph, by="alice",
        args_sha256=paused.args_sha256,
    )  # fmt: skip
    stored = await _stored(paused)
    assert stored is not None
    assert (stored["by"], stored["decider_source"]) == ("alice", "caller")


def test_bad_identities_and_payloads_are_refused() -> None:
    with pytest.raises(ApprovalConfigError, match="user id"):
        Decider("")
    with pytest.raises(ApprovalConfigError, match="list of role names"):
        Decider("erin", roles="finance")  # type: ignore[arg-type]
    with pytest.raises(ApprovalConfigError, match="reserved"):
        Decider("tether:expiry")
    with pytest.raises(ApprovalConfigError, match="unknown field 'amount'"):
        DecisionPayload.from_body({"decision": "approve", "args_sha256": "x", "amount": 1})
    with pytest.raises(ApprovalConfigError, match="'decision'"):
        DecisionPayload.from_body({"args_sha256": "x"})
    with pytest.raises(ApprovalConfigError, match="JSON object"):
        DecisionPayload.from_body(["approve"])  # type: ignore[arg-type]
    with pytest.raises(ApprovalConfigError, match="edited_args"):
        DecisionPayload.from_body({"decision": "edit", "args_sha256": "x", "edited_args": "{}"})


def test_the_sync_twin(tmp_path: Any) -> None:
    from langchain_core.runnables import RunnableConfig

    from tests.approvals import graphs
    from tether import open_checkpointer_sync
    from tether.approvals import list_approvals_sync

    config: RunnableConfig = {"configurable": {"thread_id": "t1"}}
    with open_checkpointer_sync(f"sqlite:///{tmp_path / 'sync.db'}") as saver:
        graph = graphs.gate_graph(saver)
        graph.invoke({"amount": 300, "log": []}, config)
        (view,) = list_approvals_sync(saver)
        body = {"decision": "approve", "args_sha256": view.request.args_sha256, "by": "alice"}
        with pytest.raises(ApprovalConfigError, match="authenticated"):
            decide_as_sync(saver, Decider("mallory"), view.request.approval_id, body, graph=graph)
        del body["by"]
        result = decide_as_sync(
            saver, Decider("erin", roles=["finance"]), view.request.approval_id, body, graph=graph
        )
    assert result.finished
    assert result.decision["by"] == "erin"
