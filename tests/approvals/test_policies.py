"""Configuration errors: approve-on-timeout never exists; bad gates fail clearly, store nothing."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph

from tests.approvals import graphs
from tests.backends import Backend
from tether.approvals import (
    ApprovalConfigError,
    ApprovalError,
    Approvers,
    Escalate,
    SafeAlternative,
    Stop,
    expiry_policy,
    list_approvals,
    policy_from_dict,
    request_approval,
    requires_approval,
)
from tether.errors import ConfigurationError

NO_TIMEOUT_APPROVAL = "approve-on-timeout does not exist"


@pytest.mark.parametrize(
    "policy", ["approve", "auto_approve", "approve_on_timeout", "Auto-Approve", "allow", True]
)
def test_approve_on_timeout_is_rejected(policy: Any) -> None:
    with pytest.raises(ApprovalConfigError, match=NO_TIMEOUT_APPROVAL):
        expiry_policy(policy)


def test_approve_on_timeout_is_rejected_at_the_end_of_an_escalation() -> None:
    with pytest.raises(ApprovalConfigError, match=NO_TIMEOUT_APPROVAL):
        Escalate(to=Approvers(users=["carol"]), expires_in=timedelta(hours=1), then="approve")  # type: ignore[arg-type]


def test_approve_on_timeout_is_rejected_when_gating_a_tool() -> None:
    @tool
    def pay(to: str, amount: int) -> str:
        """Pay someone."""
        return "paid"

    with pytest.raises(ApprovalConfigError, match=NO_TIMEOUT_APPROVAL):
        requires_approval(
            pay,
            approvers=graphs.APPROVERS,
            why="x",
            expires_in=timedelta(hours=1),
            on_expiry="approve_on_timeout",
        )


async def test_approve_on_timeout_in_a_node_fails_the_run_and_stores_nothing(
    backend: Backend,
) -> None:
    def node(state: graphs.PayState) -> graphs.PayState:
        request_approval(
            "pay",
            {"amount": 1},
            why="x",
            approvers=graphs.APPROVERS,
            expires_in=timedelta(hours=1),
            on_expiry="approve",
        )
        return {}

    builder = StateGraph(graphs.PayState)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    builder.add_edge("node", END)
    async with backend.open() as saver:
        graph = builder.compile(checkpointer=saver)
        config: RunnableConfig = {"configurable": {"thread_id": "t1"}}
        with pytest.raises(ApprovalConfigError, match=NO_TIMEOUT_APPROVAL):
            await graph.ainvoke({"log": []}, config)
        assert await list_approvals(saver, status=None) == []


def test_policies_round_trip_through_json() -> None:
    chain = Escalate(
        to=Approvers(roles=["lead"]),
        expires_in=timedelta(minutes=30),
        then=Escalate(
            to=Approvers(users=["cfo"]), expires_in=timedelta(hours=4), then=SafeAlternative()
        ),
    )
    assert policy_from_dict(chain.to_dict()) == chain
    assert policy_from_dict(Stop().to_dict()) == Stop()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (Approvers, "needs someone who may decide"),
        (lambda: Approvers(users="alice"), "lists of names"),
        (lambda: expiry_policy("escalate"), "needs a target"),
        (lambda: expiry_policy("later"), "unknown expiry policy"),
        (
            lambda: Escalate(to=Approvers(users=["a"]), expires_in=timedelta(0)),
            "positive timedelta",
        ),
        (lambda: Escalate(to=["a"], expires_in=timedelta(hours=1)), "must be Approvers"),  # type: ignore[arg-type]
    ],
)
def test_bad_policies_say_what_to_write(make: Any, message: str) -> None:
    with pytest.raises(ApprovalConfigError, match=message):
        make()


def test_a_bad_approval_configuration_is_a_configuration_error() -> None:
    # Like MissingKeyError: callers catching tether's ConfigurationError (or
    # ValueError) catch a bad gate too, and ApprovalError still catches it.
    with pytest.raises(ConfigurationError, match=NO_TIMEOUT_APPROVAL) as caught:
        expiry_policy("approve")
    assert isinstance(caught.value, ApprovalConfigError)
    assert isinstance(caught.value, ApprovalError)
    assert isinstance(caught.value, ValueError)


def _gate(**overrides: Any) -> None:
    kwargs: dict[str, Any] = {
        "why": "x",
        "approvers": graphs.APPROVERS,
        "expires_in": timedelta(hours=1),
        "on_expiry": Stop(),
    }
    request_approval("pay", {"amount": 1}, **{**kwargs, **overrides})


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"expires_in": timedelta(0)}, "every request expires"),
        ({"expires_in": 3600}, "positive timedelta"),
        ({"on_expiry": SafeAlternative()}, "no alternative was proposed"),
        ({"approvers": ["alice"]}, "must be Approvers"),
        ({"depends_on": {"balance": 3}}, "must be a callable"),
        ({"args_schema": dict}, "pydantic BaseModel"),
        ({}, "must run inside a graph node"),
    ],
)
def test_bad_gate_arguments_fail_before_anything_is_stored(
    overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(ApprovalConfigError, match=message):
        _gate(**overrides)


def test_arguments_must_be_json() -> None:
    with pytest.raises(ApprovalConfigError, match="not JSON"):
        _gate_args({"when": object()})
    with pytest.raises(ApprovalConfigError, match="NaN"):
        _gate_args({"amount": float("nan")})


def _gate_args(args: dict[str, Any]) -> None:
    request_approval(
        "pay",
        args,
        why="x",
        approvers=graphs.APPROVERS,
        expires_in=timedelta(hours=1),
        on_expiry=Stop(),
    )
