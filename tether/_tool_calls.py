"""The model's tool call that is running in this context.

A tool invoked by LangGraph's ``ToolNode`` receives the model's tool call
(``{"type": "tool_call", "id": ..., "args": ...}``). Its id keys both a durable
tool's step record and an approval request, so the wrappers that receive it
(``durable_tool``, ``requires_approval``) note it here for the code they run.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["current_tool_call_id", "running_tool_call"]

_current: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "tether_tool_call_id", default=None
)


def current_tool_call_id() -> str | None:
    """The id of the tool call being run, or ``None`` when the tool was called directly."""
    return _current.get()


@contextmanager
def running_tool_call(input: Any) -> Iterator[None]:
    """Note the tool call ``input`` (if it is one) for the duration of the block."""
    call_id = None
    if isinstance(input, dict) and input.get("type") == "tool_call" and input.get("id"):
        call_id = str(input["id"])
    token = _current.set(call_id)
    try:
        yield
    finally:
        _current.reset(token)
