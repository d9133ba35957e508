"""A create_agent run with structured output, as a scripted model, an agent and a child process.

``ScriptedStructuredModel`` (fake, deterministic, no network) first asks for the
``lookup_order`` tool, then gives its verdict the way the agent asked for it:
as JSON text when bound with a provider ``response_format`` (ProviderStrategy),
else as a call of the ``Verdict`` tool (ToolStrategy). Each real call appends
``{"turn", "mode", "pid"}`` to ``calls_file``, so a test sees which strategy the
agent chose and, across processes, that no call was made twice.

Usage: ``python -m tests.steps.agent_child <url> <options-json> <thread> <workdir>``;
the parent sets ``TETHER_CRASH_AT`` to kill it at a boundary.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel

from tether import open_checkpointer
from tether.steps import durable_tool, recorded


class Verdict(BaseModel):
    """A refund decision."""

    approve: bool
    reason: str


VERDICT = Verdict(approve=True, reason="duplicate charge")


@tool
def lookup_order(order: str) -> str:
    """Look an order up."""
    return f"{order}: charged twice"


def read_modes(calls_file: Path) -> list[str]:
    """The strategy each real call was made with: "provider", "tool" or "plain"."""
    if not calls_file.exists():
        return []
    return [json.loads(line)["mode"] for line in calls_file.read_text().splitlines()]


def read_pids(calls_file: Path) -> list[int]:
    """The process id of each real call."""
    return [json.loads(line)["pid"] for line in calls_file.read_text().splitlines()]


class ScriptedStructuredModel(BaseChatModel):
    """Scripted stand-in for a chat model with native structured output (or without)."""

    model_name: str = "scripted-structured"
    calls_file: str

    @property
    def _llm_type(self) -> str:
        return "scripted-structured"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name}

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        turn = sum(1 for m in messages if m.type == "ai")
        tool_names = {t["function"]["name"] for t in kwargs.get("tools", [])}
        mode = (
            "provider"
            if "response_format" in kwargs
            else "tool"
            if Verdict.__name__ in tool_names
            else "plain"
        )
        with open(self.calls_file, "a", encoding="utf-8") as out:
            out.write(json.dumps({"turn": turn, "mode": mode, "pid": os.getpid()}) + "\n")
        usage: Any = {"input_tokens": 4, "output_tokens": 4, "total_tokens": 8}
        if turn == 0:
            call = {
                "name": "lookup_order",
                "args": {"order": "A1"},
                "id": "c0",
                "type": "tool_call",
            }
            answer = AIMessage("", tool_calls=[call], id="scripted-0", usage_metadata=usage)
        elif mode == "provider":
            answer = AIMessage(VERDICT.model_dump_json(), id="scripted-1", usage_metadata=usage)
        else:
            call = {
                "name": "Verdict",
                "args": VERDICT.model_dump(),
                "id": "c1",
                "type": "tool_call",
            }
            answer = AIMessage("", tool_calls=[call], id="scripted-1", usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=answer)])

    def bind_tools(self, tools: Any, **kwargs: Any) -> Runnable[Any, Any]:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)


def structured_agent(
    model: BaseChatModel, checkpointer: Any = None, middleware: Sequence[AgentMiddleware] = ()
) -> Any:
    """``create_agent`` with one durable tool and ``response_format=Verdict``."""
    return create_agent(
        model,
        [durable_tool(lookup_order)],
        response_format=Verdict,
        checkpointer=checkpointer,
        middleware=middleware,
    )


async def main(url: str, options: dict[str, Any], thread: str, work: Path) -> None:
    model = recorded(
        ScriptedStructuredModel(
            calls_file=str(work / "model_calls"), profile={"structured_output": True}
        )
    )
    config: Any = {"configurable": {"thread_id": thread}}
    async with open_checkpointer(url, **options) as saver:
        agent = structured_agent(model, saver)
        state = await agent.aget_state(config)
        task: Any = None if state.next else {"messages": [HumanMessage("refund A1?")]}
        result = await agent.ainvoke(task, config)
    print(json.dumps({"verdict": result["structured_response"].model_dump()}))


if __name__ == "__main__":
    url, options, thread, work = sys.argv[1:5]
    asyncio.run(main(url, json.loads(options), thread, Path(work)))
