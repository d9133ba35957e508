"""Scripted (fake) chat models and the agent loop the benchmarks run.

Every benchmark agent has the same shape: ``agent`` -> ``tools`` -> ``agent`` ...
until the model stops calling tools. The models here are deterministic and
offline, and deliberately cheap (no hashing, no call log, unlike
``tether.graphs.ScriptedChatModel``), so the benchmarks time the runtime and
not the stand-in model.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolCall
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode

AgentNode = Callable[[Any], Awaitable[dict[str, Any]]]


class ScriptedBenchModel(BaseChatModel):
    """Base of the benchmarks' scripted (fake) models: one reply computed from the conversation."""

    def _reply(self, messages: Sequence[BaseMessage]) -> AIMessage:
        """The answer to ``messages``."""
        raise NotImplementedError

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])


class ScriptedToolLoop(ScriptedBenchModel):
    """Scripted (fake) model: calls ``tool_name`` with the next number, answers at ``steps``.

    Subclasses say how far the conversation has got (:meth:`_progress`) and what
    the final answer is (:meth:`_final`).
    """

    steps: int

    tool_name: ClassVar[str]
    argument: ClassVar[str]
    input_tokens: ClassVar[int]
    output_tokens: ClassVar[int]

    def _progress(self, messages: Sequence[BaseMessage]) -> int:
        """How many tool calls have been answered so far."""
        raise NotImplementedError

    def _final(self, done: int) -> str:
        """The answer once ``done`` (>= ``steps``) tool calls have been answered."""
        raise NotImplementedError

    def _reply(self, messages: Sequence[BaseMessage]) -> AIMessage:
        done = self._progress(messages)
        usage: Any = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.input_tokens + self.output_tokens,
        }
        if done >= self.steps:
            return AIMessage(self._final(done), usage_metadata=usage)
        call = ToolCall(
            name=self.tool_name,
            args={self.argument: done + 1},
            id=f"call_{done + 1}",
            type="tool_call",
        )
        return AIMessage("", tool_calls=[call], usage_metadata=usage)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Runnable[Any, Any]:
        return self


def model_node(model: Runnable[Any, Any]) -> AgentNode:
    """An ``agent`` node that appends ``model``'s answer to the conversation."""

    async def agent(state: Any) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    return agent


def _route(state: Any) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def agent_loop(state_type: type, agent: AgentNode, tool: BaseTool, saver: Any) -> Any:
    """Compile ``agent`` -> ``tools`` -> ``agent`` ... on ``state_type`` with ``saver``."""
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(state_type)
    # A TypedDict state type is only known at run time here, so add_node's
    # overloads cannot bind their node input type from ``agent``'s signature.
    builder.add_node("agent", agent)  # type: ignore[call-overload]
    builder.add_node("tools", ToolNode([tool]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", _route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=saver)
