"""The request and response bodies of the compact durability API (``/v1``).

Pydantic models, so ``/openapi.json`` documents every route and a malformed
body is answered ``422`` naming the field. Unknown fields are refused: a typo
(``thread`` for ``thread_id``) must not be silently ignored.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tether.server._payloads import StorableBody

__all__ = [
    "CancelBody",
    "CheckpointOut",
    "EventOut",
    "EventsOut",
    "InterruptOut",
    "ResumeBody",
    "ResumeOut",
    "RunCreateBody",
    "RunOut",
    "RunStatusOut",
]


class _Strict(StorableBody):
    """Unknown fields refused; unstorable numbers, text and nesting too (422)."""

    model_config = ConfigDict(extra="forbid")


class RunCreateBody(_Strict):
    """Start a run of an agent (a graph or assistant id of the project)."""

    agent: str = Field(min_length=1, description="The graph or assistant id to run.")
    input: Any = Field(default=None, description="The graph's input.")
    thread_id: str | None = Field(
        default=None,
        min_length=1,
        description="The thread the run continues; none: a new thread, kept after the run.",
    )
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    multitask_strategy: Literal["reject", "interrupt", "rollback", "enqueue"] = "enqueue"
    if_not_exists: Literal["create", "reject"] = Field(
        default="create", description="What to do when `thread_id` names no thread."
    )
    after_seconds: float = Field(default=0, ge=0)
    step_timeout: float | None = Field(default=None, gt=0)
    interrupt_before: list[str] | None = None
    interrupt_after: list[str] | None = None


class RunOut(BaseModel):
    """A run just created, resumed or cancelled."""

    run_id: str
    status: str
    thread_id: str


class InterruptOut(BaseModel):
    """What an ``interrupted`` run waits on."""

    node: str | None = Field(description="The node that stopped.")
    reason: str | None = Field(
        description="Why: the approval's `why`, or the interrupt's value (JSON if not text)."
    )
    approval_id: str | None = Field(
        description="The tether approval to decide; null for a plain interrupt()."
    )
    interrupt_id: str
    value: Any = Field(default=None, description="The interrupt's value as the graph gave it.")


class RunStatusOut(BaseModel):
    """A run's status (tether's: pending, running, interrupted, success, error, cancelled,
    timeout)."""

    run_id: str
    thread_id: str
    agent: str
    status: str
    created_at: str
    updated_at: str
    error: dict[str, Any] | None = None
    cancel_reason: str | None = None
    ended_reason: str | None = Field(
        default=None,
        description="Why the run ended as it did; for a compensating graph's run that failed "
        "or was rolled back, what compensation undid and what it did not.",
    )
    interrupt: InterruptOut | None = Field(
        default=None, description="The first thing an interrupted run waits on."
    )
    interrupts: list[InterruptOut] = Field(
        default_factory=list, description="Everything an interrupted run waits on."
    )
    checkpoint_id: str | None = Field(
        default=None, description="The checkpoint an interrupted run stopped at."
    )


class ResumeBody(_Strict):
    """Answer an interrupted run.

    For a run waiting on a tether approval: ``decision`` is ``approve``, ``reject``
    (``payload.reason`` required) or ``edit`` (``payload.args`` required), and
    ``payload.args_sha256`` may pin the arguments shown. For a plain ``interrupt()``:
    ``decision`` is ``resume`` and ``payload`` is the value ``interrupt()`` returns.
    """

    decision: Literal["approve", "reject", "edit", "resume"]
    payload: Any = None


class ResumeOut(RunOut):
    """The run after the answer: enqueued again for a worker."""

    approval_id: str | None = None
    decision: str


class CancelBody(_Strict):
    """Cancel a run (the body is optional)."""

    reason: str | None = None
    action: Literal["interrupt", "rollback"] = "interrupt"


class EventOut(BaseModel):
    """One event of the run, in order (``seq`` is gap-free)."""

    seq: int
    kind: str
    ns: str
    data: Any
    created_at: str | None


class EventsOut(BaseModel):
    """The run's events after ``after``; ask again with ``after=next_after``."""

    run_id: str
    status: str
    events: list[EventOut]
    next_after: int


class CheckpointOut(BaseModel):
    """A checkpoint the run saved."""

    run_id: str
    thread_id: str
    checkpoint_id: str
    state_uri: str = Field(description="Where the thread's state at this checkpoint is read.")
    created_at: str
    nodes_completed: list[str] = Field(
        description="The run's nodes finished (without error or interrupt) up to this checkpoint, "
        "in order."
    )
