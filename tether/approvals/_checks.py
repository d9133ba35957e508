"""The checks a decision passes before it is stored, and the document it becomes.

Checks, in order, each with its own error: the request exists in the thread
(:class:`UnknownApprovalError`), it is not decided yet
(:class:`AlreadyDecidedError`), the decider may decide
(:class:`ApproverNotAllowedError`), it has not expired
(:class:`ApprovalExpiredError`), the decider saw these arguments
(:class:`ArgsHashMismatchError`), and edited arguments match the action's
schema (:class:`InvalidEditError`). :mod:`._decide` then checks that the run is
paused at it (:class:`ApprovalNotPendingError`). Nothing is written until every
check passed.

A request can also be cancelled with its run (:func:`cancel_decision`): the
stored decision ``cancelled`` then answers every later decision with
:class:`AlreadyDecidedError`, and the gate reads it as a rejection.

Edits are validated with the action's pydantic schema: a request records where
its schema lives (``module:QualName``) when the class is importable, and every
schema given to a gate in this process is also registered under the action's
name (building the graph registers the schemas of its gated tools).
"""

from __future__ import annotations

import importlib
import threading
from datetime import UTC, datetime
from typing import Any

import jsonschema  # type: ignore[import-untyped]
from langgraph.pregel import Pregel
from pydantic import BaseModel, ValidationError

from tether._text import text_problem
from tether.approvals._io import Graph
from tether.approvals._storage import ApprovalRequest, format_time, require_record
from tether.approvals.errors import (
    AlreadyDecidedError,
    ApprovalConfigError,
    ApprovalExpiredError,
    ApproverNotAllowedError,
    ArgsHashMismatchError,
    InvalidEditError,
)
from tether.approvals.hashing import args_sha256 as sha256_of
from tether.approvals.hashing import to_json_value
from tether.store import Record

__all__ = [
    "CANCELLED",
    "RESERVED_PREFIX",
    "SYSTEM_EXPIRY",
    "build_decision",
    "cancel_decision",
    "check_graph",
    "check_request",
    "register_args_schema",
    "resolve_args_schema",
    "schema_ref",
    "validate_args",
]

RESERVED_PREFIX = "tether:"
"""User ids starting with this are tether's own deciders (the expiry sweep)."""
SYSTEM_EXPIRY = f"{RESERVED_PREFIX}expiry"
CANCELLED = "cancelled"
"""The decision stored for a request whose run was cancelled (a rejection, to the gate)."""

_lock = threading.Lock()
_by_action: dict[str, type[BaseModel]] = {}


def check_graph(graph: Any) -> Graph:
    """``graph`` if it is a compiled graph with a checkpointer, the one to resume."""
    if not isinstance(graph, Pregel) or graph.checkpointer in (None, True, False):
        raise ApprovalConfigError(
            "graph= must be the compiled graph that runs the thread, compiled with the "
            "checkpointer: builder.compile(checkpointer=saver)"
        )
    return graph


def check_request(
    thread_id: str | None, approval_id: str, request: Record | None, decided: Record | None
) -> ApprovalRequest:
    """The stored request, after the existence and already-decided checks."""
    request = require_record(thread_id, approval_id, request)
    parsed = ApprovalRequest.from_dict(request.value)
    if parsed.status == "voided":
        raise AlreadyDecidedError(
            f"approval {approval_id} was voided ({parsed.status_reason}) after it was decided; "
            "decide the fresh request that replaced it (`tether approvals list`)"
        )
    if decided is not None:
        d = decided.value
        if d["decision"] == CANCELLED:
            raise AlreadyDecidedError(
                f"approval {approval_id} was cancelled with its run by {d['by']} at {d['at']} "
                f"({d['reason']}); it can no longer be decided"
            )
        raise AlreadyDecidedError(
            f"approval {approval_id} was already decided ({d['decision']} by {d['by']} at "
            f"{d['at']}); a decision is final and resumes the run once"
        )
    return parsed


def _check_person(
    request: ApprovalRequest,
    by: str,
    roles: tuple[str, ...],
    moment: datetime,
    args_sha256: str | None,
) -> None:
    """The checks on a person's decision: who, when, and on which arguments."""
    if not by or not isinstance(by, str):
        raise ApproverNotAllowedError("a decision must say who decides (by='user id')")
    if by.startswith(RESERVED_PREFIX):
        raise ApproverNotAllowedError(
            f"{by!r} is reserved for tether's own deciders; a person decides under their own id"
        )
    if not request.approvers.allows(by, roles):
        allowed = request.approvers.to_dict()
        raise ApproverNotAllowedError(
            f"{by!r} (roles {list(roles)}) may not decide approval {request.approval_id}; "
            f"allowed: users {allowed['users']}, roles {allowed['roles']}"
        )
    if request.expired(moment):
        raise ApprovalExpiredError(
            f"approval {request.approval_id} expired at {request.expires_at}; it can no "
            "longer be decided. Run `tether approvals expire --url URL` to apply its "
            f"expiry policy ({request.on_expiry.to_dict()['policy']})"
        )
    if args_sha256 != request.args_sha256:
        raise ArgsHashMismatchError(
            f"approval {request.approval_id} shows arguments with sha256 "
            f"{request.args_sha256}, but the decision names {args_sha256!r}; look at the "
            "request again (`tether approvals show`) and decide on what it shows"
        )


def _check_text(name: str, value: str | None) -> None:
    """Refuse text no store keeps as given: a lone surrogate (not UTF-8) or a NUL.

    Checked before anything is stored: a decision written and then refused by
    the resume's own write would leave its run waiting for good.
    """
    if value is None:
        return
    problem = text_problem(value)
    if problem is not None:
        raise ApprovalConfigError(f"{name} of a decision {problem}")


def build_decision(
    request: ApprovalRequest,
    decision: str,
    *,
    by: str,
    roles: tuple[str, ...] = (),
    args_sha256: str | None,
    edited_args: dict[str, Any] | None = None,
    reason: str | None = None,
    now: datetime | None = None,
    policy: str | None = None,
    source: str | None = None,
) -> dict[str, Any]:
    """Check a decision against ``request`` and build the document to store and resume with.

    This is what :func:`tether.approvals.decide` checks and stores; it stores
    nothing and resumes nothing itself.

    Args:
        request: The stored request (:attr:`ApprovalView.request`).
        decision: ``"approve"``, ``"edit"`` or ``"reject"`` (``"expire"`` is the
            expiry sweep's, with ``by=SYSTEM_EXPIRY`` and a ``policy``).
        by: Who decides.
        roles: The decider's roles.
        args_sha256: The ``args_sha256`` the decider was shown; must match.
        edited_args: For ``"edit"``: the arguments to run instead (validated).
        reason: Why; shown to the agent on reject and edit, and audited.
        now: The current time (default: now).
        policy: For ``"expire"``: ``"stop"`` or ``"safe_alternative"``.
        source: How the decider's identity was established (see
            :class:`tether.approvals.Decider`), stored as ``decider_source``.

    Returns:
        The decision document (also the value the run resumes with).

    Raises:
        ApproverNotAllowedError, ApprovalExpiredError, ArgsHashMismatchError,
        InvalidEditError: The decision fails a check (see the module docstring).
        ApprovalConfigError: An unknown decision, or edited arguments without
            ``"edit"``.
    """
    moment = now or datetime.now(UTC)
    _check_text("reason", reason)
    _check_text("by", by)
    for role in roles:
        _check_text("a role", role)
    if decision not in ("approve", "edit", "reject", "expire"):
        raise ApprovalConfigError(
            f"decision must be 'approve', 'edit' or 'reject', got {decision!r}"
        )
    if decision == "expire":
        if by != SYSTEM_EXPIRY or policy not in ("stop", "safe_alternative"):
            raise ApprovalConfigError("only the expiry sweep settles a request as expired")
    else:
        _check_person(request, by, roles, moment, args_sha256)
    args: dict[str, Any] | None = None
    if decision == "edit":
        if edited_args is None:
            raise ApprovalConfigError("an 'edit' decision needs edited_args")
        args = validate_args(
            request.action, request.args_schema, edited_args, request.args_json_schema
        )
    elif edited_args is not None:
        raise ApprovalConfigError(
            f"edited_args are only taken with decision='edit', not {decision!r}"
        )
    if decision == "expire" and policy == "safe_alternative" and request.alternative:
        args = request.alternative["args"]
    return {
        "approval_id": request.approval_id,
        "thread_id": request.thread_id,
        "action": request.action,
        "decision": decision,
        "by": by,
        "roles": list(roles),
        "decider_source": source or ("tether" if decision == "expire" else "caller"),
        "at": format_time(moment),
        "reason": reason,
        "policy": policy,
        "shown_args_sha256": request.args_sha256,
        "args": args,
        "args_sha256": None if args is None else sha256_of(args),
    }


def cancel_decision(
    request: ApprovalRequest, *, by: str, reason: str, now: datetime | None = None
) -> dict[str, Any]:
    """The decision document that cancels ``request`` (no person's checks apply).

    It has the shape of :func:`build_decision`'s documents; nothing may run
    (``args`` is ``None``) and the reason is what the agent is told.
    """
    return {
        "approval_id": request.approval_id,
        "thread_id": request.thread_id,
        "action": request.action,
        "decision": CANCELLED,
        "by": by,
        "roles": [],
        "decider_source": "tether" if by.startswith(RESERVED_PREFIX) else "caller",
        "at": format_time(now or datetime.now(UTC)),
        "reason": reason,
        "policy": None,
        "shown_args_sha256": request.args_sha256,
        "args": None,
        "args_sha256": None,
    }


# -- the argument schemas of edits ---------------------------------------------------------
def register_args_schema(action: str, schema: type[BaseModel]) -> None:
    """Make ``schema`` the argument schema of ``action`` in this process."""
    with _lock:
        _by_action[action] = schema


def schema_ref(schema: type[BaseModel]) -> str | None:
    """``module:QualName`` if the class can be imported back by that name, else ``None``."""
    ref = f"{schema.__module__}:{schema.__qualname__}"
    return ref if _import(ref) is schema else None


def _import(ref: str) -> Any:
    module_name, _, qualname = ref.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError):
        return None
    return target


def resolve_args_schema(action: str, ref: str | None) -> type[BaseModel] | None:
    """The schema recorded for a request: by import path first, then by action name."""
    if ref:
        found = _import(ref)
        if isinstance(found, type) and issubclass(found, BaseModel):
            return found
    with _lock:
        return _by_action.get(action)


def validate_args(
    action: str, ref: str | None, args: Any, json_schema: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``args`` validated against the action's schema, as plain JSON.

    The pydantic schema known in this process comes first; else ``json_schema``,
    the JSON schema stored with the request (so a process without the graph,
    such as the server or the CLI, still checks an edit). Either way a key the
    schema does not name is refused, not dropped.

    Raises:
        InvalidEditError: Not a JSON object, no schema known for the action, or
            the arguments do not match it.
    """
    if not isinstance(args, dict):
        raise InvalidEditError(
            f"edited arguments for {action!r} must be a JSON object, got {type(args).__name__}"
        )
    schema = resolve_args_schema(action, ref)
    if schema is None and json_schema is not None:
        return _valid_by_json_schema(action, args, json_schema)
    if schema is None:
        raise InvalidEditError(
            f"cannot validate edited arguments: no argument schema for action {action!r} is "
            "known in this process; pass args_schema= (a pydantic model) to the gate and build "
            "the graph before deciding"
        )
    if schema.model_config.get("extra") != "allow":
        names = {f.alias or name for name, f in schema.model_fields.items()}
        names |= set(schema.model_fields)
        _refuse_unknown(action, args, names)
    try:
        model = schema.model_validate(args)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}"
            for err in exc.errors()
        )
        raise InvalidEditError(
            f"edited arguments for {action!r} do not match its schema {schema.__name__}: {problems}"
        ) from None
    out: dict[str, Any] = to_json_value(model.model_dump(mode="json"), what="edited arguments")
    return out


def _refuse_unknown(action: str, args: dict[str, Any], names: set[str]) -> None:
    unknown = sorted(str(key) for key in args if key not in names)
    if unknown:
        raise InvalidEditError(
            f"edited arguments for {action!r} name {', '.join(map(repr, unknown))}, which its "
            f"schema does not have (it takes {', '.join(map(repr, sorted(names))) or 'none'})"
        )


def _valid_by_json_schema(
    action: str, args: dict[str, Any], json_schema: dict[str, Any]
) -> dict[str, Any]:
    """``args`` checked against the JSON schema stored with the request."""
    if json_schema.get("additionalProperties") is not True:
        _refuse_unknown(action, args, set(json_schema.get("properties") or {}))
    plain: dict[str, Any] = to_json_value(args, what="edited arguments")
    validator = jsonschema.Draft202012Validator(json_schema)
    problems = sorted(validator.iter_errors(plain), key=lambda e: list(e.absolute_path))
    if problems:
        said = "; ".join(
            f"{'.'.join(str(p) for p in err.absolute_path) or '(root)'}: {err.message}"
            for err in problems
        )
        raise InvalidEditError(f"edited arguments for {action!r} do not match its schema: {said}")
    return plain
