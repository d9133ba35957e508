"""Retention policies: how old a thread may get, per run status, tenant and assistant.

A policy is a list of rules. Each rule names a run status (the status of the
thread's newest run: ``success``, ``error``, ``cancelled``, ``timeout`` or
``interrupted``), optionally a tenant and an assistant, the age by last
activity past which it acts, and what it does then:

- ``delete``: the thread and everything tether stored for it (checkpoints,
  records, step log, runs, events), after an audit summary is written;
- ``keep_latest``: prune its checkpoints to the newest one, keeping its
  records (a pending approval's request, the step log a replay reads).

When several rules match a thread the most specific wins (tenant and
assistant, then tenant, then assistant, then status alone). The same policy is
written in code::

    RetentionPolicy(rules=[Rule("success", max_age=timedelta(days=30), action="delete")])

or in ``tether.json`` next to ``langgraph.json``::

    {"retention": {"rules": [{"status": "success", "max_age": "30d", "action": "delete"}],
                   "audit_max_age": "400d", "every": "1h"}}

and :func:`load_policy` checks every field, naming it in the error. A duration
is at most :data:`MAX_DURATION` (100 years), so ``now - max_age`` is always a
date, and ``every`` is at least :data:`MIN_EVERY` (1 second).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, get_args

from tether.retention.errors import RetentionPolicyError

__all__ = [
    "ACTIONS",
    "CONFIG_FILE",
    "MAX_DURATION",
    "MIN_EVERY",
    "STATUSES",
    "Action",
    "RetentionPolicy",
    "Rule",
    "check_age",
    "load_policy",
    "parse_duration",
    "policy_from_dict",
    "project_policy",
]

Status = Literal["success", "error", "cancelled", "timeout", "interrupted"]
Action = Literal["delete", "keep_latest"]
STATUSES: tuple[str, ...] = get_args(Status)
ACTIONS: tuple[str, ...] = get_args(Action)
CONFIG_FILE = "tether.json"
"""The file next to ``langgraph.json`` whose ``retention`` section is the policy."""

MAX_DURATION = timedelta(days=36500)
"""The longest duration a policy takes (100 years): ``now - max_age`` stays a date."""
MIN_EVERY = timedelta(seconds=1)
"""The shortest sweep interval: the scheduler ticks about once a second."""

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)([smhdw])", re.ASCII)  # fullmatch: no spaces
_NOT_A_DURATION = (
    "is not a duration; use a positive number of seconds or a number with s, m, h, d or w, "
    'e.g. "30d" (ASCII digits, no spaces)'
)
_TOO_LONG = "is longer than 100 years (36500d), the longest duration a policy takes"
_TOO_SHORT = "is shorter than 1s, the shortest interval (the scheduler ticks about once a second)"
_SECTION_KEYS = {"rules", "audit_max_age", "receipt_max_age", "batch_size", "every"}
_RULE_KEYS = {"status", "max_age", "action", "tenant", "assistant"}


def parse_duration(value: Any, where: str) -> timedelta:
    """``"30d"``, ``"12h"``, ``"15m"``, ``"45s"``, ``"2w"`` or a number of seconds.

    The number is ASCII digits with no spaces around it or its unit, and the
    duration at most :data:`MAX_DURATION`.

    Raises:
        RetentionPolicyError: naming ``where`` and the value.
    """
    seconds = _seconds(value)
    if seconds is None or not seconds > 0 or seconds == float("inf"):
        raise RetentionPolicyError(f"{where}: {_shown(value)} {_NOT_A_DURATION}")
    if seconds > MAX_DURATION.total_seconds():  # before timedelta(), which would overflow
        raise RetentionPolicyError(f"{where}: {_shown(value)} {_TOO_LONG}")
    duration = timedelta(seconds=seconds)
    if duration <= timedelta(0):
        raise RetentionPolicyError(f"{where}: {_shown(value)} is shorter than a microsecond")
    return duration


def _seconds(value: Any) -> float | None:
    """The seconds a duration's value says, or ``None`` for no duration (a huge int stays int)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    if isinstance(value, str) and (found := _DURATION.fullmatch(value)):
        return float(found.group(1)) * _UNITS[found.group(2)]
    return None


def _shown(value: Any, limit: int = 40) -> str:
    """``repr(value)`` cut to ``limit`` characters: a file may hold a 400-digit number."""
    try:
        text = repr(value)
    except ValueError:  # an int past Python's limit on digits converted to text
        return "a number too long to show"
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _interval(value: Any, where: str) -> timedelta:
    """:func:`parse_duration` for ``every``, which is at least :data:`MIN_EVERY`."""
    every = parse_duration(value, where)
    if every < MIN_EVERY:
        raise RetentionPolicyError(f"{where}: {_shown(value)} {_TOO_SHORT}")
    return every


def check_age(value: Any, where: str) -> None:
    """Refuse an age given in code that is not a timedelta in (0, :data:`MAX_DURATION`]."""
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise RetentionPolicyError(f"{where} must be a positive timedelta")
    if value > MAX_DURATION:
        raise RetentionPolicyError(f"{where}: {_human(value)} {_TOO_LONG}")


@dataclass(frozen=True)
class Rule:
    """One retention rule (see the module docstring).

    Attributes:
        status: The newest run's status this rule covers.
        max_age: Age by last activity past which the rule acts.
        action: ``delete`` or ``keep_latest``.
        tenant: Only this tenant's threads (``None``: every tenant).
        assistant: Only threads whose newest run's assistant id or graph id is
            this (``None``: every assistant).
    """

    status: str
    max_age: timedelta
    action: str = "delete"
    tenant: str | None = None
    assistant: str | None = None

    def __post_init__(self) -> None:
        where = f"rule {self.status!r}"
        if self.status not in STATUSES:
            raise RetentionPolicyError(
                f"status: {self.status!r} is not a run status; use one of {', '.join(STATUSES)}"
            )
        if self.action not in ACTIONS:
            raise RetentionPolicyError(
                f"{where}: action {self.action!r} is not one of {', '.join(ACTIONS)}"
            )
        check_age(self.max_age, f"{where}: max_age")
        for name in ("tenant", "assistant"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise RetentionPolicyError(f"{where}: {name} must be a non-empty string or None")

    @property
    def specificity(self) -> int:
        """2 for a tenant, 1 for an assistant: the higher sum wins."""
        return 2 * (self.tenant is not None) + (self.assistant is not None)

    @property
    def scope(self) -> tuple[str, str | None, str | None]:
        return (self.status, self.tenant, self.assistant)

    def describe(self) -> str:
        """E.g. ``success>30 days, 0:00:00 delete (tenant acme)``, for reports."""
        scope = [
            f"{k} {v}" for k, v in (("tenant", self.tenant), ("assistant", self.assistant)) if v
        ]
        tail = f" ({', '.join(scope)})" if scope else ""
        return f"{self.status}>{_human(self.max_age)} {self.action}{tail}"


def _human(age: timedelta) -> str:
    seconds = age.total_seconds()
    for unit in ("w", "d", "h", "m"):
        if seconds % _UNITS[unit] == 0:
            return f"{int(seconds // _UNITS[unit])}{unit}"
    return f"{seconds:g}s"


@dataclass(frozen=True)
class RetentionPolicy:
    """Rules plus the audit store's own retention and the sweep's pace.

    Attributes:
        rules: The rules; at most one per (status, tenant, assistant).
        audit_max_age: How long audit summaries are kept (``None``: until
            deleted by hand).
        receipt_max_age: How long erasure receipts are kept (``None``: forever).
        batch_size: Threads read and handled per batch.
        every: How often the scheduler runs the sweep.
    """

    rules: tuple[Rule, ...] = ()
    audit_max_age: timedelta | None = None
    receipt_max_age: timedelta | None = None
    batch_size: int = 500
    every: timedelta = field(default_factory=lambda: timedelta(hours=1))

    def __post_init__(self) -> None:
        object.__setattr__(self, "rules", tuple(self.rules))
        for index, rule in enumerate(self.rules):
            if not isinstance(rule, Rule):
                raise RetentionPolicyError(f"rules[{index}]: expected a Rule, got {rule!r}")
        _unique_scopes(list(enumerate(self.rules)))
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int):
            raise RetentionPolicyError(f"batch_size: expected an integer, got {self.batch_size!r}")
        if not 1 <= self.batch_size <= 10_000:
            raise RetentionPolicyError(
                f"batch_size: {self.batch_size} is outside 1..10000 (a batch is held in memory)"
            )
        for name in ("audit_max_age", "receipt_max_age"):
            if getattr(self, name) is not None:
                check_age(getattr(self, name), name)
        check_age(self.every, "every")
        if self.every < MIN_EVERY:
            raise RetentionPolicyError(f"every: {_human(self.every)} {_TOO_SHORT}")

    def check_now(self, now: datetime) -> None:
        """Refuse a ``now`` the sweep cannot measure this policy's ages from.

        ``now`` needs a UTC offset, and it, each rule's cutoff ``now - max_age``
        and the audit summaries' ``now + audit_max_age`` must be dates in UTC
        (years 1 to 9999).

        Raises:
            ValueError: naming ``now`` and, when one does not fit, the age.
        """
        if not isinstance(now, datetime) or now.tzinfo is None:
            raise ValueError(f"now: {now!r} is not a datetime with a UTC offset")
        at = now.isoformat()
        _fits(now, timedelta(0), f"now: {at} is not a date in UTC (years 1 to 9999)")
        for rule in self.rules:
            _fits(
                now,
                -rule.max_age,
                f"now: {at} is too early for rule {rule.describe()}: "
                f"{_human(rule.max_age)} before it is before year 1",
            )
        if self.audit_max_age is not None:
            _fits(
                now,
                self.audit_max_age,
                f"now: {at} is too late for audit_max_age {_human(self.audit_max_age)}: "
                "that long after it is after year 9999",
            )

    @property
    def youngest(self) -> timedelta | None:
        """The smallest ``max_age``: no thread younger than it is a candidate."""
        return min((r.max_age for r in self.rules), default=None)

    def rule_for(
        self, status: str | None, tenant: str, assistant_id: str | None, graph_id: str | None
    ) -> Rule | None:
        """The most specific rule covering a thread, or ``None``."""
        names = {assistant_id, graph_id} - {None}
        matching = [
            r
            for r in self.rules
            if r.status == status
            and (r.tenant is None or r.tenant == tenant)
            and (r.assistant is None or r.assistant in names)
        ]
        return max(matching, key=lambda r: r.specificity, default=None)


def _fits(now: datetime, delta: timedelta, problem: str) -> None:
    """Raise ``ValueError(problem)`` unless ``now + delta`` is a date, in UTC too."""
    try:
        (now + delta).astimezone(UTC)
    except OverflowError:
        raise ValueError(problem) from None


def policy_from_dict(section: Mapping[str, Any], where: str = "retention") -> RetentionPolicy:
    """Build a policy from a ``retention`` section (see the module docstring).

    Raises:
        RetentionPolicyError: naming the field, e.g. ``retention.rules[1].action``.
    """
    if not isinstance(section, Mapping):
        raise RetentionPolicyError(f"{where}: expected an object, got {type(section).__name__}")
    _no_unknown(section, _SECTION_KEYS, where)
    raw_rules = section.get("rules")
    if not isinstance(raw_rules, list) or not raw_rules:
        raise RetentionPolicyError(f"{where}.rules: expected a non-empty list of rules")
    indexed = [
        (i, rule) for i, raw in enumerate(raw_rules) for rule in _rules(raw, f"{where}.rules[{i}]")
    ]
    _unique_scopes(indexed, where)
    options: dict[str, Any] = {}
    for name in ("audit_max_age", "receipt_max_age"):
        if section.get(name) is not None:
            options[name] = parse_duration(section[name], f"{where}.{name}")
    if "every" in section:
        options["every"] = _interval(section["every"], f"{where}.every")
    if "batch_size" in section:
        options["batch_size"] = section["batch_size"]
    try:
        return RetentionPolicy(rules=tuple(rule for _, rule in indexed), **options)
    except RetentionPolicyError as exc:
        raise RetentionPolicyError(f"{where}.{exc}") from None


def _rules(raw: Any, where: str) -> Iterable[Rule]:
    if not isinstance(raw, Mapping):
        raise RetentionPolicyError(f"{where}: expected an object, got {type(raw).__name__}")
    _no_unknown(raw, _RULE_KEYS, where)
    for name in ("status", "max_age"):
        if name not in raw:
            raise RetentionPolicyError(f"{where}.{name}: missing")
    statuses = _statuses(raw["status"], f"{where}.status")
    action = raw.get("action", "delete")
    if action not in ACTIONS:
        raise RetentionPolicyError(f"{where}.action: {action!r} is not one of {', '.join(ACTIONS)}")
    age = parse_duration(raw["max_age"], f"{where}.max_age")
    scope = {}
    for name in ("tenant", "assistant"):
        value = raw.get(name)
        if value is not None and (not isinstance(value, str) or not value):
            raise RetentionPolicyError(f"{where}.{name}: expected a non-empty string")
        scope[name] = value
    return [Rule(s, age, action, **scope) for s in statuses]


def _statuses(value: Any, where: str) -> list[str]:
    """A rule's ``status``: one run status or a non-empty list of distinct ones."""
    statuses = value if isinstance(value, list) else [value]
    if not statuses:
        raise RetentionPolicyError(
            f"{where}: an empty list matches no thread; name at least one of {', '.join(STATUSES)}"
        )
    for index, status in enumerate(statuses):
        if status not in STATUSES:
            raise RetentionPolicyError(
                f"{where}: {status!r} is not a run status; use one of {', '.join(STATUSES)}"
            )
        if status in statuses[:index]:
            raise RetentionPolicyError(f"{where}: {status!r} is listed twice")
    return statuses


def _unique_scopes(indexed: list[tuple[int, Rule]], where: str = "") -> None:
    """Refuse two rules of one scope, naming the entries of ``rules`` they came from
    (``where``: the section they were read from, if any)."""
    prefix = f"{where}." if where else ""
    seen: dict[tuple[str, str | None, str | None], int] = {}
    for index, rule in indexed:
        if rule.scope in seen:
            raise RetentionPolicyError(
                f"{prefix}rules[{index}]: a second rule for status {rule.status!r}, tenant "
                f"{rule.tenant!r}, assistant {rule.assistant!r} (rules[{seen[rule.scope]}] "
                "has the same scope); keep one"
            )
        seen[rule.scope] = index


def _no_unknown(data: Mapping[str, Any], known: set[str], where: str) -> None:
    unknown = sorted(set(data) - known)
    if unknown:
        raise RetentionPolicyError(
            f"{where}: unknown field {unknown[0]!r}; expected {', '.join(sorted(known))}"
        )


def load_policy(path: str | Path) -> RetentionPolicy:
    """The policy in a ``tether.json`` file's ``retention`` section.

    Raises:
        RetentionPolicyError: the file is missing, not JSON, or the section is malformed.
    """
    file = Path(path)
    try:
        data = json.loads(file.read_text())
    except FileNotFoundError:
        raise RetentionPolicyError(f"{file}: no such retention policy file") from None
    except (OSError, ValueError) as exc:
        raise RetentionPolicyError(f"{file}: not a readable JSON file ({exc})") from None
    if not isinstance(data, Mapping) or "retention" not in data:
        raise RetentionPolicyError(
            f'{file}: no "retention" section; expected {{"retention": {{"rules": [...]}}}}'
        )
    try:
        return policy_from_dict(data["retention"])
    except RetentionPolicyError as exc:
        raise RetentionPolicyError(f"{file}: {exc}") from None


def project_policy(langgraph_json: str | Path) -> RetentionPolicy | None:
    """The policy in ``tether.json`` beside a project's ``langgraph.json``, if there is one."""
    candidate = Path(langgraph_json).parent / CONFIG_FILE
    if not candidate.exists():
        return None
    try:
        data = json.loads(candidate.read_text())
    except ValueError:
        data = None  # load_policy says what is wrong with it
    if isinstance(data, Mapping) and "retention" not in data:
        return None  # a tether.json without a retention section: no policy
    return load_policy(candidate)
