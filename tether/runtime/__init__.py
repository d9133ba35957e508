"""The runtime: runs as rows in a run store, executed by workers that hold leases.

* :class:`Runtime` (async) and :class:`SyncRuntime`: the control plane, usable
  from any process: create runs, read them, wait, cancel, resume, decide an
  approval, read and follow a run's events;
* :class:`Worker` (and ``tether worker``): claims runs of the graphs of one
  ``langgraph.json`` project and executes them under a fenced lease;
  :func:`grant_worker_role` (``tether workers grant``) makes a PostgreSQL role
  for workers that reaches only the threads of the runs they hold;
* :class:`Scheduler`: run by one leading worker per run store, it expires
  approvals, times out runs past their deadline, fires :class:`Cron` schedules
  (``Runtime.create_cron``) and cleans up;
* :class:`WebhookPolicy`: which ``webhook`` URLs a run may name, and how a
  worker posts a run's outcome to it (``webhooks`` in ``langgraph.json``);
* :func:`unfinished` / :func:`aunfinished`: whether a thread's run has work
  left, including the case ``get_state().next`` misses (a run killed after a
  step's writes were stored and before its checkpoint was).

The design, the guarantees and what a stopped worker can and cannot do are in
``docs/runtime.md``.
"""

from tether._progress import aunfinished, unfinished
from tether.runtime.api import Runtime
from tether.runtime.errors import (
    AlreadyExistsError,
    AssistantNotFoundError,
    CheckpointNotFoundError,
    CronNotFoundError,
    FenceLostError,
    InvalidRunRequestError,
    NotFoundError,
    ProjectConfigError,
    RunNotActiveError,
    RunNotFoundError,
    RuntimeSchemaError,
    TenantMismatchError,
    ThreadBusyError,
    ThreadNotFoundError,
    UnknownGraphError,
)
from tether.runtime.models import Cron, Run, RunEvent, RunStatus, Thread, ThreadStatus
from tether.runtime.scheduler import Retention, Scheduler, TickReport
from tether.runtime.sync import SyncRuntime
from tether.runtime.webhooks import WebhookPolicy, WebhookRefusedError
from tether.runtime.worker import Worker
from tether.runtime.worker_role import WorkerGrant, grant_worker_role

__all__ = [
    "AlreadyExistsError",
    "AssistantNotFoundError",
    "CheckpointNotFoundError",
    "Cron",
    "CronNotFoundError",
    "FenceLostError",
    "InvalidRunRequestError",
    "NotFoundError",
    "ProjectConfigError",
    "Retention",
    "Run",
    "RunEvent",
    "RunNotActiveError",
    "RunNotFoundError",
    "RunStatus",
    "Runtime",
    "RuntimeSchemaError",
    "Scheduler",
    "SyncRuntime",
    "TenantMismatchError",
    "Thread",
    "ThreadBusyError",
    "ThreadNotFoundError",
    "ThreadStatus",
    "TickReport",
    "UnknownGraphError",
    "WebhookPolicy",
    "WebhookRefusedError",
    "Worker",
    "WorkerGrant",
    "aunfinished",
    "grant_worker_role",
    "unfinished",
]
