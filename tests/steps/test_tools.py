"""Durable tools in process: schemas, idempotency keys, replay, ToolNode, bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.prebuilt import create_react_agent
from langgraph.types import Command, interrupt

from tests.backends import Backend
from tests.steps.graphs import State, one_node
from tests.steps.scripted import CountingScriptedModel, reply
from tether.steps import (
    DurableTool,
    ReconcileResult,
    ToolOutcomeUnknownError,
    durable_tool,
    idempotency_key,
    read_steps,
    recorded,
)

CONFIG: Any = {"configurable": {"thread_id": "t1"}}


def keyed_refund(seen: list[str]) -> DurableTool:
    @durable_tool
    def refund(order: str, amount: int, idempotency_key: str) -> str:
        """Refund an order."""
        seen.append(idempotency_key)
        return f"refunded {order} {amount}"

    return refund


def test_idempotency_key_is_hidden_from_the_model() -> None:
    refund = keyed_refund([])
    schema = convert_to_openai_tool(refund)["function"]
    assert schema["name"] == "refund"
    assert schema["description"] == "Refund an order."
    assert set(schema["parameters"]["properties"]) == {"order", "amount"}
    assert "idempotency_key" not in schema["parameters"].get("required", [])
    assert refund.takes_key


def test_wrapping_an_existing_tool_hides_its_key_too() -> None:
    @tool
    def charge(card: str, idempotency_key: str) -> str:
        """Charge a card."""
        return f"charged {card} {idempotency_key}"

    durable = durable_tool(charge)
    assert isinstance(durable, DurableTool)
    assert set(convert_to_openai_tool(durable)["function"]["parameters"]["properties"]) == {"card"}
    # Outside a graph nothing is recorded; the tool still gets a (one-off) key.
    assert durable.invoke({"card": "4242"}).startswith("charged 4242 tether-adhoc-")


def test_key_derivation_is_deterministic_and_specific() -> None:
    key = idempotency_key("acme", "t1", "step-1", "refund", "abc")
    assert key == idempotency_key("acme", "t1", "step-1", "refund", "abc")
    others = {
        idempotency_key("other", "t1", "step-1", "refund", "abc"),
        idempotency_key("acme", "t2", "step-1", "refund", "abc"),
        idempotency_key("acme", "t1", "step-2", "refund", "abc"),
        idempotency_key("acme", "t1", "step-1", "charge", "abc"),
        idempotency_key("acme", "t1", "step-1", "refund", "abd"),
    }
    assert key not in others
    assert len(others) == 5


async def test_result_is_replayed_and_key_is_stable_across_reruns(backend: Backend) -> None:
    seen: list[str] = []
    refund = keyed_refund(seen)

    async def node(state: State) -> dict[str, Any]:
        result = await refund.ainvoke({"order": "A1", "amount": 5})
        approval = interrupt("approve?")
        return {"messages": [HumanMessage(f"{result} / {approval}")]}

    async with backend.open() as saver:
        graph = one_node(node, saver)
        await graph.ainvoke({"messages": [HumanMessage("go")]}, CONFIG)
        result = await graph.ainvoke(Command(resume="ok"), CONFIG)
        steps = await read_steps(saver, "t1")
    assert result["messages"][-1].content == "refunded A1 5 / ok"
    assert len(seen) == 1  # replayed on the re-run, not run again
    assert [(s.kind, s.name, s.output) for s in steps] == [("tool", "refund", "refunded A1 5")]
    assert steps[0].tool_schema_version == refund.version


async def test_tool_that_failed_before_any_effect_may_run_again(backend: Backend) -> None:
    attempts: list[int] = []

    @durable_tool(raises_before_effect=(ConnectionRefusedError,))
    def flaky(order: str) -> str:
        """Fails the first time, before reaching the service."""
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionRefusedError("gateway refused the connection")
        return "ok"

    async def node(state: State) -> dict[str, Any]:
        return {"messages": [HumanMessage(await flaky.ainvoke({"order": "A1"}))]}

    async with backend.open() as saver:
        graph = one_node(node, saver)
        with pytest.raises(ConnectionRefusedError, match="refused"):
            await graph.ainvoke({"messages": [HumanMessage("go")]}, CONFIG)
        result = await graph.ainvoke(None, CONFIG)
    assert result["messages"][-1].content == "ok"
    assert len(attempts) == 2


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
async def test_agent_with_tool_node_records_model_and_tool_steps(
    backend: Backend, tmp_path: Path
) -> None:
    seen: list[str] = []
    model = recorded(
        CountingScriptedModel(
            replies=[
                reply("", [{"name": "refund", "args": {"order": "A1", "amount": 5}}]),
                reply("done"),
            ],
            calls_file=str(tmp_path / "calls"),
        )
    )
    async with backend.open() as saver:
        agent = create_react_agent(model, [keyed_refund(seen)], checkpointer=saver)
        result = await agent.ainvoke({"messages": [HumanMessage("refund A1")]}, CONFIG)
        steps = await read_steps(saver, "t1")
    tool_message = result["messages"][2]
    assert isinstance(tool_message, ToolMessage)
    assert tool_message.content == "refunded A1 5"
    assert [(s.kind, s.node) for s in steps] == [
        ("model", "agent"),
        ("tool", "tools"),
        ("model", "agent"),
    ]
    assert steps[1].key is not None
    assert "call_0_0" in steps[1].key  # keyed by the model's tool-call id
    assert len(seen) == 1


def test_bad_tool_definitions_are_refused() -> None:
    with pytest.raises(TypeError, match="wraps a function or a LangChain BaseTool"):
        durable_tool(42)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="reconcile must be a callable"):
        durable_tool(reconcile="yes")(lambda order: order)  # type: ignore[call-overload]
    refund = keyed_refund([])
    with pytest.raises(TypeError, match="already durable"):
        durable_tool(refund)


async def test_changed_args_for_a_recorded_tool_call_raise(backend: Backend) -> None:
    from tether.steps import NonDeterminismError

    refund = keyed_refund([])
    amount = {"value": 5}

    async def node(state: State) -> dict[str, Any]:
        call = {
            "name": "refund",
            "args": {"order": "A1", "amount": amount["value"]},
            "id": "call_1",
            "type": "tool_call",
        }
        message = await refund.ainvoke(call)
        interrupt("approve?")
        return {"messages": [message]}

    async with backend.open() as saver:
        graph = one_node(node, saver)
        await graph.ainvoke({"messages": [HumanMessage("go")]}, CONFIG)
        amount["value"] = 500
        with pytest.raises(NonDeterminismError, match="non-deterministic tool call") as info:
            await graph.ainvoke(Command(resume="ok"), CONFIG)
    assert "call_1" in info.value.step


def test_async_reconcile_hook_needs_async_invocation(tmp_path: Path) -> None:
    from tether import open_checkpointer_sync
    from tether.steps import StepsError

    async def reconcile(args: dict[str, Any], key: str) -> None:
        return None

    crashed = {"once": False}

    @durable_tool(reconcile=reconcile)
    def send(to: str) -> str:
        """Send a message."""
        if not crashed["once"]:
            crashed["once"] = True
            raise KeyboardInterrupt  # leaves the claim without a commit, like a crash
        return "sent"

    def node(state: State) -> dict[str, Any]:
        return {"messages": [HumanMessage(send.invoke({"to": "ann"}))]}

    with open_checkpointer_sync(f"sqlite:///{tmp_path / 'db.sqlite'}") as saver:
        graph = one_node(node, saver)
        with pytest.raises(KeyboardInterrupt):
            graph.invoke({"messages": [HumanMessage("go")]}, CONFIG)
        with pytest.raises(StepsError, match="async reconcile hook"):
            graph.invoke(None, CONFIG)


class _Crash(BaseException):
    """Leaves a claim without a commit, as a process killed mid-tool would."""


def _claimed_then_reconciled(hook: Any, effects: list[str]) -> Any:
    crashed = {"once": False}

    @durable_tool(name="send", reconcile=hook)
    def send(to: str) -> str:
        """Send a message."""
        effects.append(to)
        if not crashed["once"]:
            crashed["once"] = True
            raise _Crash
        return "sent"

    async def node(state: State) -> dict[str, Any]:
        return {"messages": [HumanMessage(str(await send.ainvoke({"to": "ann"})))]}

    return node


@pytest.mark.parametrize(
    "answer",
    ["unknown", False, {"found": False}, 0, "sent", ["msg-1"]],
    ids=["str-unknown", "False", "dict-found-false", "zero", "bare-output", "list"],
)
async def test_reconcile_must_return_a_reconcile_result_or_none(
    durable_backend: Backend, answer: Any
) -> None:
    from tether.steps._errors import ReconcileResultError

    effects: list[str] = []
    node = _claimed_then_reconciled(lambda args, key: answer, effects)
    async with durable_backend.open() as saver:
        graph = one_node(node, saver)
        with pytest.raises(_Crash):
            await graph.ainvoke({"messages": [HumanMessage("go")]}, CONFIG)
        with pytest.raises(ReconcileResultError) as refused:
            await graph.ainvoke(None, CONFIG)
        steps = await read_steps(saver, "t1")
    message = str(refused.value)
    assert type(answer).__name__ in message
    assert "ReconcileResult(output)" in message
    assert "None if it did not" in message
    assert "ReconcileResult.unknown(" in message
    assert effects == ["ann"]  # the tool did not run again...
    assert steps == []  # ...and nothing was committed as its output


async def test_reconcile_result_unknown_refuses_with_the_hooks_reason(
    durable_backend: Backend,
) -> None:
    effects: list[str] = []
    hook = lambda args, key: ReconcileResult.unknown("the mail API is down")  # noqa: E731
    node = _claimed_then_reconciled(hook, effects)
    async with durable_backend.open() as saver:
        graph = one_node(node, saver)
        with pytest.raises(_Crash):
            await graph.ainvoke({"messages": [HumanMessage("go")]}, CONFIG)
        with pytest.raises(ToolOutcomeUnknownError, match="the mail API is down"):
            await graph.ainvoke(None, CONFIG)
        # The claim stays: once the hook can tell, the run continues.
        result = await _rerun_with_hook(saver, effects, lambda a, k: ReconcileResult("sent"))
    assert result["messages"][-1].content == "sent"
    assert effects == ["ann"]


async def _rerun_with_hook(saver: Any, effects: list[str], hook: Any) -> Any:
    node = _claimed_then_reconciled(hook, effects)
    return await one_node(node, saver).ainvoke(None, CONFIG)


def test_reconcile_result_outcomes_are_checked() -> None:
    assert ReconcileResult("out").outcome == "happened"
    unknown = ReconcileResult.unknown("no answer")
    assert (unknown.outcome, unknown.reason) == ("unknown", "no answer")
    with pytest.raises(ValueError, match="outcome"):
        ReconcileResult("out", outcome="maybe")  # type: ignore[arg-type]
