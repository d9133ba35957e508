"""The support desk the examples run on: a scripted model, a refund tool, a run loop.

Nothing here is tether-specific; it is the "existing agent" part the examples
make durable. Everything is deterministic and offline:

* :func:`scripted_support_model` is a scripted (fake) chat model. It asks for a
  refund on the first turn and confirms once the refund tool has answered, and
  appends every call it really makes to ``model_calls.log``.
* :func:`refund_order` refunds through ``FakePaymentsProvider``, a SQLite fake
  of a payments service (``payments.db``) that honours idempotency keys and
  counts every request it gets.
* :func:`run_ticket` starts the ticket's thread, or resumes it where a killed
  process left it, and prints what happened.

All files are written to the current directory.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from tether import aunfinished
from tether.graphs import (
    FakeOrder,
    FakePaymentsProvider,
    ScriptedChatModel,
    ScriptRule,
    after_tool,
    last_tool_result,
    on_first_turn,
    planned_call,
    read_calls,
)
from tether.steps import read_steps

__all__ = [
    "CALLS_FILE",
    "CHECKPOINTS_URL",
    "ORDER",
    "PAYMENTS_FILE",
    "crash_if_asked",
    "refund_order",
    "run_ticket",
    "scripted_support_model",
]

CHECKPOINTS_URL = "sqlite:///support.db"
CALLS_FILE = "model_calls.log"
PAYMENTS_FILE = "payments.db"
THREAD_ID = "ticket-42"
ORDER = FakeOrder("A-1001", "ada@example.com", "ceramic teapot", 4999)


def _ask_for_refund(messages: Sequence[BaseMessage]) -> AIMessage:
    args = {"order_id": ORDER.order_id, "amount_cents": ORDER.amount_cents}
    return AIMessage("", tool_calls=[planned_call("refund_order", args)])


def _confirm(messages: Sequence[BaseMessage]) -> AIMessage:
    return AIMessage(f"Done: {last_tool_result(messages)}.")


def scripted_support_model() -> ScriptedChatModel:
    """A scripted (fake) support model: refunds the order, then confirms.

    Swap in any LangChain chat model, e.g. ``init_chat_model("openai:gpt-4o-mini")``.
    """
    return ScriptedChatModel(
        rules=[
            ScriptRule("refund", on_first_turn, _ask_for_refund),
            ScriptRule("confirm", after_tool("refund_order"), _confirm),
        ],
        calls_file=CALLS_FILE,
        model_name="scripted-support",
    )


def refund_order(order_id: str, amount_cents: int, idempotency_key: str) -> str:
    """Refund part or all of an order.

    The payments provider performs a refund at most once per ``idempotency_key``,
    however often it is asked.
    """
    refund = FakePaymentsProvider(PAYMENTS_FILE).refund(
        order_id, amount_cents, idempotency_key=idempotency_key
    )
    return f"refund {refund.refund_id} of {refund.amount_cents} cents on {refund.order_id}"


def crash_if_asked(argv: Sequence[str]) -> None:
    """With ``--crash``, die (SIGKILL) once the refund's result is recorded."""
    if "--crash" in argv:
        os.environ["TETHER_CRASH_AT"] = "tool.after:1"


async def run_ticket(agent: CompiledStateGraph[Any], saver: BaseCheckpointSaver[Any]) -> None:
    """Start the ticket's thread or resume it, then print the answer and the step log.

    Args:
        agent: The compiled agent graph, with ``saver`` as its checkpointer.
        saver: The checkpointer, whose step log is printed.
    """
    FakePaymentsProvider(PAYMENTS_FILE).add_order(ORDER)
    config: Any = {"configurable": {"thread_id": THREAD_ID}}
    state = await agent.aget_state(config)
    # Not `state.next`: it is empty for a run killed after a step's writes were
    # stored and before its checkpoint was, which invoke(None) still finishes.
    if await aunfinished(agent, config):
        print(f"resuming thread {THREAD_ID} where the last process died")
        result = await agent.ainvoke(None, config)
    elif state.values:
        print(f"thread {THREAD_ID} is finished (delete support.db to start over)")
        result = state.values
    else:
        request = HumanMessage(f"Please refund order {ORDER.order_id}.")
        result = await agent.ainvoke({"messages": [request]}, config)
    print("answer:", result["messages"][-1].content)
    calls = read_calls(CALLS_FILE)
    mine = sum(1 for call in calls if call.pid == os.getpid())
    print(f"model calls: {mine} by this process, {len(calls)} in all")
    counts = FakePaymentsProvider(PAYMENTS_FILE).counts()
    print(f"refund requests: {counts.refund_attempts}; refunds issued: {counts.refunds}")
    for step in await read_steps(saver, THREAD_ID):
        print(
            f"  step {step.index}: {step.kind:<5} {step.name:<16} node={step.node:<6} "
            f"tokens={step.usage.get('total_tokens', 0)} worker={step.worker_id}"
        )
    sys.stdout.flush()
