"""What a thread has in the checkpointer, read the way a test checks it."""

from __future__ import annotations

from typing import Any

from tether import open_checkpointer


async def thread_values(url: str, thread_id: str) -> dict[str, Any]:
    """The channel values of the thread's latest checkpoint (it must have one)."""
    async with open_checkpointer(url) as saver:
        item = await saver.aget_tuple({"configurable": {"thread_id": thread_id}})
        assert item is not None, f"thread {thread_id} has no checkpoint"
        return dict(item.checkpoint["channel_values"])
