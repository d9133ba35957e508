"""The errors the runtime raises. Each names what was wrong and how to fix it.

A missing run, thread, assistant or cron of *another tenant* is reported as
not found, never as forbidden: a caller learns nothing about ids it may not see.
"""

from __future__ import annotations

from tether.errors import ConfigurationError, TetherError

__all__ = [
    "AlreadyExistsError",
    "AssistantNotFoundError",
    "CheckpointNotFoundError",
    "CronNotFoundError",
    "FenceLostError",
    "InvalidRunRequestError",
    "NotFoundError",
    "ProjectConfigError",
    "RunNotActiveError",
    "RunNotFoundError",
    "RuntimeSchemaError",
    "TenantMismatchError",
    "ThreadBusyError",
    "ThreadNotFoundError",
    "UnknownGraphError",
]


class NotFoundError(TetherError, LookupError):
    """No such object for this tenant."""


class RunNotFoundError(NotFoundError):
    """No run with this id for this tenant."""


class ThreadNotFoundError(NotFoundError):
    """No thread with this id for this tenant."""


class AssistantNotFoundError(NotFoundError):
    """No assistant (or graph) with this id for this tenant."""


class CheckpointNotFoundError(NotFoundError):
    """The thread has no checkpoint with this id (to run from, read or update at)."""


class CronNotFoundError(NotFoundError):
    """No cron with this id for this tenant."""


class ThreadBusyError(TetherError):
    """The thread has a pending or running run and the multitask strategy is ``reject``."""


class RunNotActiveError(TetherError):
    """The run has already ended, so it cannot be cancelled or resumed."""


class InvalidRunRequestError(TetherError, ValueError):
    """A run request is malformed; the message names the field and the problem."""


class TenantMismatchError(TetherError):
    """Stored state belongs to another tenant than the run that tried to load it."""


class UnknownGraphError(TetherError, LookupError):
    """No graph with this id is registered in the project."""


class ProjectConfigError(ConfigurationError):
    """``langgraph.json`` (or an object it names) is malformed or cannot be loaded."""


class RuntimeSchemaError(TetherError):
    """The run store's schema is missing, or newer than this version of tether knows."""


class AlreadyExistsError(TetherError):
    """An assistant, thread or run with this id already exists."""


class FenceLostError(TetherError):
    """A worker's write for a run was refused: the run's fence moved on (taken over,
    handed back, finished or deleted), so this worker no longer holds it.

    Nothing was written. The worker stops the run without writing anything more.
    """

    def __init__(self, run_id: str, fence: int) -> None:
        self.run_id = run_id
        self.fence = fence
        super().__init__(
            f"run {run_id} no longer holds fence {fence}: another worker took it over, "
            "or it was handed back, finished or deleted; nothing was written"
        )
