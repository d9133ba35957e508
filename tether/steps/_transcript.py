"""Long runs: O(n) storage for the conversation, and a bounded model context.

LangGraph's default ``add_messages`` channel stores the whole transcript again
in every checkpoint, so a run of n steps stores O(n^2) bytes, and reading its
state costs O(n). tether's shape for long runs has two parts:

* :func:`transcript_channel` - a messages channel built on LangGraph's
  ``DeltaChannel``: a checkpoint stores only the messages that step added, plus
  a snapshot every few updates. Each record is written once.
* :class:`ContextBuilder` - once the conversation outgrows ``max_tokens``, the
  older messages are folded into a running summary (by your summarizer model,
  ideally a recorded one) and removed from the state. The model sees the
  summary plus the recent messages; the state, its snapshots and the cost of
  ``get_state`` stay bounded.

The full record of the run is the step log (:func:`tether.steps.read_steps`):
every model answer and tool result, never summarized.

Use them together::

    class AgentState(TypedDict):
        messages: Annotated[list[AnyMessage], transcript_channel()]
        summary: str

    context = ContextBuilder(max_tokens=8_000, summarizer=recorded(small_model))

    async def agent(state: AgentState) -> dict:
        window = await context.abuild(state["messages"], state.get("summary", ""))
        answer = await model.ainvoke(window.messages)
        return {"messages": [*window.removals, answer], **window.update}
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import (
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.runnables import Runnable
from langgraph.channels.delta import DeltaChannel
from langgraph.graph.message import add_messages

__all__ = ["ContextBuilder", "ContextWindow", "transcript_channel"]

SUMMARY_PREFIX = "Summary of the earlier conversation:\n"
_SUMMARIZE = (
    "Summarize the conversation below for the assistant that continues it. Keep every fact, "
    "decision, identifier and open question it needs; drop pleasantries.\n\n"
    "Summary so far:\n{summary}\n\nNew messages:\n{messages}"
)


def _fold(state: list[AnyMessage], writes: Sequence[Any]) -> list[AnyMessage]:
    # One add_messages per write, in order: the same result whether LangGraph
    # replays the writes one by one or in a batch (DeltaChannel's requirement).
    for write in writes:
        state = add_messages(state, write)  # type: ignore[arg-type,assignment]
    return state


def transcript_channel(snapshot_every: int = 10) -> DeltaChannel[list[AnyMessage]]:
    """A messages channel that stores each step's new messages once.

    Use as ``messages: Annotated[list[AnyMessage], transcript_channel()]``. It
    accepts what ``add_messages`` accepts (messages, ``RemoveMessage``).

    Args:
        snapshot_every: Write the whole (bounded) message list every this many
            updates, so reading the state replays at most this many writes.
    """
    return DeltaChannel(_fold, list, snapshot_frequency=snapshot_every)


@dataclass(frozen=True)
class ContextWindow:
    """What :class:`ContextBuilder` produced for one model call.

    Attributes:
        messages: The model's input: leading system messages, the summary, the
            recent messages.
        removals: ``RemoveMessage`` for each message folded into the summary;
            return them in the node's ``messages`` update.
        summary: The summary after this call (unchanged if nothing was folded).
        update: ``{"summary": ...}`` when the summary changed, else ``{}``.
    """

    messages: list[BaseMessage]
    removals: list[RemoveMessage] = field(default_factory=list)
    summary: str = ""
    update: dict[str, Any] = field(default_factory=dict)


@dataclass
class ContextBuilder:
    """Builds a model's input from a summary plus the recent messages.

    Args:
        max_tokens: Above this many tokens, older messages are summarized.
        summarizer: A chat model (wrap it with ``recorded``), or a function
            ``(previous_summary, messages) -> str``.
        keep_recent_tokens: How much recent conversation stays verbatim
            (default: half of ``max_tokens``).
        token_counter: Counts a list of messages' tokens (default: LangChain's
            approximate counter).
    """

    max_tokens: int
    summarizer: Runnable[Any, Any] | Callable[[str, list[BaseMessage]], str]
    keep_recent_tokens: int | None = None
    token_counter: Callable[[Sequence[BaseMessage]], int] = count_tokens_approximately

    def __post_init__(self) -> None:
        if self.max_tokens <= 0:
            raise ValueError(f"max_tokens must be positive, got {self.max_tokens}")
        keep = self.keep_recent_tokens
        if keep is not None and not 0 < keep < self.max_tokens:
            raise ValueError(
                f"keep_recent_tokens must be between 0 and max_tokens ({self.max_tokens}), "
                f"got {keep}"
            )

    @staticmethod
    def _system(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        return [m for m in messages[:1] if isinstance(m, SystemMessage)]

    def _split(self, messages: Sequence[BaseMessage]) -> tuple[list[BaseMessage], ...] | None:
        """(system, older, recent), or None when everything fits."""
        system = self._system(messages)
        rest = list(messages[len(system) :])
        if self.token_counter([*system, *rest]) <= self.max_tokens:
            return None
        budget = self.keep_recent_tokens or self.max_tokens // 2
        start, used = len(rest), 0
        while start > 0 and used + self.token_counter([rest[start - 1]]) <= budget:
            used += self.token_counter([rest[start - 1]])
            start -= 1
        # Never start on a tool result: its call would be summarized away.
        while start < len(rest) and isinstance(rest[start], ToolMessage):
            start += 1
        if start == 0:
            return None
        return system, rest[:start], rest[start:]

    def _plan(
        self, messages: Sequence[BaseMessage], summary: str
    ) -> ContextWindow | tuple[list[BaseMessage], list[BaseMessage], list[BaseMessage]]:
        split = self._split(messages)
        if split is None:
            system = self._system(messages)
            return ContextWindow(
                _compose(system, summary, messages[len(system) :]), summary=summary
            )
        system, older, recent = split
        return system, older, recent

    def _prompt(self, summary: str, older: list[BaseMessage]) -> list[BaseMessage]:
        lines = "\n".join(f"{m.type}: {m.content}" for m in older)
        return [HumanMessage(_SUMMARIZE.format(summary=summary or "(none)", messages=lines))]

    def build(self, messages: Sequence[BaseMessage], summary: str = "") -> ContextWindow:
        """The model input for ``messages`` given the summary so far (sync)."""
        plan = self._plan(messages, summary)
        if isinstance(plan, ContextWindow):
            return plan
        system, older, recent = plan
        if isinstance(self.summarizer, Runnable):
            answer = self.summarizer.invoke(self._prompt(summary, older))
            new_summary = str(getattr(answer, "content", answer))
        else:
            new_summary = self.summarizer(summary, older)
        return _folded(system, older, recent, new_summary)

    async def abuild(self, messages: Sequence[BaseMessage], summary: str = "") -> ContextWindow:
        """The model input for ``messages`` given the summary so far (async)."""
        plan = self._plan(messages, summary)
        if isinstance(plan, ContextWindow):
            return plan
        system, older, recent = plan
        if isinstance(self.summarizer, Runnable):
            answer = await self.summarizer.ainvoke(self._prompt(summary, older))
            new_summary = str(getattr(answer, "content", answer))
        else:
            new_summary = self.summarizer(summary, older)
        return _folded(system, older, recent, new_summary)


def _compose(
    system: list[BaseMessage], summary: str, recent: Sequence[BaseMessage]
) -> list[BaseMessage]:
    head: list[BaseMessage] = [SystemMessage(SUMMARY_PREFIX + summary)] if summary else []
    return [*system, *head, *recent]


def _folded(
    system: list[BaseMessage], older: list[BaseMessage], recent: list[BaseMessage], summary: str
) -> ContextWindow:
    removals = [RemoveMessage(id=m.id) for m in older if m.id]
    return ContextWindow(
        messages=_compose(system, summary, recent),
        removals=removals,
        summary=summary,
        update={"summary": summary},
    )
