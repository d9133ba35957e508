"""The runtime's records: runs, threads, assistants, events and crons, as frozen dataclasses.

A run is a row (design I1): :class:`Run` carries every column of
``tether_runs``, decoded (JSON columns as Python values, times as UTC
``datetime``). The ``Literal`` aliases copy LangGraph's SDK where the SDK has
the same notion, and add tether's own statuses:

- ``interrupted``: the run stopped at an ``interrupt()`` and waits (it holds
  nothing, I4); a decision or :meth:`resume` makes it ``pending`` again.
- ``cancelled``: a cancel (or a multitask ``interrupt``/``rollback``) ended it.

:data:`ACTIVE` runs occupy their thread's queue; :data:`TERMINAL` runs are over
for good. ``interrupted`` is neither: it can still be resumed or cancelled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, get_args

__all__ = [
    "ACTIVE",
    "CANCELLABLE",
    "MULTITASK_STRATEGIES",
    "STREAM_MODES",
    "TERMINAL",
    "Assistant",
    "CancelAction",
    "Cron",
    "Durability",
    "IfExists",
    "IfNotExists",
    "InputKind",
    "MultitaskStrategy",
    "OnCompletion",
    "Run",
    "RunEvent",
    "RunStatus",
    "StreamMode",
    "Thread",
    "ThreadStatus",
    "WaitingOn",
]

RunStatus = Literal["pending", "running", "interrupted", "success", "error", "cancelled", "timeout"]
ThreadStatus = Literal["idle", "busy", "interrupted", "error"]
MultitaskStrategy = Literal["reject", "interrupt", "rollback", "enqueue"]
CancelAction = Literal["interrupt", "rollback"]
IfNotExists = Literal["create", "reject"]
IfExists = Literal["raise", "do_nothing"]
OnCompletion = Literal["delete", "keep"]
InputKind = Literal["input", "command", "none"]
Durability = Literal["sync", "async", "exit"]
StreamMode = Literal[
    "values",
    "messages",
    "messages-tuple",
    "updates",
    "events",
    "tasks",
    "checkpoints",
    "debug",
    "custom",
]

ACTIVE: frozenset[RunStatus] = frozenset({"pending", "running"})
TERMINAL: frozenset[RunStatus] = frozenset({"success", "error", "cancelled", "timeout"})
CANCELLABLE: frozenset[RunStatus] = frozenset({"pending", "running", "interrupted"})
MULTITASK_STRATEGIES: tuple[MultitaskStrategy, ...] = get_args(MultitaskStrategy)
STREAM_MODES: tuple[StreamMode, ...] = get_args(StreamMode)


@dataclass(frozen=True)
class WaitingOn:
    """One interrupt an ``interrupted`` run waits on (``approval_id`` for a tether approval)."""

    interrupt_id: str
    ns: str = ""
    approval_id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"interrupt_id": self.interrupt_id, "ns": self.ns, "approval_id": self.approval_id}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WaitingOn:
        return cls(str(data["interrupt_id"]), str(data.get("ns") or ""), data.get("approval_id"))


@dataclass(frozen=True)
class Assistant:
    """A graph plus its configuration; ``tenant_id == ''`` means shared (system assistants)."""

    assistant_id: str
    tenant_id: str
    graph_id: str
    name: str
    description: str | None
    config: Mapping[str, Any]
    context: Mapping[str, Any]
    metadata: Mapping[str, Any]
    version: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Thread:
    """A conversation: its status (LangGraph's rules), last values and the per-thread mutex."""

    thread_id: str
    tenant_id: str
    status: ThreadStatus
    metadata: Mapping[str, Any]
    config: Mapping[str, Any]
    values: Any
    interrupts: Mapping[str, Any]
    error: Mapping[str, Any] | None
    active_run_id: str | None
    temporary: bool
    created_at: datetime
    updated_at: datetime
    state_updated_at: datetime


@dataclass(frozen=True)
class Run:
    """One run: every column of ``tether_runs``.

    ``input`` is the pending input (``input_kind == "input"``) or command
    (``"command"``); a finished run has consumed it (``"none"``). ``fence``
    starts at 0 and grows by one on every claim, never reset; ``attempt``
    counts claims since the run was last enqueued by a person or the API.
    ``seq`` is the creation order (FIFO per thread).
    """

    run_id: str
    seq: int
    tenant_id: str
    thread_id: str
    assistant_id: str
    graph_id: str
    status: RunStatus
    multitask_strategy: MultitaskStrategy
    kwargs: Mapping[str, Any]
    input: Any
    input_kind: InputKind
    metadata: Mapping[str, Any]
    attempt: int
    max_attempts: int
    resumes: int
    fence: int
    worker_id: str | None
    lease_expires_at: datetime | None
    available_at: datetime
    deadline_at: datetime | None
    step_timeout_s: float | None
    cancel_action: CancelAction | None
    cancel_reason: str | None
    cancel_requested_at: datetime | None
    ended_reason: str | None
    waiting_on: tuple[WaitingOn, ...]
    error: Mapping[str, Any] | None
    last_seq: int
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    ended_at: datetime | None

    @property
    def active(self) -> bool:
        """``pending`` or ``running``: the run still occupies its thread's queue."""
        return self.status in ACTIVE

    @property
    def terminal(self) -> bool:
        """Over for good: ``success``, ``error``, ``cancelled`` or ``timeout``."""
        return self.status in TERMINAL

    def as_langgraph(self) -> dict[str, Any] | None:
        """The run as LangGraph's API shows it (design §2.12), JSON-ready.

        ``interrupted`` (waiting) shows as ``success``, as LangGraph reports a
        run that stopped at an interrupt; ``cancelled`` shows as
        ``interrupted`` with its ``cancel_reason``. A run cancelled with
        ``rollback`` has no LangGraph form (LangGraph deletes it): ``None``,
        which the server answers with 404.
        """
        status: str = self.status
        if self.status == "cancelled":
            if self.cancel_action == "rollback":
                return None
            status = "interrupted"
        elif self.status == "interrupted":
            status = "success"
        shown: dict[str, Any] = {
            "run_id": self.run_id,
            "thread_id": self.thread_id,
            "assistant_id": self.assistant_id,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "status": status,
            "metadata": dict(self.metadata),
            "multitask_strategy": self.multitask_strategy,
            "kwargs": dict(self.kwargs),
        }
        if self.cancel_reason is not None:
            shown["cancel_reason"] = self.cancel_reason
        return shown


@dataclass(frozen=True)
class RunEvent:
    """One entry of a run's event stream; ``seq`` is gap-free and increasing per run.

    ``fence`` and ``worker_id`` are ``None`` for control-plane events (API,
    scheduler).
    """

    run_id: str
    seq: int
    kind: str
    data: Any
    ns: str = ""
    fence: int | None = None
    worker_id: str | None = None
    created_at: datetime | None = None


@dataclass(frozen=True)
class Cron:
    """A schedule that creates runs (``payload`` is a run-create payload)."""

    cron_id: str
    tenant_id: str
    assistant_id: str
    thread_id: str | None
    schedule: str
    timezone: str | None
    payload: Mapping[str, Any]
    metadata: Mapping[str, Any]
    on_run_completed: OnCompletion | None
    enabled: bool
    end_time: datetime | None
    user_id: str | None
    next_run_at: datetime
    created_at: datetime
    updated_at: datetime
