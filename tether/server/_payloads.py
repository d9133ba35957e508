"""Request bodies of the routes, as the SDK sends them (unknown keys are ignored).

Every JSON value in a body must be one the server can store and send back:
numbers within the 64-bit integer range (PostgreSQL stores ``1e30`` as an
integer of 31 digits) and finite (a body's ``NaN`` or ``1e999`` is not JSON
either); text that is UTF-8 (JSON's ``\\ud800`` escape decodes to a lone
surrogate, which no store can write); nesting at most :data:`MAX_DEPTH` deep;
and ids, metadata, config and context hold no NUL character (the run store
refuses them on every backend, as PostgreSQL cannot hold them). A body holding
another is refused (422), naming where, before anything is stored.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tether._text import text_problem
from tether.server._errors import ApiError

__all__ = [
    "BIGGEST_COUNT",
    "MAX_DEPTH",
    "AssistantCreate",
    "AssistantLatest",
    "AssistantSearch",
    "AssistantUpdate",
    "AssistantVersions",
    "CancelMany",
    "HistoryRequest",
    "ReplayRequest",
    "RunCreate",
    "StateAtCheckpoint",
    "StateUpdate",
    "StorableBody",
    "ThreadCreate",
    "ThreadPrune",
    "ThreadSearch",
    "ThreadUpdate",
    "refusal",
]


BIGGEST_COUNT = 2**63 - 1
"""The largest limit, offset or version a database takes (a larger one answered 500)."""
_SMALLEST = -(2**63)
_LARGEST = 2**64 - 1  # what JSON values are serialized with (orjson) holds


def _bad_number(value: int | float, path: str) -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return f"{path}: {value} is not a JSON number"
    if _SMALLEST <= value <= _LARGEST:
        return None
    kind = "integer" if isinstance(value, int) else "number"
    return f"{path}: the {kind} {value} is outside the 64-bit integer range"


MAX_DEPTH = 100
"""How deeply a body's JSON may nest: deeper values cannot be sent back (the encoder stops)."""


def _text(value: str, path: str, nul: bool) -> str | None:
    problem = text_problem(value, nul=nul)
    return None if problem is None else f"{path} {problem}"


def _key_text(key: str, path: str, nul: bool) -> str | None:
    if nul and "\x00" in key:
        return f"{path} has a key with a NUL character"
    if _text(key, path, nul=False) is not None:
        return f"{path} has a key that is not valid Unicode text (a lone surrogate)"
    return None


def refusal(value: Any, path: str, *, nul: bool = False, depth: int = 0) -> str | None:
    """Why ``value`` cannot be stored and sent back, as a message naming where; else ``None``.

    Refused: numbers outside the 64-bit range or not finite, text that is not
    UTF-8 (a lone surrogate, which JSON's ``\\ud800`` escape can carry), nesting
    deeper than :data:`MAX_DEPTH`, and with ``nul`` a NUL character in text or keys.
    """
    if isinstance(value, str):
        return _text(value, path, nul)
    if isinstance(value, dict | list):
        return _container(value, path, nul, depth)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _bad_number(value, path)
    return None


def _container(value: dict[Any, Any] | list[Any], path: str, nul: bool, depth: int) -> str | None:
    if depth >= MAX_DEPTH:
        return f"{path} is nested more than {MAX_DEPTH} levels deep"
    items: Any
    if isinstance(value, dict):
        for key in value:
            found = _key_text(key, path, nul) if isinstance(key, str) else None
            if found is not None:
                return found
        items = ((f"{path}.{k}", v) for k, v in value.items())
    else:
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    for where, item in items:
        found = refusal(item, where, nul=nul, depth=depth + 1)
        if found is not None:
            return found
    return None


# Fields whose text (keys too) may not hold a NUL character.
_NO_NUL = frozenset(
    {
        "assistant_id",
        "before",
        "checkpoint",
        "checkpoint_id",
        "config",
        "context",
        "graph_id",
        "ids",
        "metadata",
        "run_ids",
        "thread_id",
        "thread_ids",
    }
)


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")

    @model_validator(mode="after")
    def _storable(self) -> _Body:
        for name in type(self).model_fields:
            found = refusal(getattr(self, name), name, nul=name in _NO_NUL)
            if found is not None:
                # not a ValueError: the answer's detail is this message, as for the
                # runtime's refusals, which is what the SDK shows
                raise ApiError(422, found)
        return self


StorableBody = _Body
"""A request body refused (422, naming where) if it holds what :func:`refusal` refuses."""


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


class SuperstepUpdate(BaseModel):
    """One update of a superstep: ``values`` (or a ``command``) as node ``as_node`` wrote it."""

    model_config = ConfigDict(extra="forbid")

    values: dict[str, Any] | list[Any] | None = None
    command: dict[str, Any] | None = None
    as_node: str


class Superstep(BaseModel):
    """A superstep of a new thread: updates applied together, as one step's writes."""

    model_config = ConfigDict(extra="forbid")

    updates: list[SuperstepUpdate] = Field(min_length=1)


class ThreadCreate(_Body):
    """``POST /threads``."""

    thread_id: str | None = None
    metadata: dict[str, Any] | None = None
    if_exists: Literal["raise", "do_nothing"] = "raise"
    supersteps: list[Superstep] | None = Field(default=None, max_length=1000)
    ttl: Any = None


class ThreadSearch(_Body):
    """``POST /threads/search`` and ``/threads/count``."""

    metadata: dict[str, Any] | None = None
    values: dict[str, Any] | None = None
    ids: list[str] | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None
    limit: int = Field(10, le=BIGGEST_COUNT)
    offset: int = Field(0, le=BIGGEST_COUNT)
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

    limit: int = Field(10, ge=1, le=BIGGEST_COUNT)
    before: str | dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    checkpoint: dict[str, Any] | None = None


class ReplayRequest(_Body):
    """``POST /threads/{id}/replay`` (tether's own): replay up to the super-step starting at
    checkpoint ``upto`` (default: all)."""

    upto: str | None = None


class ForkRequest(_Body):
    """``POST /threads/{id}/fork`` (tether's own): a new thread that starts where timeline
    step ``step`` started, or at checkpoint ``checkpoint_id`` (one of the two), with
    ``update`` written first as ``as_node``; ``thread_id`` names it."""

    checkpoint_id: str | None = None
    step: int | None = Field(None, ge=0, le=BIGGEST_COUNT)
    update: dict[str, Any] | list[Any] | None = None
    as_node: str | None = None
    thread_id: str | None = None


class WhatIfRequest(_Body):
    """``POST /threads/{id}/what_if`` (tether's own): timeline step ``step`` (a recorded
    model answer or tool result) replaced by ``output``, run on in a new thread."""

    step: int = Field(ge=0, le=BIGGEST_COUNT)
    output: Any
    thread_id: str | None = None


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
    limit: int = Field(10, le=BIGGEST_COUNT)
    offset: int = Field(0, le=BIGGEST_COUNT)
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
    limit: int = Field(10, le=BIGGEST_COUNT)
    offset: int = Field(0, le=BIGGEST_COUNT)


class AssistantLatest(_Body):
    """``POST /assistants/{id}/latest``."""

    version: int = Field(le=BIGGEST_COUNT)
