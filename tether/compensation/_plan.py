"""Which effects a failed run had, newest first. Pure: records and steps in, effects out.

An effect is a durable tool call that is not read-only and either finished
(its record is ``done``) or may have acted (claimed, or failed in a way that
may come after the effect). Read-only tools, and attempts that failed before
any effect, are not effects. A record from before tools kept their arguments
counts as an effect that cannot be undone.

The order is the step log's: a finished call's tool step says when its result
was recorded. Calls that never finished come first (they are the newest: the
run failed in them).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tether.steps import DurableTool, Step
from tether.store import Record

__all__ = ["Effect", "effects_of"]


@dataclass(frozen=True)
class Effect:
    """One effect to compensate (or to list as not undone)."""

    key: str
    tool: str
    step_index: int | None
    args: dict[str, Any] | None
    result: Any
    undo: bool
    policy: str
    idempotency_key: str
    finished: bool
    created_at: float


def _effect(
    record: Record, steps: Mapping[str, Step], tools: Mapping[str, DurableTool]
) -> Effect | None:
    value = record.value
    tool = tools.get(str(value.get("tool")))
    if tool is not None and tool.read_only:
        return None
    state = value.get("state")
    if state == "failed" and value.get("before_effect") is True:
        return None
    finished = state == "done"
    if finished and "effect" in value and value["effect"] is None:
        return None  # recorded as read-only
    # A record from an older version has no entry: an effect whose arguments are unknown.
    entry: dict[str, Any] = value.get("effect") or {}
    step = steps.get(record.key)
    return Effect(
        key=record.key,
        tool=str(value.get("tool", "")),
        step_index=None if step is None else step.index,
        args=entry.get("args"),
        result=None if step is None else step.output,
        undo=entry.get("args") is not None and tool is not None and tool.compensate is not None,
        policy=str(entry.get("policy") or ""),
        idempotency_key=str(value.get("idempotency_key", "")),
        finished=finished,
        created_at=record.created_at,
    )


def effects_of(
    records: Iterable[Record],
    steps: Iterable[Step],
    tools: Mapping[str, DurableTool],
    runs: Collection[str] | None = None,
) -> list[Effect]:
    """The effects among a thread's tool records (of ``runs`` only, if given), newest first."""
    by_key = {s.key: s for s in steps if s.kind == "tool" and s.key}
    found = []
    for record in records:
        if runs is not None and record.run_id not in runs:
            continue
        effect = _effect(record, by_key, tools)
        if effect is not None:
            found.append(effect)
    return sorted(
        found,
        key=lambda e: (
            e.step_index is None,
            -1 if e.step_index is None else e.step_index,
            e.created_at,
        ),
        reverse=True,
    )
