"""Request bodies of the routes, as the SDK sends them (unknown keys are ignored).

Every JSON value in a body must be one the server can store and send back:
integers within 64 bits and finite numbers (a body's ``NaN`` or ``1e999`` is
not JSON either). A body holding another is refused (422), naming where.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

__all__ = [
    "AssistantCreate",
    "AssistantLatest",
    "AssistantSearch",
    "AssistantUpdate",
    "AssistantVersions",
    "CancelMany",
    "HistoryRequest",
    "RunCreate",
    "StateAtCheckpoint",
    "StateUpdate",
    "ThreadCreate",
    "ThreadPrune",
    "ThreadSearch",
    "ThreadUpdate",
]


_SMALLEST = -(2**63)
_LARGEST = 2**64 - 1  # what JSON values are serialized with (orjson) holds


def _unstorable(value: Any, path: str) -> str | None:
    """Where ``value`` holds a number the server cannot store and send back, as a message."""
    if isinstance(value, int) and not isinstance(value, bool):
        if _SMALLEST <= value <= _LARGEST:
            return None
        return f"{path}: the integer {value} is outside the 64-bit range"
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{path}: {value} is not a JSON number"
    items: Any = ()
    if isinstance(value, dict):
        items = ((f"{path}.{k}", v) for k, v in value.items())
    elif isinstance(value, list):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    for where, item in items:
        found = _unstorable(item, where)
        if found is not None:
            return found
    return None


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")

    @model_validator(mode="after")
    def _storable(self) -> _Body:
        for name in type(self).model_fields:
            found = _unstorable(getattr(self, name), name)
            if found is not None:
                raise ValueError(found)
        return self


class RunCreate(_Body):
    """``POST /threads/{id}/runs[/stream|/wait]`` and ``POST /runs[/stream|/wait]``."""

    assistant_id: str
    input: Any = None
    command: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    stream_mode: str | list[str] = "values"
    stream_subgraphs: bool = False
    stream_resumable: bool = False
    interrupt_before: str | list[str] | None = None
    interrupt_after: str | list[str] | None = None
    checkpoint_id: str | None = None
    checkpoint: dict[str, Any] | None = None
    checkpoint_during: bool | None = None
    multitask_strategy: str = "enqueue"
    if_not_exists: str = "reject"
    on_completion: str | None = None
    on_disconnect: Literal["cancel", "continue"] | None = None
    after_seconds: float | None = None
    durability: str | None = None
    webhook: str | None = None
    feedback_keys: list[str] | None = None


class CancelMany(_Body):
    """``POST /runs/cancel``."""

    thread_id: str | None = None
    run_ids: list[str] | None = None
    status: Literal["pending", "running", "all"] | None = None
    assistant_id: str | None = None


class ThreadCreate(_Body):
    """``POST /threads``."""

    thread_id: str | None = None
    metadata: dict[str, Any] | None = None
    if_exists: Literal["raise", "do_nothing"] = "raise"
    supersteps: list[Any] | None = None
    ttl: Any = None


class ThreadSearch(_Body):
    """``POST /threads/search`` and ``/threads/count``."""

    metadata: dict[str, Any] | None = None
    values: dict[str, Any] | None = None
    ids: list[str] | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None
    limit: int = 10
    offset: int = 0
    sort_by: Literal["thread_id", "status", "created_at", "updated_at", "state_updated_at"] = (
        "updated_at"
    )
    sort_order: Literal["asc", "desc"] = "desc"
    select: list[str] | None = None


class ThreadUpdate(_Body):
    """``PATCH /threads/{id}``."""

    metadata: dict[str, Any]
    ttl: Any = None


class StateUpdate(_Body):
    """``POST /threads/{id}/state``."""

    values: dict[str, Any] | list[Any] | None = None
    as_node: str | None = None
    checkpoint: dict[str, Any] | None = None
    checkpoint_id: str | None = None


class ThreadPrune(_Body):
    """``POST /threads/prune``."""

    thread_ids: list[str]
    strategy: Literal["delete", "keep_latest"] = "delete"


class StateAtCheckpoint(_Body):
    """``POST /threads/{id}/state/checkpoint``."""

    checkpoint: dict[str, Any]
    subgraphs: bool = False


class HistoryRequest(_Body):
    """``POST /threads/{id}/history``."""

    limit: int = 10
    before: str | dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    checkpoint: dict[str, Any] | None = None


class AssistantCreate(_Body):
    """``POST /assistants``."""

    graph_id: str
    assistant_id: str | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    if_exists: Literal["raise", "do_nothing"] = "raise"
    name: str | None = None
    description: str | None = None


class AssistantSearch(_Body):
    """``POST /assistants/search`` and ``/assistants/count``."""

    metadata: dict[str, Any] | None = None
    graph_id: str | None = None
    name: str | None = None
    limit: int = 10
    offset: int = 0
    sort_by: Literal["assistant_id", "graph_id", "name", "created_at", "updated_at"] | None = None
    sort_order: Literal["asc", "desc"] | None = None
    select: (
        list[
            Literal[
                "assistant_id",
                "graph_id",
                "name",
                "description",
                "config",
                "context",
                "created_at",
                "updated_at",
                "metadata",
                "version",
            ]
        ]
        | None
    ) = None


class AssistantUpdate(_Body):
    """``PATCH /assistants/{id}``."""

    graph_id: str | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    name: str | None = None
    description: str | None = None


class AssistantVersions(_Body):
    """``POST /assistants/{id}/versions``."""

    metadata: dict[str, Any] | None = None
    limit: int = 10
    offset: int = 0


class AssistantLatest(_Body):
    """``POST /assistants/{id}/latest``."""

    version: int
