"""What changed between two states, channel by channel; message lists as messages.

Messages are compared by what they say (type, content, tool calls, the tool
call they answer), not by id: a replayed run gives its tool messages fresh
ids, and the conversation is still the same one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage

from tether.debug._render import as_message, html_table, message_line, short, text_table

__all__ = ["ChannelChange", "StateDiff", "diff_states", "message_key", "same_value"]


def message_key(message: BaseMessage) -> tuple[Any, ...]:
    """What a message says, without its id or provider metadata."""
    calls = tuple(
        (c.get("name"), repr(sorted((c.get("args") or {}).items())), c.get("id"))
        for c in getattr(message, "tool_calls", None) or ()
    )
    content = message.content if isinstance(message.content, str) else repr(message.content)
    return (message.type, content, calls, getattr(message, "tool_call_id", None))


def _messages(value: Any) -> list[BaseMessage] | None:
    if not isinstance(value, Sequence) or isinstance(value, str) or not value:
        return None
    found = [as_message(v) for v in value]
    return None if any(m is None for m in found) else found  # type: ignore[return-value]


def same_value(a: Any, b: Any) -> bool:
    """Whether two channel values are the same (message lists compared by content)."""
    ma, mb = _messages(a), _messages(b)
    if ma is not None and mb is not None:
        return [message_key(m) for m in ma] == [message_key(m) for m in mb]
    return bool(a == b)


@dataclass(frozen=True)
class ChannelChange:
    """One channel that differs.

    Attributes:
        channel: Its name.
        before: The value in the first state (``None`` if absent).
        after: The value in the second state (``None`` if absent).
        added: Messages in the second state only (message channels).
        removed: Messages in the first state only (message channels).
    """

    channel: str
    before: Any
    after: Any
    added: tuple[BaseMessage, ...] = ()
    removed: tuple[BaseMessage, ...] = ()

    def lines(self) -> list[str]:
        if self.added or self.removed:
            return [f"- {message_line(m)}" for m in self.removed] + [
                f"+ {message_line(m)}" for m in self.added
            ]
        return [f"- {short(self.before)}", f"+ {short(self.after)}"]


@dataclass(frozen=True)
class StateDiff:
    """The changes from one state to another, per channel.

    Attributes:
        a: Where the first state is (``step 3`` or a checkpoint id).
        b: Where the second state is.
        changes: One entry per channel that differs.
    """

    a: str
    b: str
    changes: tuple[ChannelChange, ...] = field(default=())

    @property
    def channels(self) -> list[str]:
        return [c.channel for c in self.changes]

    def __bool__(self) -> bool:
        return bool(self.changes)

    def __str__(self) -> str:
        if not self.changes:
            return f"{self.a} → {self.b}: no change"
        out = [f"{self.a} → {self.b}"]
        for change in self.changes:
            out.append(f"{change.channel}:")
            out.extend(f"  {line}" for line in change.lines())
        return "\n".join(out)

    def to_text(self) -> str:
        rows = [(c.channel, line) for c in self.changes for line in c.lines()]
        return text_table(("channel", "change"), rows)

    def _repr_html_(self) -> str:
        rows = [(c.channel, line) for c in self.changes for line in c.lines()]
        return html_table(("channel", "change"), rows, caption=f"{self.a} → {self.b}")


def _message_change(channel: str, a: Any, b: Any) -> ChannelChange | None:
    ma, mb = _messages(a) or [], _messages(b) or []
    if (a and not ma) or (b and not mb):
        return None
    keys_a, keys_b = [message_key(m) for m in ma], [message_key(m) for m in mb]
    common = 0
    while common < min(len(ma), len(mb)) and keys_a[common] == keys_b[common]:
        common += 1
    return ChannelChange(channel, a, b, tuple(mb[common:]), tuple(ma[common:]))


def diff_states(a: Mapping[str, Any], b: Mapping[str, Any], *, at_a: str, at_b: str) -> StateDiff:
    """Channel by channel, what differs from ``a`` to ``b``."""
    changes = []
    for channel in sorted(set(a) | set(b)):
        before, after = a.get(channel), b.get(channel)
        if same_value(before, after):
            continue
        change = _message_change(channel, before, after)
        changes.append(change or ChannelChange(channel, before, after))
    return StateDiff(at_a, at_b, tuple(changes))
