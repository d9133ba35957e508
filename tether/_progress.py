"""Is this run finished? The one check tether resumes by.

LangGraph stores a finished task's writes and the step's next checkpoint as two
separate jobs. A process killed between them leaves a thread whose newest
checkpoint still lists the step's tasks, each already holding its writes.
``get_state`` then reports ``next == ()`` (``next`` leaves out tasks whose
writes are saved), so the run *looks* finished, yet ``invoke(None)`` would
apply those writes, save the checkpoint and go on to the next node. Code that
resumes "if ``state.next``" silently abandons such a run.

The same holds for a ``Command(goto=...)`` (or an update that triggers a node)
killed after its writes were stored on a finished checkpoint and before the
step it starts was checkpointed: no task is listed at all, but the stored
writes trigger one on the next invocation.

:func:`unfinished` reads what LangGraph's loop reads when it resumes, so it sees
both cases: the newest checkpoint has tasks (pending, interrupted, failed, or
finished but not yet folded into a checkpoint), or writes stored against it
with no task (``NULL_TASK_ID``, a ``Command``'s) that trigger a node or carry a
``Send``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph._internal._constants import CONFIG_KEY_CHECKPOINTER, NULL_TASK_ID, TASKS
from langgraph.checkpoint.base import BaseCheckpointSaver, PendingWrite
from langgraph.pregel import Pregel

from tether.errors import ConfigurationError

__all__ = ["aunfinished", "unfinished"]


def _checked(graph: Any, config: RunnableConfig) -> BaseCheckpointSaver[Any]:
    """The saver the thread's checkpoints are read from, after checking the arguments."""
    if not isinstance(graph, Pregel):
        raise ConfigurationError(
            f"unfinished() takes the compiled graph that runs the thread, got "
            f"{type(graph).__name__}; pass builder.compile(checkpointer=saver)"
        )
    configurable = (config or {}).get("configurable") or {}
    if configurable.get("thread_id") is None:
        raise ConfigurationError(
            "unfinished() needs the run's thread: config={'configurable': {'thread_id': ...}}"
        )
    if configurable.get("checkpoint_ns"):
        raise ConfigurationError(
            "unfinished() checks a whole run, from its root graph; drop checkpoint_ns "
            f"({configurable['checkpoint_ns']!r}) from the config"
        )
    saver = configurable.get(CONFIG_KEY_CHECKPOINTER, graph.checkpointer)
    if not isinstance(saver, BaseCheckpointSaver):
        raise ConfigurationError(
            "unfinished() needs a graph compiled with a checkpointer: "
            "builder.compile(checkpointer=saver)"
        )
    return saver


def _triggering(graph: Pregel[Any, Any, Any, Any]) -> set[str]:
    """Channels whose update starts a task: every node's triggers, and Sends."""
    channels = {TASKS}
    for node in graph.nodes.values():
        channels.update(node.triggers)
    return channels


def _starts_a_task(graph: Pregel[Any, Any, Any, Any], writes: Iterable[PendingWrite]) -> bool:
    # The loop applies NULL_TASK_ID writes before it plans the next step
    # (PregelLoop._first); get_state plans the tasks before applying them, so
    # such writes never show up as a task in the snapshot.
    channels = _triggering(graph)
    return any(task == NULL_TASK_ID and channel in channels for task, channel, _ in writes)


def _latest(config: RunnableConfig) -> RunnableConfig:
    # The newest checkpoint of the thread, whatever checkpoint_id the caller's config carries.
    configurable = {
        k: v for k, v in (config.get("configurable") or {}).items() if k != "checkpoint_id"
    }
    return {**config, "configurable": configurable}


def unfinished(graph: Any, config: RunnableConfig) -> bool:
    """Whether the run on ``config``'s thread has anything left to do.

    Use it instead of ``graph.get_state(config).next`` to decide whether to
    resume: ``next`` is empty for a run killed after a step's writes were
    stored and before its checkpoint was, which ``invoke(None)`` would finish.

    A run paused at an ``interrupt`` (waiting on a person) or stopped by an
    error is unfinished too; ``get_state(config).interrupts`` tells them apart.
    A thread with no checkpoint is not unfinished: start it with its input.
    The answer is about the thread's newest checkpoint, whatever
    ``checkpoint_id`` the config names.

    Args:
        graph: The compiled graph that runs the thread (with its checkpointer).
        config: The run's config; ``configurable.thread_id`` names the thread.

    Returns:
        ``True`` if invoking the graph again (``invoke(None, config)``, or a
        ``Command(resume=...)`` for pending interrupts) has work to do.

    Raises:
        ConfigurationError: ``graph`` is not a compiled graph with a
            checkpointer, or ``config`` names no thread.
    """
    saver = _checked(graph, config)
    snapshot = graph.get_state(_latest(config))
    if snapshot.tasks or snapshot.metadata is None:  # work listed, or no checkpoint at all
        return bool(snapshot.tasks)
    saved = saver.get_tuple(snapshot.config)
    return saved is not None and _starts_a_task(graph, saved.pending_writes or ())


async def aunfinished(graph: Any, config: RunnableConfig) -> bool:
    """Async twin of :func:`unfinished`."""
    saver = _checked(graph, config)
    snapshot = await graph.aget_state(_latest(config))
    if snapshot.tasks or snapshot.metadata is None:
        return bool(snapshot.tasks)
    saved = await saver.aget_tuple(snapshot.config)
    return saved is not None and _starts_a_task(graph, saved.pending_writes or ())
