"""Per-step timeouts and the running run's deadline watchdog (design §3.8).

A **step timeout** (``Runtime.create(..., step_timeout=s)``, or the worker's
``--step-timeout``) bounds one attempt of one task:

* async nodes get LangGraph's own ``TimeoutPolicy(run_timeout=s)``
  (:func:`with_step_timeout`, on a copy of the graph, for each node without a
  timeout of its own). LangGraph cancels the attempt and raises
  ``NodeTimeoutError``; the graph's ``RetryPolicy`` decides what follows.
  LangGraph tells :func:`attempt_observer` of every timed attempt, which writes
  the ``step.timeout`` event;
* sync nodes cannot be cancelled in-process, so LangGraph refuses timeouts for
  them. The run's guard asks :func:`current_attempt` at each model call and
  tool effect (``model.before``, ``tool.claim``, ``tool.before``) how long the
  running attempt has taken, and raises
  :class:`~tether.boundaries.StepTimeoutError` (an ordinary error, so the
  ``RetryPolicy`` decides too). A sync node that never reaches such a boundary
  cannot be stopped. Nodes inside subgraphs are timed this way too: only the
  root graph's own nodes get a ``TimeoutPolicy``, and a node that runs a
  subgraph gets none (a subgraph of many quick steps is not one slow step).

The **deadline** of a running run is checked at every boundary; the
:func:`deadline_watchdog` cancels a run that reaches no boundary within
:data:`DEADLINE_GRACE` seconds after its deadline (an ``await`` that never
returns), so it still ends ``timeout``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.runnables.config import var_child_runnable_config
from langgraph._internal._constants import (
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_RUNTIME,
    CONFIG_KEY_TIMED_ATTEMPT_OBSERVER,
)
from langgraph.pregel import Pregel
from langgraph.pregel._utils import validate_timeout_supported
from langgraph.types import TimeoutPolicy

from tether.boundaries import RunTimedOutError

if TYPE_CHECKING:
    from tether.runtime.context import EventBuffer, RunContext

__all__ = [
    "DEADLINE_GRACE",
    "OBSERVER_KEY",
    "Attempt",
    "attempt_observer",
    "current_attempt",
    "deadline_watchdog",
    "with_step_timeout",
]

DEADLINE_GRACE = 5.0
"""Seconds a run past its deadline has to reach a boundary before its task is cancelled."""

OBSERVER_KEY = CONFIG_KEY_TIMED_ATTEMPT_OBSERVER
"""The configurable key under which LangGraph looks for a timed-attempt observer."""

_NODE_TIMEOUT = "NodeTimeoutError"


def with_step_timeout(
    graph: Pregel[Any, Any, Any, Any], seconds: float
) -> tuple[Pregel[Any, Any, Any, Any], frozenset[str]]:
    """A copy of ``graph`` whose async nodes without a timeout time out after ``seconds``.

    Returns:
        The copy, and the names of the root graph's nodes LangGraph now times
        itself (its own timeouts included); the others are timed at boundaries.
    """
    nodes = dict(graph.nodes)
    timed: set[str] = set()
    for name, node in graph.nodes.items():
        if node.timeout is not None:
            timed.add(name)
            continue
        if name.startswith("__") or node.subgraphs:
            continue
        if not _cancellable(node.node or node.bound, name):
            continue
        nodes[name] = node.copy({"timeout": TimeoutPolicy(run_timeout=seconds)})
        timed.add(name)
    return graph.copy(update={"nodes": nodes}), frozenset(timed)


def _cancellable(runnable: Any, name: str) -> bool:
    try:
        validate_timeout_supported(runnable, name=name)
    except ValueError:
        return False
    return True


def attempt_observer(events: EventBuffer) -> Callable[[Any], None]:
    """LangGraph's timed-attempt observer: a ``step.timeout`` event for each timed-out attempt."""

    def observe(event: Any) -> None:
        if getattr(event, "event", None) != "finish" or event.error_type != _NODE_TIMEOUT:
            return
        context = event.context
        seconds = context.run_timeout_secs
        if seconds is None:
            seconds = context.idle_timeout_secs
        events.add(
            "step.timeout",
            {
                "node": context.task_name,
                "task_id": context.task_id,
                "attempt": context.attempt,
                "seconds": seconds,
            },
        )

    return observe


@dataclass(frozen=True)
class Attempt:
    """The attempt of a task running in this context, as LangGraph describes it.

    Attributes:
        node: The node's name.
        task_id: The task's id.
        number: 1 for the first attempt, 2 for the first retry, …
        first_started: Wall-clock time at which the task's first attempt started.
        nested: Whether the task runs inside a subgraph.
    """

    node: str
    task_id: str
    number: int
    first_started: float | None
    nested: bool


def current_attempt() -> Attempt | None:
    """The task attempt this code runs in (LangGraph puts it in the context), if any."""
    config = var_child_runnable_config.get()
    if not config:
        return None
    configurable = config.get("configurable") or {}
    info = getattr(configurable.get(CONFIG_KEY_RUNTIME), "execution_info", None)
    if info is None or not getattr(info, "task_id", None):
        return None
    ns = str(configurable.get(CONFIG_KEY_CHECKPOINT_NS) or "")
    return Attempt(
        node=str((config.get("metadata") or {}).get("langgraph_node") or ""),
        task_id=str(info.task_id),
        number=int(info.node_attempt or 1),
        first_started=info.node_first_attempt_time,
        nested="|" in ns,
    )


@asynccontextmanager
async def deadline_watchdog(ctx: RunContext, grace: float = DEADLINE_GRACE) -> AsyncIterator[None]:
    """Cancel the block if the run is still in it ``grace`` seconds after its deadline.

    Raises:
        RunTimedOutError: The watchdog fired (the event ``timeout`` is the caller's).
    """
    if ctx.deadline is None:
        yield
        return
    loop = asyncio.get_running_loop()
    scope = asyncio.timeout_at(loop.time() + (ctx.deadline + grace - time.monotonic()))
    try:
        async with scope:
            yield
    except TimeoutError:
        if not scope.expired():
            raise  # the graph's own TimeoutError
        ctx.stopped_at = "watchdog"
        raise RunTimedOutError(
            f"run {ctx.fence.run_id} passed its deadline and reached no boundary within "
            f"{grace:g} s; it was cancelled"
        ) from None
