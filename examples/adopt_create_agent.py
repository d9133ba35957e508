"""Make an existing prebuilt agent durable by changing three lines.

The agent below is LangGraph's prebuilt ReAct agent with one tool. Making it
durable takes three changes, marked ``# tether (1/3)`` to ``(3/3)``:

1. wrap the model with ``recorded``: every answer is recorded before the agent
   moves on, and a resumed run replays it instead of asking the model again;
2. wrap the tools with ``durable_tool``: each result is recorded, and a tool
   that takes an ``idempotency_key`` gets the same key on every retry;
3. pass a checkpointer from ``open_checkpointer``.

``langchain.agents.create_agent`` (the ``langchain`` package) takes the same
model, tools and checkpointer, so the same three lines apply to it; this example
uses ``langgraph.prebuilt.create_react_agent`` because it needs only langgraph.

The model here is a scripted stand-in (``ScriptedSupportModel``: no network,
same answers every run). Swap in any LangChain chat model, e.g.
``init_chat_model("openai:gpt-4o-mini")``.

Try a crash: the first command kills itself (SIGKILL, like a power cut) right
after the refund's result is recorded, before the graph checkpoints it; the
second resumes the thread in a fresh process, replays the recorded refund (no
second refund) and asks the model only for the final answer.

    python examples/adopt_create_agent.py --crash
    python examples/adopt_create_agent.py
"""

from __future__ import annotations

import asyncio
import os
import sys
import warnings
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langgraph.prebuilt import create_react_agent

from tether import open_checkpointer
from tether.steps import durable_tool, read_steps, recorded

warnings.filterwarnings("ignore", message="create_react_agent has been moved")


class ScriptedSupportModel(BaseChatModel):
    """A scripted (fake) support model: refunds the order, then confirms."""

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted-support"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls += 1
        usage: Any = {"input_tokens": 30, "output_tokens": 12, "total_tokens": 42}
        if isinstance(messages[-1], ToolMessage):
            reply = AIMessage(f"Done: {messages[-1].content}.", usage_metadata=usage)
        else:
            reply = AIMessage(
                "",
                usage_metadata=usage,
                tool_calls=[
                    {
                        "name": "refund_order",
                        "args": {"order_id": "A-1001", "amount_cents": 4999},
                        "id": "call_refund_1",
                        "type": "tool_call",
                    }
                ],
            )
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def bind_tools(self, tools: Any, **kwargs: Any) -> Runnable[Any, Any]:
        return self


def refund_order(order_id: str, amount_cents: int, idempotency_key: str) -> str:
    """Refund part or all of an order.

    A real implementation passes ``idempotency_key`` to the payment provider,
    which then performs the refund at most once however often it is asked.
    """
    print(f"  (refund_order ran: {order_id}, key {idempotency_key})")
    return f"refunded {amount_cents} cents on {order_id}"


async def main() -> None:
    scripted = ScriptedSupportModel()
    model = recorded(scripted)  # tether (1/3)
    tools = [durable_tool(refund_order)]  # tether (2/3)
    async with open_checkpointer("sqlite:///support.db") as saver:  # tether (3/3)
        agent = create_react_agent(model, tools, checkpointer=saver)
        config: Any = {"configurable": {"thread_id": "ticket-42"}}
        state = await agent.aget_state(config)
        if state.next:
            print("resuming thread ticket-42 where the last process died")
            result = await agent.ainvoke(None, config)
        elif state.values:
            print("thread ticket-42 is finished (delete support.db to start over)")
            result = state.values
        else:
            result = await agent.ainvoke(
                {"messages": [HumanMessage("Please refund order A-1001.")]}, config
            )
        print("answer:", result["messages"][-1].content)
        print("model calls made by this process:", scripted.calls)
        for step in await read_steps(saver, "ticket-42"):
            print(
                f"  step {step.index}: {step.kind:<5} {step.name:<22} node={step.node:<6} "
                f"tokens={step.usage.get('total_tokens', 0)} worker={step.worker_id}"
            )


if __name__ == "__main__":
    if "--crash" in sys.argv:
        os.environ["TETHER_CRASH_AT"] = "tool.after:1"  # die once the refund is recorded
    asyncio.run(main())
