"""What the step log says about recorded model calls, for counting re-asked calls."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from tether.steps import read_steps

__all__ = ["recorded_model_calls"]


async def recorded_model_calls(saver: BaseCheckpointSaver[Any], thread_id: str) -> int:
    """How many model calls of ``thread_id`` have their result in the step log."""
    return sum(1 for step in await read_steps(saver, thread_id) if step.kind == "model")
