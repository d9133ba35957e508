"""Where a gate runs: thread, task namespace, node, checkpointer, read from the node's config."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph._internal._constants import (
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_CHECKPOINTER,
    CONFIG_KEY_TASK_ID,
)
from langgraph.checkpoint.base import BaseCheckpointSaver

from tether._tool_calls import current_tool_call_id
from tether.approvals.errors import ApprovalConfigError

__all__ = ["StepContext", "step_context"]


@dataclass(frozen=True)
class StepContext:
    """The running step, as far as an approval gate needs it."""

    thread_id: str
    checkpoint_ns: str
    task_id: str
    node: str
    checkpointer: BaseCheckpointSaver[Any]
    tool_call_id: str | None


def step_context(config: RunnableConfig) -> StepContext:
    """The gate's context from a node's config.

    Raises:
        ApprovalConfigError: Not inside a graph run with a checkpointer and a thread id.
    """
    conf = config.get("configurable") or {}
    checkpointer = conf.get(CONFIG_KEY_CHECKPOINTER)
    thread_id = conf.get("thread_id")
    if not isinstance(checkpointer, BaseCheckpointSaver) or thread_id is None:
        raise ApprovalConfigError(
            "request_approval must run inside a graph node of a graph compiled with a "
            "checkpointer (tether.open_checkpointer) and invoked with "
            "config={'configurable': {'thread_id': ...}}: an approval is stored state"
        )
    metadata = config.get("metadata") or {}
    return StepContext(
        thread_id=str(thread_id),
        checkpoint_ns=str(conf.get(CONFIG_KEY_CHECKPOINT_NS, "")),
        task_id=str(conf.get(CONFIG_KEY_TASK_ID, "")),
        node=str(metadata.get("langgraph_node", "")),
        checkpointer=checkpointer,
        tool_call_id=current_tool_call_id(),
    )
