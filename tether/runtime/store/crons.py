"""Crons and the scheduler's statements, written once for both backends (§2.10, §3.8, §3.12).

:class:`CronPlane` adds to the control plane:

- the cron API: create, get, list, update and delete a tenant's crons; a bad
  schedule, timezone or payload is refused with a message naming it;
- what the scheduler's jobs run: the due crons, firing one slot (at most once
  per ``(cron, slot)``, even with two schedulers), the runs past their
  deadline, stale worker rows.

A backend implements the ``_``-prefixed hooks; the checks live here.
"""

from __future__ import annotations

import builtins
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tether.runtime.errors import CronNotFoundError, InvalidRunRequestError
from tether.runtime.ids import check_id, new_id
from tether.runtime.models import Assistant, Cron, OnCompletion, Run
from tether.runtime.store.control import check_page
from tether.runtime.store.plane import ControlPlane
from tether.runtime.store.requests import check_payload, run_request
from tether.runtime.store.schedules import check_schedule, check_timezone, next_fire
from tether.runtime.store.types import Created, NewEvent, NewRun, Outcome
from tether.runtime.store.validation import ValidRun, check_mapping, encode, validate

__all__ = [
    "DEADLINE_REASON",
    "ROLLED_BACK",
    "CronPlane",
    "ValidCron",
    "cron_run_request",
    "deadline_events",
    "deadline_outcome",
]

ROLLED_BACK = "status = 'cancelled' AND cancel_action = 'rollback' AND (attempt > 0 OR resumes > 0)"
"""Where-clause of a run cancelled with rollback after it had started (both dialects)."""

DEADLINE_REASON = "deadline passed"
_UNSET: Any = object()


def no_cron(cron_id: str) -> str:
    return f"no cron {cron_id!r} for this tenant"


@dataclass(frozen=True)
class ValidCron:
    """A checked cron to insert; ``payload_json`` and ``metadata_json`` are encoded."""

    cron_id: str
    assistant_id: str
    thread_id: str | None
    schedule: str
    timezone: str | None
    payload_json: str
    metadata_json: str
    on_run_completed: OnCompletion | None
    enabled: bool
    end_time: datetime | None
    next_run_at: datetime


def _check_end_time(end_time: object) -> datetime | None:
    if end_time is None:
        return None
    if not isinstance(end_time, datetime) or end_time.tzinfo is None:
        raise InvalidRunRequestError("end_time must be a timezone-aware datetime or None")
    return end_time


def _check_enabled(enabled: object) -> bool:
    if not isinstance(enabled, bool):
        raise InvalidRunRequestError(f"enabled must be True or False, got {enabled!r}")
    return enabled


def cron_run_request(cron: Cron) -> NewRun:
    """The run a fire of ``cron`` creates: its payload, on its thread (none: stateless),
    its metadata merged over the payload's, plus ``cron_id``."""
    return _run_request(
        cron.assistant_id,
        cron.thread_id,
        cron.payload,
        metadata=cron.metadata,
        on_run_completed=cron.on_run_completed,
        cron_id=cron.cron_id,
    )


def _run_request(
    assistant_id: str,
    thread_id: str | None,
    payload: Mapping[str, Any],
    *,
    metadata: Mapping[str, Any],
    on_run_completed: OnCompletion | None,
    cron_id: str,
) -> NewRun:
    options = dict(payload)
    merged = {**dict(options.pop("metadata", None) or {}), **metadata, "cron_id": cron_id}
    return run_request(
        assistant_id,
        thread_id=thread_id,
        metadata=merged,
        on_completion=on_run_completed,
        **options,
    )


def deadline_outcome(run: Run) -> Outcome:
    """How a run the scheduler times out ends (as a worker's own timeout does)."""
    deadline = run.deadline_at.isoformat() if run.deadline_at else "?"
    body = {
        "error": "TimeoutError",
        "message": f"run {run.run_id} passed its deadline {deadline} while {run.status}",
    }
    return Outcome("timeout", "error", error=body, thread_error=body, reason=DEADLINE_REASON)


def deadline_events(run: Run, outcome: Outcome) -> list[NewEvent]:
    """``timeout`` (``{"kind": "run", "while": status}``), then ``run.finished``."""
    data: dict[str, Any] = {"status": "timeout", "reason": DEADLINE_REASON}
    if outcome.error is not None:
        data["error"] = dict(outcome.error)
    return [
        NewEvent("timeout", {"kind": "run", "while": run.status}),
        NewEvent("run.finished", data),
    ]


class CronPlane(ControlPlane):
    """The cron API and the scheduler's statements (see :class:`~.base.RunStore`)."""

    # -- hooks a backend implements ---------------------------------------------------------

    @abstractmethod
    async def _insert_cron(self, c: ValidCron, tenant: str) -> Cron:
        """Insert the cron; raises AlreadyExistsError when the id is taken."""

    @abstractmethod
    async def _find_cron(self, cron_id: str, tenant: str) -> Cron | None: ...

    @abstractmethod
    async def _list_crons(
        self,
        tenant: str,
        filters: Mapping[str, Any],
        limit: int,
        offset: int,
    ) -> builtins.list[Cron]: ...

    @abstractmethod
    async def _update_cron(
        self, cron_id: str, tenant: str, changes: Mapping[str, Any]
    ) -> Cron | None:
        """Set the columns in ``changes`` (``next_run_at``, ``end_time``: datetimes)."""

    @abstractmethod
    async def _delete_cron(self, cron_id: str, tenant: str) -> bool: ...

    @abstractmethod
    async def _due_crons(self, now: datetime, limit: int) -> builtins.list[Cron]:
        """Enabled crons with ``next_run_at <= now`` and no ``end_time`` before ``now``."""

    @abstractmethod
    async def _fire_cron(
        self,
        cron: Cron,
        now: datetime,
        next_run_at: datetime,
        run: tuple[ValidRun, Assistant] | None,
    ) -> Created | None:
        """In one transaction, if the cron is still due at ``now``: record the fire of
        its current slot (``INSERT … ON CONFLICT DO NOTHING``), create ``run`` when
        this call recorded it, and move ``next_run_at``. ``None``: nothing created."""

    @abstractmethod
    async def _expire_deadlines(self, now: datetime, limit: int) -> builtins.list[Run]:
        """End runs past ``deadline_at`` that no worker runs (see :meth:`expire_deadlines`,
        :func:`deadline_outcome`, :func:`deadline_events`); the runs as they were."""

    @abstractmethod
    async def _waiting_runs(self, limit: int) -> builtins.list[Run]:
        """Interrupted runs whose ``waiting_on`` is not empty, least recently updated first."""

    @abstractmethod
    async def _rolled_back_runs(
        self, since: datetime, until: datetime, limit: int
    ) -> builtins.list[Run]:
        """Runs cancelled with rollback that had started, ended in ``[since, until]``."""

    @abstractmethod
    async def _remove_workers(self, before: datetime) -> int: ...

    @abstractmethod
    async def _thread_tenant(self, thread_id: str) -> str | None: ...

    # -- the cron API -----------------------------------------------------------------------

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
        """Create a cron; its first fire is the schedule's next slot after ``now``.

        Raises:
            InvalidRunRequestError: a bad schedule, timezone, payload, end time or
                ``on_run_completed`` (the message names it).
            AssistantNotFoundError / ThreadNotFoundError: missing or foreign.
        """
        now = now or datetime.now(UTC)
        check_id(assistant_id, "assistant_id")
        check_schedule(schedule)
        check_timezone(timezone)
        body = check_payload(payload)
        if on_run_completed not in (None, "delete", "keep"):
            raise InvalidRunRequestError(
                f"on_run_completed {on_run_completed!r} is unknown; use 'delete' or 'keep'"
            )
        meta = encode(dict(check_mapping(metadata, "metadata")), "metadata")
        if thread_id is not None:
            await self.get_thread(check_id(thread_id, "thread_id"), tenant=tenant)
        elif on_run_completed is None:
            on_run_completed = "delete"  # LangGraph's default for stateless crons
        assistant = await self.get_assistant(assistant_id, tenant=tenant)
        cron_id = new_id()
        try:  # the payload makes a valid run
            request = _run_request(
                assistant.assistant_id,
                thread_id,
                body,
                metadata={},
                on_run_completed=on_run_completed,
                cron_id=cron_id,
            )
        except TypeError as exc:
            raise InvalidRunRequestError(f"payload: {exc}") from None
        validate(request, now=now)
        valid = ValidCron(
            cron_id=cron_id,
            assistant_id=assistant.assistant_id,
            thread_id=thread_id,
            schedule=schedule,
            timezone=timezone,
            payload_json=encode(body, "payload"),
            metadata_json=meta,
            on_run_completed=on_run_completed,
            enabled=_check_enabled(enabled),
            end_time=_check_end_time(end_time),
            next_run_at=next_fire(schedule, timezone, now),
        )
        return await self._insert_cron(valid, tenant)

    async def get_cron(self, cron_id: str, *, tenant: str = "") -> Cron:
        found = await self._find_cron(cron_id, tenant)
        if found is None:
            raise CronNotFoundError(no_cron(cron_id))
        return found

    async def list_crons(
        self,
        *,
        tenant: str = "",
        assistant_id: str | None = None,
        thread_id: str | None = None,
        enabled: bool | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> builtins.list[Cron]:
        """The tenant's crons, oldest first."""
        check_page(limit, offset)
        filters = {"assistant_id": assistant_id, "thread_id": thread_id, "enabled": enabled}
        used = {k: v for k, v in filters.items() if v is not None}
        return await self._list_crons(tenant, used, limit, offset)

    async def update_cron(
        self,
        cron_id: str,
        *,
        tenant: str = "",
        schedule: str | None = None,
        timezone: str | None = _UNSET,
        enabled: bool | None = None,
        end_time: datetime | None = _UNSET,
        now: datetime | None = None,
    ) -> Cron:
        """Change a cron; its next fire is recomputed from ``now`` (missed slots never fire).

        Raises:
            CronNotFoundError: missing or foreign.
            InvalidRunRequestError: a bad schedule, timezone, ``enabled`` or end time.
        """
        current = await self.get_cron(cron_id, tenant=tenant)
        changes: dict[str, Any] = {}
        if schedule is not None:
            changes["schedule"] = check_schedule(schedule)
        if timezone is not _UNSET:
            check_timezone(timezone)
            changes["timezone"] = timezone
        if enabled is not None:
            changes["enabled"] = _check_enabled(enabled)
        if end_time is not _UNSET:
            changes["end_time"] = _check_end_time(end_time)
        changes["next_run_at"] = next_fire(
            changes.get("schedule", current.schedule),
            changes.get("timezone", current.timezone),
            now or datetime.now(UTC),
        )
        updated = await self._update_cron(cron_id, tenant, changes)
        if updated is None:
            raise CronNotFoundError(no_cron(cron_id))
        return updated

    async def delete_cron(self, cron_id: str, *, tenant: str = "") -> None:
        if not await self._delete_cron(cron_id, tenant):
            raise CronNotFoundError(no_cron(cron_id))

    # -- the scheduler's statements ---------------------------------------------------------

    async def due_crons(self, now: datetime, *, limit: int = 100) -> builtins.list[Cron]:
        """Every tenant's crons due at ``now``, the longest overdue first."""
        return await self._due_crons(now, limit)

    async def fire_cron(self, cron: Cron, now: datetime) -> Created | None:
        """Fire ``cron``'s current slot once; its next slot is the first after ``now``.

        Returns the run it created, or ``None`` when the slot was fired already
        (by another scheduler) or the cron is no longer due.

        Raises:
            TetherError: the run could not be created (a bad payload, a busy
                thread with ``multitask_strategy="reject"``, a deleted
                assistant); call :meth:`skip_cron_slot` so the slot is not
                tried again.
        """
        valid, assistant = await self._checked(cron_run_request(cron), cron.tenant_id, now)
        upcoming = next_fire(cron.schedule, cron.timezone, now)
        return await self._fire_cron(cron, now, upcoming, (valid, assistant))

    async def skip_cron_slot(self, cron: Cron, now: datetime) -> None:
        """Record the cron's current slot as fired with no run, and move on."""
        await self._fire_cron(cron, now, next_fire(cron.schedule, cron.timezone, now), None)

    async def expire_deadlines(self, now: datetime, *, limit: int = 100) -> builtins.list[Run]:
        """End as ``timeout`` (§3.8) every run whose deadline passed before ``now`` and
        that no worker is running: ``pending``, ``interrupted``, or ``running`` with
        its lease expired and not taken over (e.g. no worker has its graph). Returns
        them as they were (an interrupted one's ``waiting_on`` names the approvals
        to cancel)."""
        return await self._expire_deadlines(now, limit)

    async def waiting_on_approvals(self, *, limit: int = 1000) -> builtins.list[Run]:
        """Every tenant's interrupted runs that wait on a tether approval."""
        runs = await self._waiting_runs(limit)
        return [r for r in runs if any(w.approval_id for w in r.waiting_on)]

    async def rolled_back_runs(
        self, since: datetime, until: datetime, *, limit: int = 1000
    ) -> builtins.list[Run]:
        """Every tenant's runs cancelled with ``rollback`` after they had started (a
        claim or a resume), ended between ``since`` and ``until``, oldest first."""
        return await self._rolled_back_runs(since, until, limit)

    async def remove_stale_workers(self, before: datetime) -> int:
        """Delete worker rows whose last heartbeat is older than ``before``."""
        return await self._remove_workers(before)

    async def thread_tenant(self, thread_id: str) -> str | None:
        """The tenant of a thread, for the scheduler (which serves every tenant)."""
        return await self._thread_tenant(thread_id)
