"""The run store's interface: one protocol, two backends (PostgreSQL and SQLite).

The store has two halves:

- the **control plane** (API, CLI, scheduler): assistants, threads, creating,
  reading, cancelling and resuming runs, reading events. Every method takes the
  caller's ``tenant``; an object of another tenant behaves exactly like a
  missing one (``*NotFoundError``, never "forbidden").
- the **worker plane**: claiming runs, heartbeats, and the writes a worker makes
  for a run it holds. These serve every tenant. Every run-state write carries
  the :class:`Hold` (run, thread, worker, fence) the claim returned and checks
  the fence *in the same statement*; when the fence moved on (another worker
  took the run over, or the run was deleted) nothing is written and
  :class:`~tether.runtime.errors.FenceLostError` is raised.

Values (inputs, commands, thread values, event data, errors) cross this
interface as JSON-compatible Python values; the store encodes them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

from tether.runtime.models import (
    Assistant,
    CancelAction,
    Cron,
    IfExists,
    OnCompletion,
    Run,
    RunEvent,
    RunStatus,
    Thread,
    ThreadStatus,
)

if TYPE_CHECKING:
    from tether.checkpointing import KeyRing
    from tether.runtime.store.resealing import ResealCounts
    from tether.runtime.store.rows import Dialect
from tether.runtime.store.types import (
    KEEP,
    Claim,
    Created,
    Held,
    Hold,
    Keep,
    NewEvent,
    NewRun,
    Outcome,
    OutcomeStatus,
    WorkerInfo,
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
    "RunStore",
    "ThreadCreation",
    "WorkerInfo",
]


class ThreadCreation:
    """``create_thread``, once, for every store that has ``put_thread`` (the stores and the
    server's guarded one): the thread, without whether this call made it."""

    async def create_thread(
        self: RunStore,
        *,
        tenant: str = "",
        thread_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        if_exists: IfExists = "raise",
    ) -> Thread:
        thread, _ = await self.put_thread(
            tenant=tenant, thread_id=thread_id, metadata=metadata, if_exists=if_exists
        )
        return thread


class RunStore(Protocol):
    """The run store (design §3.2-§3.7). Open one with ``tether.runtime.store.open_run_store``."""

    @property
    def dialect(self) -> Literal["postgres", "sqlite"]:
        """Which backend this is."""

    @property
    def rows(self) -> Dialect:
        """How rows are decoded and sealed values opened."""

    def seal_with(self, keys: KeyRing | None) -> None:
        """Seal private values with ``keys`` from now on (``None``: in clear)."""

    async def reseal(self, *, batch: int = 500) -> ResealCounts:
        """Re-seal every private value under the active key (``tether keys rotate``)."""

    # -- schema ---------------------------------------------------------------------------

    async def setup(self) -> None:
        """Apply pending migrations; a no-op when up to date; safe to run concurrently.

        Raises:
            RuntimeSchemaError: the database was migrated by a newer tether.
        """

    async def schema_version(self) -> int:
        """The highest migration applied (0 for an empty database)."""

    async def refuse_sealed(self, where: str) -> None:
        """Raise ``MissingKeyError`` if the store was written with a key (see
        :func:`~tether.runtime.store.sealing.refuse_sealed`); for a store opened without one.

        ``where`` names the store in the error (its URL, redacted).
        """

    async def aclose(self) -> None:
        """Close connections (``open_run_store`` does this on exit)."""

    # -- assistants -----------------------------------------------------------------------

    async def put_assistant(
        self,
        graph_id: str,
        *,
        tenant: str = "",
        assistant_id: str | None = None,
        name: str | None = None,
        description: str | None = None,
        config: Mapping[str, Any] | None = None,
        context: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        if_exists: IfExists = "raise",
    ) -> Assistant:
        """Create an assistant of ``tenant``; only it can see and use it.

        The graphs' system assistants (made by the runtime, ``created_by: system``,
        under the id LangGraph derives from the graph id) are the only ones shared
        by every tenant, and no tenant can change them. With
        ``if_exists="do_nothing"`` an existing assistant of this tenant is
        returned unchanged.

        Raises:
            AlreadyExistsError: the id is taken (``if_exists="raise"``, or by another tenant).
            InvalidRunRequestError: ``assistant_id`` is a graph's id (it names the
                graph's system assistant), or a field is malformed.
        """

    async def get_assistant(self, assistant_id: str, *, tenant: str = "") -> Assistant:
        """The tenant's assistant with this id, else the system assistant with this id,
        else the system assistant of the graph with this id.

        Raises:
            AssistantNotFoundError: neither exists.
        """

    # -- threads --------------------------------------------------------------------------

    async def create_thread(
        self,
        *,
        tenant: str = "",
        thread_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        if_exists: IfExists = "raise",
    ) -> Thread:
        """Create an ``idle`` thread (a new uuid6 id unless given).

        Raises:
            InvalidRunRequestError: the thread id is empty, too long or contains NUL.
            AlreadyExistsError: the id is taken (``if_exists="raise"``, or by another tenant).
        """

    async def put_thread(
        self,
        *,
        tenant: str = "",
        thread_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        if_exists: IfExists = "raise",
    ) -> tuple[Thread, bool]:
        """:meth:`create_thread`, and whether this call made the thread (``False``: it
        existed, and ``if_exists="do_nothing"`` returned it). Of concurrent calls for one
        id, exactly one made it."""

    async def get_thread(self, thread_id: str, *, tenant: str = "") -> Thread:
        """Raises ``ThreadNotFoundError`` for a missing or foreign thread."""

    async def list_threads(
        self,
        *,
        tenant: str = "",
        status: ThreadStatus | None = None,
        metadata: Mapping[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[Thread]:
        """The tenant's threads, most recently updated first; ``metadata`` matches top-level
        keys by equality."""

    async def delete_thread(self, thread_id: str, *, tenant: str = "") -> None:
        """Delete the thread with its runs and their events (not its checkpoints: the
        caller deletes those). Raises ``ThreadNotFoundError``."""

    # -- runs -----------------------------------------------------------------------------

    async def create_run(self, request: NewRun, *, tenant: str = "") -> Created:
        """Create a ``pending`` run in one transaction (§3.3.7) and wake the workers.

        The thread becomes ``busy``; an ``interrupted`` run on it is closed as
        ``success`` ("continued by run <id>"); the multitask strategy acts on
        the in-flight runs (§3.10). The run's first event is ``run.created``
        (seq 1).

        Raises:
            InvalidRunRequestError: the request is malformed (the message names
                the field and the problem); nothing is written.
            ThreadNotFoundError: the thread is missing or foreign and
                ``if_not_exists="reject"``.
            AssistantNotFoundError: the assistant is missing or foreign.
            ThreadBusyError: ``multitask_strategy="reject"`` and a run is in
                flight; nothing is written.
            AlreadyExistsError: a caller-chosen ``run_id`` is taken.
        """

    async def get_run(self, run_id: str, *, tenant: str = "") -> Run:
        """Raises ``RunNotFoundError`` for a missing or foreign run."""

    async def list_runs(
        self,
        *,
        tenant: str = "",
        thread_id: str | None = None,
        status: RunStatus | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Run]:
        """The tenant's runs, newest first."""

    async def cancel_run(
        self,
        run_id: str,
        *,
        tenant: str = "",
        action: CancelAction = "interrupt",
        reason: str | None = None,
    ) -> Run:
        """Cancel a run (§3.7) and return it as it is now.

        - ``pending`` or ``interrupted``: ``cancelled`` at once (event
          ``run.finished``); the thread is freed (``idle`` unless other runs
          wait). The caller then deletes checkpoints for a ``rollback`` of a run
          that had started (``attempt > 0`` or ``resumes > 0``), and cancels the
          approvals in ``waiting_on`` of a run that was interrupted.
        - ``running``: ``cancel_action``, ``cancel_reason`` and
          ``cancel_requested_at`` are set (event ``cancel.requested``, NOTIFY
          ``tether_control``); its worker sees them at its next heartbeat or
          notification and finishes the run.

        Raises:
            InvalidRunRequestError: ``action`` is not ``interrupt`` or ``rollback``.
            RunNotFoundError: missing or foreign.
            RunNotActiveError: the run already ended.
        """

    async def resume_run(
        self,
        run_id: str,
        command: Mapping[str, Any],
        *,
        tenant: str = "",
        events: Sequence[NewEvent] = (),
    ) -> Run:
        """Enqueue an ``interrupted`` run again with ``command`` as its input (§3.6).

        ``resumes`` grows by one, ``attempt`` restarts at 0, ``waiting_on`` is
        cleared, the thread becomes ``busy``. ``events`` (e.g.
        ``approval.decided``) are appended before ``run.resumed``, in the same
        transaction.

        Raises:
            RunNotFoundError: missing or foreign.
            RunNotActiveError: the run is not ``interrupted`` (the message names its status).
        """

    async def add_events(self, run_id: str, events: Sequence[NewEvent], *, tenant: str = "") -> int:
        """Append control-plane events (no fence) and return the last seq.

        Raises ``RunNotFoundError``."""

    async def events(
        self,
        run_id: str,
        *,
        tenant: str = "",
        after: int = 0,
        limit: int = 1000,
        kinds: Sequence[str] | None = None,
    ) -> list[RunEvent]:
        """Events with ``seq > after`` in seq order, at most ``limit``.

        Raises ``RunNotFoundError`` for a missing or foreign run."""

    # -- crons (tether.runtime.store.crons) -------------------------------------------------

    async def create_cron(
        self,
        assistant_id: str,
        schedule: str,
        *,
        tenant: str = "",
        thread_id: str | None = None,
        payload: Mapping[str, Any] | None = None,
        timezone: str | None = None,
        end_time: datetime | None = None,
        metadata: Mapping[str, Any] | None = None,
        on_run_completed: OnCompletion | None = None,
        enabled: bool = True,
        now: datetime | None = None,
    ) -> Cron:
        """Create a cron whose fires create runs of ``assistant_id`` with ``payload``.

        Raises:
            InvalidRunRequestError: a bad schedule, timezone, payload, end time or
                ``on_run_completed`` (the message names it).
            AssistantNotFoundError / ThreadNotFoundError: missing or foreign.
        """

    async def get_cron(self, cron_id: str, *, tenant: str = "") -> Cron:
        """Raises ``CronNotFoundError`` for a missing or foreign cron."""

    async def list_crons(
        self,
        *,
        tenant: str = "",
        assistant_id: str | None = None,
        thread_id: str | None = None,
        enabled: bool | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Cron]:
        """The tenant's crons, oldest first."""

    async def update_cron(
        self,
        cron_id: str,
        *,
        tenant: str = "",
        schedule: str | None = None,
        timezone: str | None = ...,
        enabled: bool | None = None,
        end_time: datetime | None = ...,
        now: datetime | None = None,
    ) -> Cron:
        """Change a cron's schedule, timezone, ``enabled`` or end time; its next fire is
        recomputed from ``now``. Raises ``CronNotFoundError``."""

    async def delete_cron(self, cron_id: str, *, tenant: str = "") -> None:
        """Raises ``CronNotFoundError`` for a missing or foreign cron."""

    # -- the scheduler (every tenant) --------------------------------------------------------

    async def due_crons(self, now: datetime, *, limit: int = 100) -> list[Cron]:
        """Enabled crons due at ``now`` whose end time has not passed."""

    async def fire_cron(self, cron: Cron, now: datetime) -> Created | None:
        """Fire the cron's current slot at most once; ``None`` when it was fired already."""

    async def skip_cron_slot(self, cron: Cron, now: datetime) -> None:
        """Record the cron's current slot as fired without a run (its run was refused)."""

    async def expire_deadlines(self, now: datetime, *, limit: int = 100) -> list[Run]:
        """Time out pending and interrupted runs past their deadline; the runs as they were."""

    async def waiting_on_approvals(self, *, limit: int = 1000) -> list[Run]:
        """Every tenant's interrupted runs that wait on a tether approval."""

    async def rolled_back_runs(
        self, since: datetime, until: datetime, *, limit: int = 1000
    ) -> list[Run]:
        """Every tenant's runs cancelled with rollback that had started, ended between
        ``since`` and ``until``."""

    async def remove_stale_workers(self, before: datetime) -> int:
        """Delete worker rows last heard of before ``before``; how many."""

    async def thread_tenant(self, thread_id: str) -> str | None:
        """The thread's tenant, or ``None`` when it does not exist."""

    # -- worker plane ---------------------------------------------------------------------

    async def register_worker(self, worker: WorkerInfo) -> None:
        """Record (or refresh) a worker row."""

    async def unregister_worker(self, worker_id: str) -> None:
        """Delete a worker row (clean shutdown)."""

    async def claim(
        self, worker_id: str, *, graphs: Sequence[str], limit: int, lease: float
    ) -> list[Claim]:
        """Claim up to ``limit`` pending runs of ``graphs`` (§3.3.1).

        Only the FIFO head of a thread whose mutex is free, and only once its
        ``available_at`` passed. Each claim bumps ``fence`` and ``attempt``,
        sets the lease and writes ``run.started``. A run whose attempts are used
        up is finished as ``error`` (``RunAttemptsExceeded``) instead.
        """

    async def claim_expired(
        self, worker_id: str, *, graphs: Sequence[str], limit: int, lease: float
    ) -> list[Claim]:
        """Take over running runs whose lease expired (§3.3.2).

        As :meth:`claim`; ``run.started`` and :attr:`Claim.took_over_from` name
        the previous worker. A run whose attempts are used up is finished as
        ``error`` with LangGraph's "exceeded max attempts" message instead.
        """

    async def heartbeat(self, worker_id: str, *, lease: float) -> list[Held]:
        """Extend the lease of every run this worker holds; return those runs (§3.3.3).

        A run missing from the result, or with another fence, was lost.
        """

    async def release(self, hold: Hold, *, reason: str = "", retry: bool = False) -> Run:
        """Hand a held run back as ``pending`` for any worker to claim again (§3.3.4).

        A hand-back (SIGTERM drain, lease in doubt) does not spend an attempt;
        with ``retry=True`` (a retriable error) the attempt counts toward
        ``max_attempts``, as LangGraph counts its retries. Event ``run.released``.

        Raises ``FenceLostError`` (nothing written) when the fence moved on.
        """

    async def finish(self, hold: Hold, outcome: Outcome, events: Sequence[NewEvent] = ()) -> Run:
        """Write a held run's outcome, free its thread, append ``events`` and then
        ``run.finished`` (§3.3.5), in one transaction.

        Raises ``FenceLostError`` (nothing written) when the fence moved on.
        """

    async def append_events(self, hold: Hold, events: Sequence[NewEvent]) -> int:
        """Append a batch of a held run's events with gap-free seqs; return the last seq.

        Raises ``FenceLostError`` (nothing written) when the fence moved on.
        """

    async def verify(self, run_id: str, fence: int) -> bool:
        """Whether the run is ``running`` under this fence (one round trip)."""

    # -- edits (tether.runtime.store.edits) -----------------------------------------------

    async def update_thread(
        self, thread_id: str, *, tenant: str = "", metadata: Mapping[str, Any]
    ) -> Thread:
        """Merge ``metadata`` into the thread's top-level keys. Raises ``ThreadNotFoundError``."""

    async def record_thread_state(
        self,
        thread_id: str,
        *,
        tenant: str = "",
        values: Any,
        interrupts: Mapping[str, Any],
        status: Literal["idle", "interrupted"],
    ) -> Thread:
        """Record the thread's values, interrupts and status after a state update made
        outside a run. Raises ``ThreadNotFoundError``, or ``ThreadBusyError`` while a run
        is pending or running on it."""

    async def copy_thread(
        self, thread_id: str, *, tenant: str = "", new_thread_id: str | None = None
    ) -> Thread:
        """A new thread with the source's metadata, values and interrupts (no runs, no
        checkpoints). Raises ``ThreadNotFoundError`` / ``AlreadyExistsError``."""

    async def delete_temporary_threads(
        self, *, ended_before: datetime, limit: int = 100
    ) -> list[str]:
        """Delete the temporary threads whose runs all stopped before ``ended_before``
        (every tenant; not their checkpoints); their ids."""

    async def delete_run(self, run_id: str, *, tenant: str = "") -> Run:
        """Delete a stopped run and its events. Raises ``RunNotFoundError``, or
        ``ThreadBusyError`` while it is pending or running."""

    async def set_run_ending(
        self,
        run_id: str,
        *,
        tenant: str = "",
        error: Mapping[str, Any] | None,
        reason: str | None,
    ) -> Run:
        """Rewrite an ended run's ``error`` and ``ended_reason`` (a later compensation
        of it). Raises ``RunNotFoundError``, or ``RunNotActiveError`` unless it ended."""

    async def update_assistant(
        self,
        assistant_id: str,
        *,
        tenant: str = "",
        graph_id: str | None = None,
        config: Mapping[str, Any] | None = None,
        context: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        name: str | None = None,
        description: str | None = None,
    ) -> Assistant:
        """A new version of the assistant, now its latest (metadata merged)."""

    async def assistant_versions(
        self,
        assistant_id: str,
        *,
        tenant: str = "",
        metadata: Mapping[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[Assistant]:
        """The assistant's versions, newest first."""

    async def set_assistant_version(
        self, assistant_id: str, version: int, *, tenant: str = ""
    ) -> Assistant:
        """Make a stored version the latest. Raises ``AssistantNotFoundError``."""

    async def delete_assistant(self, assistant_id: str, *, tenant: str = "") -> Assistant:
        """Delete the assistant and its versions (not a graph's system assistant)."""

    async def list_assistants(
        self,
        *,
        tenant: str = "",
        graph_id: str | None = None,
        name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[Assistant]:
        """The tenant's and the system assistants, oldest first, filtered."""
