"""Where a recorded call happens: the running node's thread, namespace, task and store.

Everything comes from the node's config, which LangGraph hands to every
runnable the node calls (the ``configurable`` values propagate unchanged).
"""

from __future__ import annotations

import itertools
import os
import socket
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langgraph._internal._constants import (
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_CHECKPOINTER,
    CONFIG_KEY_DURABILITY,
    CONFIG_KEY_RUNTIME,
    CONFIG_KEY_SCRATCHPAD,
    CONFIG_KEY_TASK_ID,
    CONFIG_KEY_THREAD_ID,
)
from langgraph.checkpoint.base import BaseCheckpointSaver

from tether.boundaries import current_guard
from tether.store import RecordStore, store_for

__all__ = [
    "BUDGET_KEY",
    "PINS_KEY",
    "REPLAY_KEY",
    "ROOT_KEY",
    "TENANT_KEY",
    "NodeScope",
    "node_scope",
    "replay_only",
    "worker_id",
]

# Configurable keys tether reads; the first two are set by with_budget/pin_versions.
BUDGET_KEY = "__tether_budget"
PINS_KEY = "__tether_pins"
# Set by debug replays: every call must find its record; none asks the model or runs a tool.
REPLAY_KEY = "__tether_replay_only"
# Set these in your config to share a budget across forked threads / name a tenant.
ROOT_KEY = "tether_root_thread_id"
TENANT_KEY = "tenant_id"

_WORKER = f"{socket.gethostname()}:{os.getpid()}"


def worker_id() -> str:
    """``hostname:pid`` of this process."""
    return _WORKER


class _Calls:
    """Counters for one execution (one attempt) of one node."""

    def __init__(self) -> None:
        self._next = itertools.count()
        self._lock = threading.Lock()
        self._seen: dict[str, int] = {}

    def next_index(self) -> int:
        return next(self._next)

    def occurrence(self, name: str) -> int:
        with self._lock:
            n = self._seen.get(name, 0)
            self._seen[name] = n + 1
            return n


# One _Calls per node execution, found by the identity of an object LangGraph
# creates afresh for every attempt of every task (the task's Runtime). Entries
# hold that object, so its id cannot be reused while the entry lives.
_executions: OrderedDict[int, tuple[object, _Calls]] = OrderedDict()
_executions_lock = threading.Lock()
_MAX_EXECUTIONS = 4096


def _calls_for(anchor: object) -> _Calls:
    with _executions_lock:
        entry = _executions.get(id(anchor))
        if entry is None or entry[0] is not anchor:
            entry = (anchor, _Calls())
            _executions[id(anchor)] = entry
            if len(_executions) > _MAX_EXECUTIONS:
                _executions.popitem(last=False)
        return entry[1]


@dataclass
class NodeScope:
    """The running node execution a recorded call belongs to."""

    config: RunnableConfig
    checkpointer: BaseCheckpointSaver[Any]
    store: RecordStore
    thread_id: str
    checkpoint_ns: str
    task_id: str
    node: str
    attempt: int
    calls: _Calls = field(repr=False)
    parent_checkpoint_id: str | None = None

    @property
    def durability(self) -> str:
        """LangGraph's durability mode for this run: ``sync``, ``async`` or ``exit``."""
        return str(self.configurable.get(CONFIG_KEY_DURABILITY) or "async")

    @property
    def defers_records(self) -> bool:
        """Whether a record write may be left in flight (:mod:`tether._in_flight`).

        Only under ``durability="sync"``, with a tether saver (it settles the
        thread's writes before each checkpoint write) and outside a worker's
        guard (whose boundaries check the run and report each step as it is
        written).
        """
        return (
            self.durability == "sync"
            and current_guard() is None
            and getattr(self.checkpointer, "settles_records", False) is True
        )

    @property
    def flight(self) -> tuple[str, str, str]:
        """Thread, graph namespace and task id: what this task's record writes in flight
        are kept under (:mod:`tether._in_flight`)."""
        return self.thread_id, self.graph_ns, self.task_id

    @property
    def graph_ns(self) -> str:
        """The namespace of the graph this task runs in (its own, minus the task)."""
        return self.checkpoint_ns.rpartition("|")[0]

    @property
    def configurable(self) -> dict[str, Any]:
        return self.config.get("configurable", {})

    @property
    def pinned(self) -> bool:
        """Whether the graph was given version pins (``pin_versions``); else nothing to check."""
        return self.configurable.get(PINS_KEY) is not None

    @property
    def replay_only(self) -> bool:
        """Whether every call must be replayed from its record (a debug replay)."""
        return bool(self.configurable.get(REPLAY_KEY))

    @property
    def budgeted(self) -> bool:
        """Whether the graph was given a budget (``with_budget``); else nothing to charge."""
        return self.configurable.get(BUDGET_KEY) is not None

    @property
    def root(self) -> str:
        """The run a budget is charged to: ``tether_root_thread_id`` or the thread."""
        return str(self.configurable.get(ROOT_KEY) or self.thread_id)

    @property
    def tenant(self) -> str:
        return str(self.configurable.get(TENANT_KEY) or "")

    def step_key(self, suffix: str) -> str:
        """A record key unique to this thread, namespace, task and ``suffix``."""
        return f"{self.thread_id}|{self.checkpoint_ns}|{self.task_id}|{suffix}"


def replay_only(config: RunnableConfig) -> RunnableConfig:
    """``config`` for a run in which every recorded call must find its record.

    Such a run never asks the model or runs a durable tool: a call without a
    record raises :class:`NotRecordedError` instead (debug replays use it).
    """
    configurable = {**config.get("configurable", {}), REPLAY_KEY: True}
    return {**config, "configurable": configurable}


def _merged(config: RunnableConfig | None) -> RunnableConfig:
    """The config a runnable sees: the ambient one with ``config``'s keys over it.

    The same top-level merge as ``ensure_config``, without its copies and
    defaults: a node scope only reads ``configurable`` and ``metadata``, and
    this runs on every recorded call.
    """
    ambient = var_child_runnable_config.get() or {}
    if not config:
        return ambient
    own = {k: v for k, v in config.items() if v is not None}
    return {**ambient, **own} if ambient else own  # type: ignore[return-value,typeddict-item]


def node_scope(config: RunnableConfig | None = None) -> NodeScope | None:
    """The node execution the current call runs in, or ``None`` outside a graph run.

    Also ``None`` when the graph has no checkpointer: nothing can be recorded.
    """
    merged = _merged(config)
    conf = merged.get("configurable") or {}
    saver = conf.get(CONFIG_KEY_CHECKPOINTER)
    task_id = conf.get(CONFIG_KEY_TASK_ID)
    thread_id = conf.get(CONFIG_KEY_THREAD_ID)
    if not isinstance(saver, BaseCheckpointSaver) or not task_id or thread_id is None:
        return None
    runtime = conf.get(CONFIG_KEY_RUNTIME)
    info = getattr(runtime, "execution_info", None)
    anchor = runtime if runtime is not None else conf.get(CONFIG_KEY_SCRATCHPAD)
    return NodeScope(
        config=merged,
        checkpointer=saver,
        store=store_for(saver),
        thread_id=str(thread_id),
        checkpoint_ns=str(conf.get(CONFIG_KEY_CHECKPOINT_NS) or ""),
        task_id=str(task_id),
        node=str((merged.get("metadata") or {}).get("langgraph_node", "")),
        attempt=int(getattr(info, "node_attempt", 1) or 1),
        calls=_calls_for(anchor if anchor is not None else task_id),
        parent_checkpoint_id=getattr(info, "checkpoint_id", None) or None,
    )
