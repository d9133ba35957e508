"""tether's records as the LangGraph Agent Server shows them (design §2.12), JSON-ready.

Every function returns plain JSON data (``dict``/``list``/``str``/numbers),
serialised as the server's ``serde.py`` does (:func:`tether.runtime.streaming.to_json`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tether.runtime import Run, Thread, models, streaming

__all__ = [
    "LANGGRAPH_EVENTS",
    "assistant_json",
    "assistant_version_json",
    "empty_state",
    "event_mode",
    "run_json",
    "state_json",
    "thread_json",
]

# The SSE event names the server sends (design §2.8); tether's own kinds are dotted
# (``run.created``) or are not in this set (``interrupt``, ``timeout``).
LANGGRAPH_EVENTS = frozenset(
    {
        "metadata",
        "values",
        "updates",
        "messages",
        "messages/metadata",
        "messages/partial",
        "messages/complete",
        "custom",
        "debug",
        "tasks",
        "checkpoints",
        "events",
        "error",
        "feedback",
    }
)
_ALWAYS = frozenset({"metadata", "error", "feedback"})


def event_mode(kind: str) -> str | None:
    """The stream mode an event belongs to; ``""`` for events every stream gets;
    ``None`` for tether's own events (never sent over SSE).

    ``values|sub`` (a subgraph's event) belongs to ``values``; ``messages/partial``
    to ``messages``; the bare ``messages`` event to ``messages-tuple``.
    """
    base = kind.split("|", 1)[0]
    if base not in LANGGRAPH_EVENTS:
        return None
    if base in _ALWAYS:
        return ""
    if base.startswith("messages/"):
        return "messages"
    if base == "messages":
        return "messages-tuple"
    return base


def run_json(run: Run) -> dict[str, Any] | None:
    """The run as LangGraph's ``Run``; ``None`` for a rolled-back run (LangGraph deleted it)."""
    return run.as_langgraph()


def assistant_json(assistant: models.Assistant) -> dict[str, Any]:
    """LangGraph's ``Assistant``."""
    return {
        "assistant_id": assistant.assistant_id,
        "graph_id": assistant.graph_id,
        "config": streaming.to_json(dict(assistant.config)),
        "context": streaming.to_json(dict(assistant.context)),
        "metadata": streaming.to_json(dict(assistant.metadata)),
        "version": assistant.version,
        "name": assistant.name,
        "description": assistant.description,
        "created_at": assistant.created_at.isoformat(),
        "updated_at": assistant.updated_at.isoformat(),
    }


def assistant_version_json(assistant: models.Assistant) -> dict[str, Any]:
    """LangGraph's ``AssistantVersion`` (an ``Assistant`` without ``updated_at``)."""
    shown = assistant_json(assistant)
    del shown["updated_at"]
    return shown


def thread_json(thread: Thread) -> dict[str, Any]:
    """LangGraph's ``Thread``."""
    shown: dict[str, Any] = {
        "thread_id": thread.thread_id,
        "created_at": thread.created_at.isoformat(),
        "updated_at": thread.updated_at.isoformat(),
        "state_updated_at": thread.state_updated_at.isoformat(),
        "metadata": streaming.to_json(dict(thread.metadata)),
        "config": streaming.to_json(dict(thread.config)),
        "status": thread.status,
        "values": streaming.to_json(thread.values) if thread.values is not None else None,
        "interrupts": streaming.to_json(dict(thread.interrupts)),
    }
    if thread.error is not None:
        shown["error"] = streaming.to_json(dict(thread.error))
    return shown


def _checkpoint(config: Mapping[str, Any] | None) -> dict[str, Any] | None:
    configurable = (config or {}).get("configurable") or {}
    if not configurable.get("checkpoint_id"):
        return None
    return {
        "thread_id": configurable.get("thread_id"),
        "checkpoint_ns": configurable.get("checkpoint_ns") or "",
        "checkpoint_id": configurable.get("checkpoint_id"),
        "checkpoint_map": configurable.get("checkpoint_map"),
    }


def _interrupts(items: Sequence[Any]) -> list[dict[str, Any]]:
    return [{"value": getattr(i, "value", None), "id": getattr(i, "id", None)} for i in items]


def _task(task: Any) -> dict[str, Any]:
    state = task.state
    nested = None
    checkpoint = None
    if isinstance(state, Mapping):  # a subgraph's config: where its state is
        # as LangGraph's server shows it: the config's ``configurable`` (thread and the
        # subgraph's namespace; a checkpoint id only once the subgraph has one)
        checkpoint = dict(state.get("configurable") or {}) or None
    elif state is not None:  # a StateSnapshot (``subgraphs=True``)
        nested = _state(state)
    error = task.error
    return {
        "id": task.id,
        "name": task.name,
        "path": list(task.path),
        "error": None if error is None else f"{type(error).__name__}({error})",
        "interrupts": _interrupts(task.interrupts),
        "checkpoint": checkpoint,
        "state": nested,
        "result": getattr(task, "result", None),
    }


def _state(snapshot: Any) -> dict[str, Any]:
    checkpoint = _checkpoint(snapshot.config)
    parent = _checkpoint(snapshot.parent_config)
    return {
        "values": snapshot.values,
        "next": list(snapshot.next),
        "tasks": [_task(t) for t in snapshot.tasks],
        "metadata": snapshot.metadata,
        "created_at": snapshot.created_at,
        "checkpoint": checkpoint,
        "parent_checkpoint": parent,
        "interrupts": _interrupts(snapshot.interrupts),
        "checkpoint_id": checkpoint and checkpoint["checkpoint_id"],
        "parent_checkpoint_id": parent and parent["checkpoint_id"],
    }


def state_json(snapshot: Any) -> dict[str, Any]:
    """LangGraph's ``ThreadState`` for a ``StateSnapshot``."""
    shown: dict[str, Any] = streaming.to_json(_state(snapshot))
    return shown


def empty_state(thread_id: str) -> dict[str, Any]:
    """The state of a thread no run has written yet."""
    return {
        "values": {},
        "next": [],
        "tasks": [],
        "metadata": {},
        "created_at": None,
        "checkpoint": {
            "thread_id": thread_id,
            "checkpoint_ns": "",
            "checkpoint_id": None,
            "checkpoint_map": None,
        },
        "parent_checkpoint": None,
        "interrupts": [],
        "checkpoint_id": None,
        "parent_checkpoint_id": None,
    }
