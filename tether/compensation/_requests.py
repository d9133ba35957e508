"""A person's part: the approval request a compensation raises, and reading its decision.

Two moments go to a person, each as a stored approval request (the same
document as any approval, so ``tether approvals list``, ``show`` and the inbox
show it, and :func:`tether.approvals.decide` decides it with every check):

* ``ask``: policy ``"ask"``: "undo issue_refund? approve to undo, reject to leave it";
* ``failed``: the undo raised: "issue_refund could not be reversed: decide".
  Approve tries the undo again (with the same idempotency key), edit tries it
  with the edited arguments, reject leaves the effect not undone.

An expired request leaves the effect not undone: a timeout never undoes.
Request ids are derived from the thread, the effect and the attempt, so a
process that dies after storing a request and before noting it finds the same
request again instead of raising a second one.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from tether.approvals import ApprovalRequest, Stop, args_sha256, register_args_schema
from tether.compensation._plan import Effect
from tether.compensation._settings import Compensation
from tether.steps import DurableTool

__all__ = [
    "ACTION_PREFIX",
    "LEAVING",
    "RETRYING",
    "edit_json_schema",
    "register_edit_schemas",
    "request_for",
    "shown",
]

ACTION_PREFIX = "compensate:"
RETRYING = ("approve", "edit")
LEAVING = ("reject", "expire", "cancelled")


def register_edit_schemas(tools: dict[str, DurableTool]) -> None:
    """Let a person edit an undo's arguments: each tool's schema validates the edit."""
    for name, tool in tools.items():
        schema = tool.args_schema
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            register_args_schema(f"{ACTION_PREFIX}{name}", schema)


def edit_json_schema(tool: DurableTool | None) -> dict[str, Any] | None:
    """The JSON schema of ``tool``'s arguments, stored with its requests: any process (one
    without the graph, such as the server or the CLI) validates an edit with it, and the
    inbox draws its form from it."""
    schema = None if tool is None else tool.args_schema
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        found: dict[str, Any] = schema.model_json_schema()
        return found
    return dict(schema) if isinstance(schema, dict) else None


def _time(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds")


def _approval_id(thread_id: str, key: str, stage: str, attempt: int) -> str:
    digest = hashlib.sha256(f"{thread_id}\0{key}\0{stage}\0{attempt}".encode()).hexdigest()
    return f"comp-{digest[:24]}"


def shown(value: Any) -> Any:
    """``value`` as JSON a person can read (the recorded result may be any object)."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return repr(value)


# How the runtime words a rollback's reason (tether.runtime: "cancelled with rollback[: why]").
_ROLLBACK = "cancelled with rollback"


def _ended(reason: str) -> str:
    """How the run ended, in a request's question."""
    if reason == _ROLLBACK:
        return "the run was cancelled with rollback"
    if reason.startswith(f"{_ROLLBACK}: "):
        return f"the run was cancelled with rollback ({reason[len(_ROLLBACK) + 2 :]})"
    return f"the run failed ({reason})"


def request_for(
    settings: Compensation,
    thread_id: str,
    effect: Effect,
    *,
    stage: str,
    attempt: int,
    reason: str,
    error: str | None = None,
    now: datetime | None = None,
    args: dict[str, Any] | None = None,
    args_json_schema: dict[str, Any] | None = None,
) -> ApprovalRequest:
    """The request for ``effect`` at ``stage`` (``ask`` or ``failed``) of attempt ``attempt``.

    ``args``: what the undo is to run with, shown and hashed (default: the
    effect's; a retry after an edit runs with the edited ones).
    """
    moment = now or datetime.now(UTC)
    args = (effect.args or {}) if args is None else args
    where = f"step {effect.step_index}" if effect.step_index is not None else "an unfinished step"
    if stage == "failed":
        why = (
            f"{effect.tool} could not be reversed ({error}): decide. Approve to try the "
            "undo again, edit to try it with other arguments, reject to leave it"
        )
    else:
        why = f"undo {effect.tool} because {_ended(reason)}? Approve to undo, reject to leave it"
    observations = {"result": shown(effect.result), "error": error, "run_failed": reason}
    return ApprovalRequest(
        approval_id=_approval_id(thread_id, effect.key, stage, attempt),
        thread_id=thread_id,
        action=f"{ACTION_PREFIX}{effect.tool}",
        args=shown(args),
        args_sha256=args_sha256(shown(args)),
        args_json_schema=args_json_schema,
        why=why,
        affects=f"the effect of {effect.tool} at {where} of thread {thread_id}",
        if_denied="the effect stays in the world and is listed as not undone",
        observations=observations,
        observations_sha256=args_sha256(observations),
        approvers=settings.approvers,
        requested_at=_time(moment),
        expires_at=_time(moment + settings.expires_in),
        on_expiry=Stop(),
        depends_on={},
        key=effect.key,
    )
