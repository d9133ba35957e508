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

and :func:`load_policy` checks every field, naming it in the error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal, get_args

from tether.retention.errors import RetentionPolicyError

__all__ = [
    "ACTIONS",
    "CONFIG_FILE",
    "STATUSES",
    "Action",
    "RetentionPolicy",
    "Rule",
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

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_SECTION_KEYS = {"rules", "audit_max_age", "receipt_max_age", "batch_size", "every"}
_RULE_KEYS = {"status", "max_age", "action", "tenant", "assistant"}


def parse_duration(value: Any, where: str) -> timedelta:
    """``"30d"``, ``"12h"``, ``"15m"``, ``"45s"``, ``"2w"`` or a number of seconds.

    Raises:
        RetentionPolicyError: naming ``where`` and the value.
    """
    seconds: float | None = None
    if isinstance(value, bool):
        seconds = None
    elif isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (found := _DURATION.match(value)):
        seconds = float(found.group(1)) * _UNITS[found.group(2)]
    if seconds is None or not seconds > 0 or seconds == float("inf"):
        raise RetentionPolicyError(
            f"{where}: {value!r} is not a duration; use a positive number of seconds or a "
            'number with s, m, h, d or w, e.g. "30d"'
        )
    return timedelta(seconds=seconds)


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
        if not isinstance(self.max_age, timedelta) or self.max_age <= timedelta(0):
            raise RetentionPolicyError(f"{where}: max_age must be a positive timedelta")
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
        seen: dict[tuple[str, str | None, str | None], int] = {}
        for index, rule in enumerate(self.rules):
            if not isinstance(rule, Rule):
                raise RetentionPolicyError(f"rules[{index}]: expected a Rule, got {rule!r}")
            if rule.scope in seen:
                raise RetentionPolicyError(
                    f"rules[{index}]: a second rule for status {rule.status!r}, tenant "
                    f"{rule.tenant!r}, assistant {rule.assistant!r} (rules[{seen[rule.scope]}] "
                    "has the same scope); keep one"
                )
            seen[rule.scope] = index
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int):
            raise RetentionPolicyError(f"batch_size: expected an integer, got {self.batch_size!r}")
        if not 1 <= self.batch_size <= 10_000:
            raise RetentionPolicyError(
                f"batch_size: {self.batch_size} is outside 1..10000 (a batch is held in memory)"
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
    rules = [rule for i, raw in enumerate(raw_rules) for rule in _rules(raw, f"{where}.rules[{i}]")]
    options: dict[str, Any] = {}
    for name in ("audit_max_age", "receipt_max_age"):
        if section.get(name) is not None:
            options[name] = parse_duration(section[name], f"{where}.{name}")
    if "every" in section:
        options["every"] = parse_duration(section["every"], f"{where}.every")
    if "batch_size" in section:
        options["batch_size"] = section["batch_size"]
    try:
        return RetentionPolicy(rules=tuple(rules), **options)
    except RetentionPolicyError as exc:
        raise RetentionPolicyError(f"{where}.{exc}") from None


def _rules(raw: Any, where: str) -> Iterable[Rule]:
    if not isinstance(raw, Mapping):
        raise RetentionPolicyError(f"{where}: expected an object, got {type(raw).__name__}")
    _no_unknown(raw, _RULE_KEYS, where)
    for name in ("status", "max_age"):
        if name not in raw:
            raise RetentionPolicyError(f"{where}.{name}: missing")
    statuses = raw["status"] if isinstance(raw["status"], list) else [raw["status"]]
    for status in statuses:
        if status not in STATUSES:
            raise RetentionPolicyError(
                f"{where}.status: {status!r} is not a run status; use one of {', '.join(STATUSES)}"
            )
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
