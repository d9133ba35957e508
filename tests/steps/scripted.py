"""A scripted (fake, deterministic) chat model for the steps tests.

``CountingScriptedModel`` answers the n-th assistant turn of a conversation
with ``replies[n]`` and appends one line per real call to ``calls_file``, so a
test, even one in another process, can prove a call was not made twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool


def reply(text: str = "", tool_calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """One scripted answer: text, and optionally tool calls ``{"name", "args"}``."""
    return {"text": text, "tool_calls": tool_calls or []}


def count_calls(calls_file: str | Path) -> int:
    path = Path(calls_file)
    return len(path.read_text().splitlines()) if path.exists() else 0


class CountingScriptedModel(BaseChatModel):
    """Scripted stand-in for a chat model; no network, same answer for the same turn."""

    replies: list[dict[str, Any]]
    calls_file: str
    tokens_per_call: int = 10

    @property
    def _llm_type(self) -> str:
        return "scripted-counting"

    def _answer(self, messages: list[BaseMessage]) -> AIMessage:
        turn = sum(1 for m in messages if m.type == "ai")
        with open(self.calls_file, "a", encoding="utf-8") as out:
            out.write(json.dumps({"turn": turn, "n": len(messages)}) + "\n")
        spec = self.replies[min(turn, len(self.replies) - 1)]
        calls = [
            {"name": c["name"], "args": c["args"], "id": f"call_{turn}_{i}", "type": "tool_call"}
            for i, c in enumerate(spec["tool_calls"])
        ]
        half = self.tokens_per_call // 2
        return AIMessage(
            content=spec["text"],
            tool_calls=calls,
            id=f"scripted-{turn}",
            usage_metadata={
                "input_tokens": half,
                "output_tokens": self.tokens_per_call - half,
                "total_tokens": self.tokens_per_call,
            },
        )

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._answer(messages))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        message = self._answer(messages)
        words = str(message.content).split(" ")
        for i, word in enumerate(words):
            last = i == len(words) - 1
            yield ChatGenerationChunk(
                message=AIMessageChunk(
                    content=word + ("" if last else " "),
                    id=message.id,
                    usage_metadata=message.usage_metadata if last else None,
                    tool_call_chunks=[
                        {
                            "name": c["name"],
                            "args": json.dumps(c["args"]),
                            "id": c["id"],
                            "index": j,
                            "type": "tool_call_chunk",
                        }
                        for j, c in enumerate(message.tool_calls)
                    ]
                    if last
                    else [],
                )
            )

    def bind_tools(self, tools: Any, **kwargs: Any) -> Runnable[Any, Any]:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)
