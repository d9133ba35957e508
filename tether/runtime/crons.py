"""The cron half of :class:`~tether.runtime.api.Runtime`: schedules that create runs.

A cron fires on its schedule (croniter syntax, as LangGraph's; read in its
``timezone``, UTC by default) and each fire creates one run, exactly as
``Runtime.create(assistant_id, thread_id=…, **payload)`` would::

    cron = await rt.create_cron("digest", "0 9 * * mon-fri", input={"day": "today"},
                                timezone="Europe/Paris")

The scheduler (one leader among the workers, ``tether.runtime.Scheduler``)
fires due crons; a slot fires at most once, and slots missed while no
scheduler ran collapse into one fire.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tether.runtime.models import Cron, OnCompletion

if TYPE_CHECKING:
    from tether.runtime.store.base import RunStore

__all__ = ["CronMethods"]

_KEEP: Any = object()  # update_cron: leave this field as it is


class CronMethods:
    """``create_cron``, ``get_cron``, ``list_crons``, ``update_cron`` and ``delete_cron``."""

    tenant: str

    if TYPE_CHECKING:

        @property
        def store(self) -> RunStore: ...

    async def create_cron(
        self,
        assistant_id: str,
        schedule: str,
        *,
        thread_id: str | None = None,
        input: Any = None,
        payload: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        timezone: str | None = None,
        end_time: datetime | None = None,
        on_run_completed: OnCompletion | None = None,
        enabled: bool = True,
    ) -> Cron:
        """Create a cron that creates a run of ``assistant_id`` on every slot of ``schedule``.

        Args:
            assistant_id: An assistant or graph id.
            schedule: A cron expression (``"*/5 * * * *"``; a sixth field counts seconds).
            thread_id: The thread every run continues; ``None``: each run is
                stateless, on a thread of its own.
            input: The runs' input (the same as ``payload={"input": …}``).
            payload: Other arguments of :meth:`Runtime.create` for each run
                (``config``, ``context``, ``metadata``, ``multitask_strategy``,
                ``stream_mode``, ``step_timeout``, …).
            metadata: The cron's metadata; each run gets it too, with ``cron_id``.
            timezone: The IANA zone the schedule is read in (default UTC).
            end_time: No fire after this moment.
            on_run_completed: ``"delete"`` (the default for stateless crons) or
                ``"keep"`` the thread of a stateless run.
            enabled: A disabled cron does not fire.

        Raises:
            InvalidRunRequestError: the schedule, timezone, payload, end time or
                ``on_run_completed`` is bad (the message names it).
            AssistantNotFoundError / ThreadNotFoundError: missing or foreign.
        """
        body = dict(payload or {})
        if input is not None:
            body["input"] = input
        return await self.store.create_cron(
            assistant_id,
            schedule,
            tenant=self.tenant,
            thread_id=thread_id,
            payload=body,
            timezone=timezone,
            end_time=end_time,
            metadata=metadata,
            on_run_completed=on_run_completed,
            enabled=enabled,
        )

    async def get_cron(self, cron_id: str) -> Cron:
        """Raises ``CronNotFoundError`` for a missing or foreign cron."""
        return await self.store.get_cron(cron_id, tenant=self.tenant)

    async def list_crons(
        self,
        *,
        assistant_id: str | None = None,
        thread_id: str | None = None,
        enabled: bool | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> builtins.list[Cron]:
        """This tenant's crons, oldest first."""
        return await self.store.list_crons(
            tenant=self.tenant,
            assistant_id=assistant_id,
            thread_id=thread_id,
            enabled=enabled,
            limit=limit,
            offset=offset,
        )

    async def update_cron(
        self,
        cron_id: str,
        *,
        schedule: str | None = None,
        enabled: bool | None = None,
        timezone: str | None = _KEEP,
        end_time: datetime | None = _KEEP,
    ) -> Cron:
        """Change a cron's ``schedule``, ``enabled``, ``timezone`` or ``end_time``
        (an argument not given is left as it is; ``end_time=None`` removes the end).

        Its next fire is recomputed from now, so re-enabling a cron never fires
        the slots it missed.

        Raises:
            CronNotFoundError: missing or foreign.
            InvalidRunRequestError: a bad schedule, timezone, ``enabled`` or end time.
        """
        changes: dict[str, Any] = {}
        if timezone is not _KEEP:
            changes["timezone"] = timezone
        if end_time is not _KEEP:
            changes["end_time"] = end_time
        return await self.store.update_cron(
            cron_id, tenant=self.tenant, schedule=schedule, enabled=enabled, **changes
        )

    async def delete_cron(self, cron_id: str) -> None:
        """Delete the cron (its runs stay). Raises ``CronNotFoundError``."""
        await self.store.delete_cron(cron_id, tenant=self.tenant)
