"""Streams of a recorded model: what chunks add up to, and a recorded answer as chunks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessageChunk
from langchain_core.messages.utils import message_chunk_to_message

__all__ = ["as_chunks", "assemble"]


def assemble(total: Any) -> Any:
    """The message a stream of chunks adds up to."""
    if isinstance(total, BaseMessageChunk):
        return message_chunk_to_message(total)
    return total


def as_chunks(output: Any) -> Iterator[Any]:
    """A recorded answer as a stream: an AI message becomes one complete chunk."""
    if isinstance(output, AIMessage):
        yield AIMessageChunk(
            content=output.content,
            id=output.id,
            name=output.name,
            additional_kwargs=output.additional_kwargs,
            response_metadata=output.response_metadata,
            usage_metadata=output.usage_metadata,
            tool_call_chunks=[
                {
                    "name": c["name"],
                    "args": json.dumps(c["args"]),
                    "id": c.get("id"),
                    "index": i,
                    "type": "tool_call_chunk",
                }
                for i, c in enumerate(output.tool_calls)
            ],
        )
    else:  # another message, or a structured output: one piece
        yield output
