"""Cron schedules: checking an expression and a timezone, and the next fire time.

The syntax is croniter's, as LangGraph's server uses: five fields (minute,
hour, day of month, month, day of week), names (``mon``, ``jan``), ``L``,
``#``, and the aliases ``@hourly``, ``@daily``, ``@weekly``, ``@monthly``,
``@yearly``; a sixth field counts seconds. A schedule is read in its cron's
timezone (an IANA name; ``None`` is UTC), so ``0 9 * * *`` in
``Europe/Paris`` fires at 09:00 Paris time, summer and winter.
"""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadCronError, CroniterBadDateError, croniter

from tether.runtime.errors import InvalidRunRequestError

__all__ = ["check_schedule", "check_timezone", "next_fire"]


def check_timezone(name: object) -> tzinfo:
    """The zone called ``name`` (``None``: UTC), or :class:`InvalidRunRequestError`."""
    if name is None:
        return UTC
    if not isinstance(name, str) or not name:
        raise InvalidRunRequestError(f"timezone must be an IANA zone name, got {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidRunRequestError(
            f"timezone {name!r} is not a known IANA zone name (e.g. 'UTC', 'Europe/Paris')"
        ) from None


def check_schedule(schedule: object) -> str:
    """``schedule`` if croniter reads it, else :class:`InvalidRunRequestError` naming it."""
    if not isinstance(schedule, str) or not schedule.strip():
        raise InvalidRunRequestError(
            f"schedule must be a cron expression such as '*/5 * * * *', got {schedule!r}"
        )
    try:
        croniter(schedule, datetime(2000, 1, 1, tzinfo=UTC))
    except (CroniterBadCronError, ValueError, KeyError) as exc:
        raise InvalidRunRequestError(
            f"schedule {schedule!r} is not a valid cron expression ({exc}); use five fields, "
            "minute hour day-of-month month day-of-week, e.g. '*/5 * * * *'"
        ) from None
    return schedule


def next_fire(schedule: str, timezone: str | None, after: datetime) -> datetime:
    """The first fire time of ``schedule`` strictly after ``after``, in UTC.

    Raises:
        InvalidRunRequestError: the schedule never fires again (e.g. 30 February).
    """
    zone = check_timezone(timezone)
    try:
        moment = croniter(schedule, after.astimezone(zone)).get_next(datetime)
    except CroniterBadDateError:
        raise InvalidRunRequestError(f"schedule {schedule!r} never fires") from None
    assert isinstance(moment, datetime)
    return moment.astimezone(UTC)
