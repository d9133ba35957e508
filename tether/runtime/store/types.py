"""The values that cross the run store's interface: requests, claims, holds, outcomes.

See :mod:`tether.runtime.store.base` for the protocol that takes and returns them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, Literal, NamedTuple

from tether.runtime.models import (
    CancelAction,
    IfNotExists,
    MultitaskStrategy,
    OnCompletion,
    Run,
    ThreadStatus,
    WaitingOn,
)

__all__ = [
    "KEEP",
    "Claim",
    "Created",
    "Held",
    "Hold",
    "Keep",
    "NewEvent",
    "NewRun",
    "Outcome",
    "OutcomeStatus",
    "WorkerInfo",
]

OutcomeStatus = Literal["success", "error", "timeout", "cancelled", "interrupted"]
_OUTCOMES: frozenset[str] = frozenset({"success", "error", "timeout", "cancelled", "interrupted"})


class Keep(Enum):
    """Type of :data:`KEEP`."""

    KEEP = "keep"


KEEP = Keep.KEEP
"""Leave the thread's stored values as they are (e.g. a rollback wrote no checkpoint)."""


@dataclass(frozen=True)
class NewRun:
    """A request to create a run (design §3.3.7). Validated by the store before any write.

    Attributes:
        assistant_id: An assistant of the caller's tenant, a shared one, or the
            graph id of a shared (system) assistant.
        thread_id: The thread; ``None`` makes a temporary thread (a stateless run).
            Any non-empty string up to 255 characters without NUL.
        input: The graph input (``input_kind == "input"``).
        command: A LangGraph ``Command`` as a dict (``resume``/``update``/``goto``);
            exclusive with ``input``.
        kwargs: Opaque run options kept on the row: ``config``, ``context``,
            ``stream_mode``, ``subgraphs``, ``interrupt_before/after``,
            ``durability``, ``checkpoint_id``, ``webhook``, ``feedback_keys``.
            ``stream_mode`` (a mode or a list) is checked against LangGraph's modes.
        multitask_strategy: What to do when the thread already has a pending or
            running run (§3.10).
        if_not_exists: ``"create"`` creates a missing thread; ``"reject"`` raises
            ``ThreadNotFoundError``.
        on_completion: ``"delete"`` (default for stateless runs) or ``"keep"``.
        after_seconds: The run becomes claimable this many seconds from now.
        deadline_at: The run times out at this moment (timezone-aware).
        step_timeout: Per-step timeout in seconds, for the worker.
        run_id: A caller-chosen run id (default: a new uuid6).
        max_attempts: Claims allowed before the run fails (LangGraph's 3).
    """

    assistant_id: str
    thread_id: str | None = None
    input: Any = None
    command: Mapping[str, Any] | None = None
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    multitask_strategy: MultitaskStrategy = "enqueue"
    if_not_exists: IfNotExists = "reject"
    on_completion: OnCompletion | None = None
    after_seconds: float = 0.0
    deadline_at: datetime | None = None
    step_timeout: float | None = None
    run_id: str | None = None
    max_attempts: int = 3


@dataclass(frozen=True)
class Created:
    """What :meth:`RunStore.create_run` did.

    Attributes:
        run: The new ``pending`` run.
        superseded: In-flight runs a multitask ``interrupt``/``rollback`` acted
            on, as they are after the change: a pending one is ``cancelled``; a
            running one carries ``cancel_action``/``cancel_reason`` for its
            worker. The caller deletes the checkpoints of a cancelled
            ``rollback`` run that had started (``attempt > 0``).
        continued: The ``interrupted`` run this run continues, now closed as
            ``success`` with ``ended_reason = "continued by run <id>"``.
    """

    run: Run
    superseded: tuple[Run, ...] = ()
    continued: Run | None = None


@dataclass(frozen=True)
class NewEvent:
    """An event to append; ``data`` must be JSON-compatible."""

    kind: str
    data: Any = None
    ns: str = ""


class Hold(NamedTuple):
    """What a worker holds after a claim; every worker-plane write is checked against it."""

    run_id: str
    thread_id: str
    worker_id: str
    fence: int
    secret: str = ""
    """The claim's lease secret (a run-scoped worker role only; ``""`` otherwise)."""

    def __repr__(self) -> str:
        hidden = ", secret=<hidden>" if self.secret else ""
        return (
            f"Hold(run_id={self.run_id!r}, thread_id={self.thread_id!r}, "
            f"worker_id={self.worker_id!r}, fence={self.fence!r}{hidden})"
        )


@dataclass(frozen=True)
class Claim:
    """One run a claim gave this worker: the row as claimed (``running``, new fence).

    ``took_over_from`` is the worker whose lease expired, for a takeover.
    ``secret`` is the lease secret minted for this claim when the store connects
    as a run-scoped worker role (``""`` otherwise): the run's writes and its
    thread's reads must present it.
    """

    run: Run
    took_over_from: str | None = None
    secret: str = field(default="", repr=False)

    @property
    def hold(self) -> Hold:
        run = self.run
        assert run.worker_id is not None
        return Hold(run.run_id, run.thread_id, run.worker_id, run.fence, self.secret)


class Held(NamedTuple):
    """One run a heartbeat confirmed, with the cancel request a worker must act on."""

    run_id: str
    fence: int
    cancel_action: CancelAction | None
    cancel_reason: str | None
    deadline_at: datetime | None


@dataclass(frozen=True)
class Outcome:
    """How a run ended (design §3.5.3), for :meth:`RunStore.finish`.

    Attributes:
        status: The run's new status.
        thread_status: The thread's status unless another run waits on it
            (then ``busy``, LangGraph's rule).
        error: The run's error, ``{"error": type, "message": text}``.
        thread_error: The thread's error (``None`` clears it).
        values: The thread's values from the final checkpoint, or :data:`KEEP`.
        interrupts: The thread's interrupts ``{task_id: [...]}``; ``None`` keeps them.
        waiting_on: What an ``interrupted`` run waits on.
        reason: ``ended_reason``.
    """

    status: OutcomeStatus
    thread_status: ThreadStatus
    error: Mapping[str, Any] | None = None
    thread_error: Mapping[str, Any] | None = None
    values: Any = KEEP
    interrupts: Mapping[str, Any] | None = None
    waiting_on: Sequence[WaitingOn] = ()
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.status not in _OUTCOMES:
            raise ValueError(
                f"an outcome's status must be one of {sorted(_OUTCOMES)}, not {self.status!r}"
            )


@dataclass(frozen=True)
class WorkerInfo:
    """A worker process, recorded in ``tether_workers`` while it runs."""

    worker_id: str
    host: str
    pid: int
    graphs: Sequence[str]
    concurrency: int
