"""``ScriptedChatModel``: a deterministic, offline stand-in for a chat model.

It answers from a script instead of a network: an ordered list of
:class:`ScriptRule`, each a predicate on the conversation and a function that
builds the reply. The first rule whose predicate holds answers. Rules look at
the conversation itself (typically the last tool result), never at a call
counter, so a run that is resumed or replayed after a crash gets the same
answer for the same conversation.

Every real call is appended, with a hash of its input, to ``calls_file``. A
test (or ``tether crashtest``) reads that file to prove that no call was made
twice. Replies carry ``usage_metadata`` and an id derived from the input, so
two runs of the same script produce equal states.

Real providers plug into the same graphs through LangChain's
``init_chat_model``, for example
``init_chat_model("openai:gpt-4o-mini")`` or
``init_chat_model("anthropic:claude-sonnet-4-5")`` with the provider's package
installed; tether itself imports no provider.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, ToolCall, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, Field

from tether._calllog import ScriptedCall, append_call, read_calls
from tether._canonical import canonical_json
from tether._messages import message_fingerprint
from tether.errors import TetherError

__all__ = [
    "ScriptError",
    "ScriptRule",
    "ScriptedCall",
    "ScriptedChatModel",
    "after_tool",
    "last_tool_result",
    "message_fingerprint",
    "on_first_turn",
    "planned_call",
    "read_calls",
]


class ScriptError(TetherError):
    """The script has no rule for the conversation, or a reply is malformed."""


Conversation = Sequence[BaseMessage]


@dataclass(frozen=True)
class ScriptRule:
    """One entry of a script: when ``when(messages)`` holds, answer ``reply(messages)``.

    Attributes:
        name: A short label written to the calls file and used in tool call ids.
        when: Predicate on the conversation the model is asked about.
        reply: Builds the answer. Leave its ``id`` unset and make tool calls
            with :func:`planned_call`; the model fills the ids in
            deterministically from the input.
    """

    name: str
    when: Callable[[Conversation], bool]
    reply: Callable[[Conversation], AIMessage]


def planned_call(name: str, args: dict[str, Any]) -> ToolCall:
    """A tool call for a scripted reply; the model gives it a deterministic id."""
    return ToolCall(name=name, args=args, id=None, type="tool_call")


def on_first_turn(messages: Conversation) -> bool:
    """True when no tool has answered yet (the model is starting the task)."""
    return not any(isinstance(m, ToolMessage) for m in messages)


def after_tool(name: str) -> Callable[[Conversation], bool]:
    """A predicate: the last message is the result of the tool called ``name``."""

    def predicate(messages: Conversation) -> bool:
        return (
            bool(messages) and isinstance(messages[-1], ToolMessage) and (messages[-1].name == name)
        )

    return predicate


def last_tool_result(messages: Conversation) -> str:
    """The text of the last tool result (empty when the last message is not one)."""
    if messages and isinstance(messages[-1], ToolMessage):
        return str(messages[-1].content)
    return ""


def _input_hash(messages: Conversation) -> str:
    """SHA-256 of the conversation's canonical JSON (ASCII text, as it has always been written)."""
    text = canonical_json(
        [message_fingerprint(m) for m in messages],
        ensure_ascii=True,
        allow_nan=True,
        what="the scripted model's input",
    )
    return hashlib.sha256(text.encode()).hexdigest()


def _tokens(text: str) -> int:
    return len(text.split())


class ScriptedChatModel(BaseChatModel):
    """A chat model that answers from a script and logs every call it really makes.

    Args:
        rules: The script, tried in order for each call.
        calls_file: If set, each call appends ``"<pid> <input sha256> <rule>"``
            to this file (flushed and fsynced before the reply is returned).
        model_name: Reported in ``response_metadata``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    rules: list[ScriptRule]
    calls_file: str | None = None
    model_name: str = "scripted"
    bound_tools: list[str] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "tether-scripted"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name, "rules": [r.name for r in self.rules]}

    def bind_tools(
        self,
        tools: Sequence[Any],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """A copy of this model that checks its tool calls against ``tools``."""
        names = [convert_to_openai_tool(t)["function"]["name"] for t in tools]
        return self.model_copy(update={"bound_tools": names})

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        input_hash = _input_hash(messages)
        rule = self._pick(messages)
        reply = self._finish(rule, rule.reply(messages), messages, input_hash)
        self._log_call(input_hash, rule.name)
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def _pick(self, messages: Conversation) -> ScriptRule:
        for rule in self.rules:
            if rule.when(messages):
                return rule
        last = message_fingerprint(messages[-1]) if messages else None
        raise ScriptError(
            f"no rule of the script ({', '.join(r.name for r in self.rules)}) matches a "
            f"conversation ending in {last!r}; add a ScriptRule for it"
        )

    def _finish(
        self, rule: ScriptRule, reply: AIMessage, messages: Conversation, input_hash: str
    ) -> AIMessage:
        if not isinstance(reply, AIMessage):
            raise ScriptError(f"rule {rule.name!r} returned {type(reply).__name__}, not AIMessage")
        calls = []
        for index, call in enumerate(reply.tool_calls):
            if self.bound_tools and call["name"] not in self.bound_tools:
                raise ScriptError(
                    f"rule {rule.name!r} calls tool {call['name']!r}, which is not bound "
                    f"(bound: {', '.join(self.bound_tools)}); fix the script or bind the tool"
                )
            calls.append({**call, "id": call.get("id") or f"call_{input_hash[:12]}_{index}"})
        text_in = " ".join(str(m.content) for m in messages)
        tokens_in, tokens_out = _tokens(text_in), _tokens(str(reply.content)) + len(calls)
        return AIMessage(
            content=reply.content,
            tool_calls=calls,
            id=f"scripted-{input_hash[:24]}",
            response_metadata={"model_name": self.model_name, "script_rule": rule.name},
            usage_metadata={
                "input_tokens": tokens_in,
                "output_tokens": tokens_out,
                "total_tokens": tokens_in + tokens_out,
            },
        )

    def _log_call(self, input_hash: str, rule: str) -> None:
        if self.calls_file is not None:
            append_call(self.calls_file, input_hash, rule)
