"""The queue's filters and order, parsed from a query string with clear errors."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from tether.server._errors import ApiError

__all__ = ["SHOWS", "SORTS", "Filters", "parse_duration", "parse_filters"]

SHOWS = ("pending", "orphaned", "expired", "decided", "all")
"""Which requests to list: waiting on a person (the queue), waiting with no run waiting on
them, expired (or overdue), decided, or every one."""
SORTS = ("expiry", "age")
"""``expiry``: soonest-expiring first, then oldest; ``age``: oldest first, then soonest-expiring."""

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")


@dataclass(frozen=True)
class Filters:
    """What to list.

    Attributes:
        show: One of :data:`SHOWS`.
        approver: Only requests naming this user id among their approvers.
        role: Only requests naming this role among their approvers.
        tenant: The tenant asked for (must be the user's own; ``None``: not given).
        expiring_before: Only requests expiring before this time.
        older_than: Only requests made at least this long ago.
        mine: Only requests the current user may decide.
        sort: One of :data:`SORTS`.
    """

    show: str = "pending"
    approver: str | None = None
    role: str | None = None
    tenant: str | None = None
    expiring_before: datetime | None = None
    older_than: timedelta | None = None
    mine: bool = False
    sort: str = "expiry"


_LONGEST = 100 * 365 * 86400  # seconds: any longer cannot be subtracted from now


def parse_duration(text: str, name: str = "older_than") -> timedelta:
    """``"90"`` (seconds), ``"90s"``, ``"15m"``, ``"2h"`` or ``"3d"``.

    Raises:
        ApiError: 422 naming ``name`` and the accepted forms.
    """
    found = _DURATION.match(text)
    if found is None:
        raise ApiError(
            422,
            f"{name}={text!r} is not a duration; write seconds (90) or a number with "
            "s, m, h or d (90s, 15m, 2h, 3d)",
        )
    seconds = float(found[1]) * _UNITS[found[2] or "s"]
    if seconds > _LONGEST:
        raise ApiError(422, f"{name}={text!r} is longer than 100 years")
    return timedelta(seconds=seconds)


def _time(text: str, name: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ApiError(
            422, f"{name}={text!r} is not an ISO 8601 time, e.g. 2026-12-01T09:00:00+00:00"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _choice(query: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    value = (query.get(name) or choices[0]).strip()
    if value not in choices:
        raise ApiError(422, f"{name}={value!r} is not one of {', '.join(choices)}")
    return value


def _text(query: Mapping[str, str], name: str) -> str | None:
    value = (query.get(name) or "").strip()
    return value or None


def parse_filters(query: Mapping[str, str]) -> Filters:
    """The filters of a query string (empty values count as not given).

    Raises:
        ApiError: 422 naming the parameter that is malformed or unknown.
    """
    known = {
        "show",
        "approver",
        "role",
        "tenant",
        "expiring_before",
        "older_than",
        "mine",
        "sort",
    }
    unknown = sorted(set(query) - known)
    if unknown:
        raise ApiError(
            422, f"unknown filter {unknown[0]!r}; the filters are {', '.join(sorted(known))}"
        )
    before = _text(query, "expiring_before")
    older = _text(query, "older_than")
    mine = (query.get("mine") or "").strip().lower()
    if mine not in ("", "0", "1", "true", "false", "on", "off"):
        raise ApiError(422, f"mine={mine!r} must be true or false")
    return Filters(
        show=_choice(query, "show", SHOWS),
        approver=_text(query, "approver"),
        role=_text(query, "role"),
        tenant=query.get("tenant"),
        expiring_before=None if before is None else _time(before, "expiring_before"),
        older_than=None if older is None else parse_duration(older),
        mine=mine in ("1", "true", "on"),
        sort=_choice(query, "sort", SORTS),
    )
