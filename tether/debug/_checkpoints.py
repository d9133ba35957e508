"""A thread's checkpoints as the debugger sees them, whatever they were read from.

A local checkpointer gives LangGraph's ``StateSnapshot`` objects (through a
graph) or raw checkpoint tuples (without one); a ``tether serve`` gives the
JSON of its history route. All three become :class:`Checkpoint` values, oldest
first, following the thread's current line of parents (a thread that was run
again from an older checkpoint holds other lines too; they are not this run).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

__all__ = ["Checkpoint", "Task", "lineage", "parse_time"]


@dataclass(frozen=True)
class Task:
    """A task that ran (or was due to run) from a checkpoint.

    Attributes:
        id: LangGraph's task id (the same in a fork that keeps the checkpoint ids).
        name: The node.
        error: The error the task raised, if it failed.
        interrupts: The values of the interrupts it raised, if it paused.
    """

    id: str
    name: str
    error: str | None = None
    interrupts: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint of a thread.

    Attributes:
        checkpoint_id: Its id.
        parent_id: The checkpoint it follows, if any.
        step: LangGraph's step number (``-1`` for the input).
        source: ``input``, ``loop``, ``update`` or ``fork``.
        created_at: When it was written (UTC).
        values: The state's channels.
        next: The nodes due to run from it.
        tasks: The tasks due to run from it (with their errors and interrupts).
    """

    checkpoint_id: str
    parent_id: str | None
    step: int
    source: str
    created_at: datetime
    values: Mapping[str, Any]
    next: tuple[str, ...] = ()
    tasks: tuple[Task, ...] = field(default=())

    @property
    def task_ids(self) -> set[str]:
        return {task.id for task in self.tasks}


def parse_time(text: str | None) -> datetime:
    """A checkpoint's ``ts`` or ``created_at`` (ISO 8601) as an aware UTC time."""
    if not text:
        return datetime.fromtimestamp(0, UTC)
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def lineage(checkpoints: Iterable[Checkpoint], head: str | None = None) -> list[Checkpoint]:
    """The line of parents ending at ``head`` (default: the newest checkpoint), oldest first."""
    by_id = {c.checkpoint_id: c for c in checkpoints}
    if not by_id:
        return []
    current: Checkpoint | None = (
        by_id[head] if head is not None else max(by_id.values(), key=lambda c: c.checkpoint_id)
    )
    line: list[Checkpoint] = []
    while current is not None:
        line.append(current)
        current = by_id.get(current.parent_id) if current.parent_id else None
    return line[::-1]


def tasks_from_json(tasks: Sequence[Mapping[str, Any]]) -> tuple[Task, ...]:
    """Tasks as the server's history JSON (and LangGraph's API) shows them."""
    return tuple(
        Task(
            id=str(t["id"]),
            name=str(t.get("name", "")),
            error=t.get("error"),
            interrupts=tuple(i.get("value") for i in t.get("interrupts") or ()),
        )
        for t in tasks
    )
