"""What a message means, apart from the ids storage gives it."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

__all__ = ["message_fingerprint"]


def message_fingerprint(message: BaseMessage) -> dict[str, Any]:
    """The parts of a message that carry meaning: ids assigned by storage are left out."""
    data: dict[str, Any] = {"type": message.type, "content": message.content}
    if isinstance(message, AIMessage):
        data["tool_calls"] = [
            {"name": c["name"], "args": c["args"], "id": c.get("id")} for c in message.tool_calls
        ]
    if isinstance(message, ToolMessage):
        data["tool_call_id"] = message.tool_call_id
        data["name"] = message.name
    return data
