"""A new thread that starts where another one was: its checkpoints and its records.

The checkpoints are copied with their ids (through the saver's own ``aput``,
so any backend works and an encrypting saver encrypts them for the new
thread). LangGraph derives a task's id from its checkpoint's id, so the new
thread's tasks have the ids the old thread's had, and the step records copied
with :func:`tether.steps.copy_steps` are found and replayed. A person's answer
to an interrupt (LangGraph's ``__resume__`` writes) is copied too, so a task
that paused is answered the same way when it runs again.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver

from tether._text import text_problem
from tether.debug._checkpoints import Checkpoint
from tether.debug._entries import root_task
from tether.debug.errors import DebugError
from tether.steps import Step, copy_steps, read_steps

__all__ = ["branch", "check_new_thread", "copy_line", "new_thread_id", "steps_before"]

_RESUME = "__resume__"


def new_thread_id(thread_id: str, what: str) -> str:
    """A fresh thread id that says where it came from: ``<thread>~fork-1a2b3c4d``."""
    return f"{thread_id}~{what}-{uuid.uuid4().hex[:8]}"


def _config(thread_id: str, checkpoint_id: str | None = None) -> RunnableConfig:
    configurable = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


async def copy_line(
    saver: BaseCheckpointSaver[Any], source: str, target: str, line: Sequence[Checkpoint]
) -> None:
    """Copy the checkpoints of ``line`` (oldest first) from ``source`` into ``target``."""
    for checkpoint in line:
        found = await saver.aget_tuple(_config(source, checkpoint.checkpoint_id))
        if found is None:
            raise DebugError(f"checkpoint {checkpoint.checkpoint_id} of {source!r} is gone")
        versions = dict(found.checkpoint["channel_versions"])
        await saver.aput(
            _config(target, checkpoint.parent_id), found.checkpoint, found.metadata, versions
        )
        answers: dict[str, list[tuple[str, Any]]] = defaultdict(list)
        for task_id, channel, value in found.pending_writes or ():
            if channel == _RESUME:
                answers[task_id].append((channel, value))
        for task_id, writes in answers.items():
            await saver.aput_writes(_config(target, checkpoint.checkpoint_id), writes, task_id)


def steps_before(line: Sequence[Checkpoint], steps: Sequence[Step], thread_id: str) -> list[int]:
    """Indexes of the steps whose task (or, in a subgraph, whose root task) ran from one of
    ``line``'s checkpoints."""
    task_ids = set().union(*(c.task_ids for c in line)) if line else set()
    return [s.index for s in steps if root_task(s, thread_id) in task_ids]


async def check_new_thread(saver: BaseCheckpointSaver[Any], target: object) -> str:
    """``target`` if it can name a new thread: a usable id no checkpoint or step has yet.

    A fork or what-if into an existing thread would write one thread's state on
    top of another's (another customer's, another tenant's) and leave both
    wrong.

    Raises:
        DebugError: ``target`` is not a usable id, or the thread exists.
    """
    if not isinstance(target, str) or not target:
        raise DebugError(f"thread_id must be a non-empty string, got {target!r}")
    problem = text_problem(target)
    if problem is not None:
        raise DebugError(f"thread_id {target[:80]!r} {problem}")
    existing = await saver.aget_tuple(_config(target))
    if existing is not None or await read_steps(saver, target):
        raise DebugError(
            f"thread {target[:200]!r} already exists: a fork or what-if makes a new thread; "
            "pass a thread_id no thread has (or none, for a fresh one)"
        )
    return target


async def branch(
    saver: BaseCheckpointSaver[Any],
    source: str,
    target: str,
    line: Sequence[Checkpoint],
    keep: Collection[int],
    *,
    outputs: Mapping[int, Any] | None = None,
) -> None:
    """``target`` (a new thread: see :func:`check_new_thread` for an id a caller named) as
    ``source`` was at the end of ``line``, with the steps ``keep`` recorded."""
    await copy_line(saver, source, target, line)
    await copy_steps(saver, source, target, keep, outputs=outputs)
