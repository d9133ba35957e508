"""How a run's execution ended, mapped to the run's and the thread's status. Pure.

The worker drives ``astream`` to its end and only then asks this module what
the run became (design I1: ``state.next`` alone never decides it). The thread
follows LangGraph's rules: ``error`` after an error or a timeout, otherwise
``interrupted`` when the final state has work left, otherwise ``idle``; the
store makes it ``busy`` when another run waits on the thread.

| how it ended                                   | run           | thread                    |
|------------------------------------------------|---------------|---------------------------|
| normally, interrupts or ``next`` left          | ``interrupted``| ``interrupted``          |
| normally, nothing left                         | ``success``   | ``idle``                  |
| cancelled (``interrupt``)                      | ``cancelled`` | ``interrupted``/``idle``  |
| cancelled (``rollback``)                       | ``cancelled`` | ``interrupted``/``idle``  |
| deadline passed                                | ``timeout``   | ``error``                 |
| any other exception                            | ``error``     | ``error``                 |
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tether.runtime.models import WaitingOn
from tether.runtime.store.base import KEEP, Outcome

__all__ = [
    "cancelled",
    "completed",
    "error_body",
    "failed",
    "interrupts_by_task",
    "timed_out",
    "waiting_on",
]

_APPROVAL_TYPE = "tether.approval"
# Exception types whose message is shown as is; any other error's message is
# kept too (tether runs the user's own code), but its type is named exactly.
_MESSAGE_LIMIT = 4000


def error_body(error: BaseException) -> dict[str, Any]:
    """``{"error": type name, "message": text}``, LangGraph's shape for a run's error."""
    message = str(error)
    if len(message) > _MESSAGE_LIMIT:
        message = message[:_MESSAGE_LIMIT] + "…"
    return {"error": type(error).__name__, "message": message}


def waiting_on(interrupts: Sequence[Any]) -> tuple[WaitingOn, ...]:
    """What an interrupted run waits on: one entry per interrupt (``approval_id`` when
    the interrupt is a tether approval request)."""
    found: list[WaitingOn] = []
    for item in interrupts:
        value = getattr(item, "value", None)
        approval = None
        if isinstance(value, Mapping) and value.get("type") == _APPROVAL_TYPE:
            approval = str(value.get("approval_id") or "") or None
        found.append(WaitingOn(str(getattr(item, "id", "")), "", approval))
    return tuple(found)


def interrupts_by_task(tasks: Sequence[Any]) -> dict[str, list[dict[str, Any]]]:
    """The thread's ``interrupts`` map: task id → ``[{"id", "value"}]`` (LangGraph's shape)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for task in tasks:
        found = [{"id": i.id, "value": i.value} for i in getattr(task, "interrupts", ())]
        if found:
            out[str(task.id)] = found
    return out


def completed(
    values: Any, next_nodes: Sequence[str], interrupts: Sequence[Any], tasks: Sequence[Any]
) -> Outcome:
    """The stream ended normally: ``interrupted`` if work is left, else ``success``."""
    if interrupts or next_nodes:
        return Outcome(
            status="interrupted",
            thread_status="interrupted",
            values=values,
            interrupts=interrupts_by_task(tasks),
            waiting_on=waiting_on(interrupts),
        )
    return Outcome(status="success", thread_status="idle", values=values, interrupts={})


def cancelled(
    action: str, reason: str, *, values: Any = KEEP, next_nodes: Sequence[str] = ()
) -> Outcome:
    """A cancel stopped the run; the thread keeps (interrupt) or lost (rollback) its state."""
    return Outcome(
        status="cancelled",
        thread_status="interrupted" if next_nodes else "idle",
        values=values,
        reason=f"{action}: {reason}" if reason else action,
    )


def timed_out(message: str) -> Outcome:
    body = {"error": "TimeoutError", "message": message}
    return Outcome(
        status="timeout",
        thread_status="error",
        error=body,
        thread_error=body,
        reason="deadline passed",
    )


def failed(
    error: BaseException, *, values: Any = KEEP, compensation: Mapping[str, Any] | None = None
) -> Outcome:
    """The run raised. ``compensation``: what undoing its effects did (a compensating graph)."""
    body: dict[str, Any] = error_body(error)
    if compensation is not None:
        body["compensation"] = dict(compensation)
    return Outcome(
        status="error", thread_status="error", error=body, thread_error=body, values=values
    )
