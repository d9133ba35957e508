"""Building a :class:`NewRun` from ``Runtime.create``'s arguments, for the API and for crons.

:func:`run_request` is the one place that turns the keyword arguments of
``Runtime.create`` into a request, so a run a cron fires is exactly the run
``Runtime.create(**payload)`` would have made. A cron keeps those arguments as
its ``payload`` (JSON); :func:`check_payload` refuses unknown keys there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from tether.runtime.errors import InvalidRunRequestError
from tether.runtime.models import (
    Durability,
    IfNotExists,
    MultitaskStrategy,
    OnCompletion,
    StreamMode,
)
from tether.runtime.multitask import TETHER_RUN_MARK
from tether.runtime.store.types import NewRun
from tether.runtime.store.validation import check_mapping

__all__ = ["PAYLOAD_KEYS", "check_payload", "run_request"]

# The arguments of Runtime.create a cron's payload may carry (all JSON values).
PAYLOAD_KEYS = frozenset(
    {
        "input",
        "command",
        "config",
        "context",
        "metadata",
        "multitask_strategy",
        "after_seconds",
        "step_timeout",
        "stream_mode",
        "stream_subgraphs",
        "interrupt_before",
        "interrupt_after",
        "durability",
        "webhook",
    }
)


def check_payload(payload: object) -> dict[str, Any]:
    """A cron's payload: a mapping of :data:`PAYLOAD_KEYS` only."""
    checked = dict(check_mapping(payload, "payload"))
    for name in ("config", "context", "metadata"):
        check_mapping(checked.get(name), f"payload {name}")
    unknown = sorted(set(checked) - PAYLOAD_KEYS)
    if unknown:
        raise InvalidRunRequestError(
            f"payload key {unknown[0]!r} is not a run option; use some of "
            f"{', '.join(sorted(PAYLOAD_KEYS))}"
        )
    return checked


def run_request(
    assistant_id: str,
    *,
    thread_id: str | None = None,
    input: Any = None,
    command: Mapping[str, Any] | None = None,
    config: Mapping[str, Any] | None = None,
    context: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
    multitask_strategy: MultitaskStrategy = "enqueue",
    if_not_exists: IfNotExists = "create",
    on_completion: OnCompletion | None = None,
    after_seconds: float = 0,
    deadline: datetime | timedelta | None = None,
    step_timeout: float | None = None,
    stream_mode: StreamMode | Sequence[StreamMode] = "values",
    stream_subgraphs: bool = False,
    interrupt_before: Sequence[str] | None = None,
    interrupt_after: Sequence[str] | None = None,
    checkpoint_id: str | None = None,
    durability: Durability | None = None,
    run_id: str | None = None,
    webhook: str | None = None,
) -> NewRun:
    """The request ``Runtime.create`` sends for these arguments (see it for each one)."""
    kwargs: dict[str, Any] = {
        "config": dict(config or {}),
        "stream_mode": [stream_mode] if isinstance(stream_mode, str) else list(stream_mode),
        "subgraphs": stream_subgraphs,
    }
    optional = {
        "context": context,
        "interrupt_before": interrupt_before,
        "interrupt_after": interrupt_after,
        "checkpoint_id": checkpoint_id,
        "durability": durability,
        "webhook": webhook,
    }
    kwargs.update({k: v for k, v in optional.items() if v is not None})
    if metadata and TETHER_RUN_MARK in metadata:
        raise InvalidRunRequestError(
            f"metadata key {TETHER_RUN_MARK!r} is reserved: tether marks the runs that "
            "continue a compensation or a rollback with it"
        )
    deadline_at = datetime.now(UTC) + deadline if isinstance(deadline, timedelta) else deadline
    return NewRun(
        assistant_id=assistant_id,
        thread_id=thread_id,
        input=input,
        command=command,
        kwargs=kwargs,
        metadata=dict(metadata or {}),
        multitask_strategy=multitask_strategy,
        if_not_exists=if_not_exists,
        on_completion=on_completion,
        after_seconds=after_seconds,
        deadline_at=deadline_at,
        step_timeout=step_timeout,
        run_id=run_id,
    )
