"""Deciding: a person's decision checked, stored once, and delivered to the paused run.

Who decides is kept apart from what is decided. In the library and the CLI,
``by=`` and roles are strings the caller states and is trusted for. A server's
person is whoever its authentication says, and the request body is untrusted.
So the decision path takes the two separately:

* a :class:`Decider` (user id, roles, and where that identity came from), built
  by the server from its authentication, never from the body;
* a :class:`DecisionPayload` (decision, shown args hash, edited arguments,
  reason), which has no identity field, and whose parser
  (:meth:`DecisionPayload.from_body`) refuses a body that tries to carry one.

:func:`decide_as` takes both; :func:`decide` is the same path with
``by``/``roles`` as the trusted caller's ``Decider``. The checks are in
:mod:`._checks`. The decision is then stored with an atomic put-if-absent keyed
by the approval id: of two concurrent submissions exactly one is stored, and
only that one resumes the run, through ``Command(resume={interrupt_id:
decision})``. The interrupt id is found in the graph's state by the approval id
the interrupt carries, so several approvals pending in one step are each
decided by id.

Who resumes the run is a parameter (:mod:`._resuming`): ``graph=``, the
compiled graph that runs the thread (built over the same checkpointer in the
deciding process), or ``resumer=``, e.g. a runtime that enqueues the run for a
worker. Exactly one of them. :func:`settle` is the storing-and-resuming half
alone, for a decision document built elsewhere. Each protocol is a generator of
operations (:mod:`._io`); the sync twins run the same generator.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import StateSnapshot

from tether.approvals._checks import RESERVED_PREFIX, build_decision, check_graph, check_request
from tether.approvals._io import (
    Flow,
    GetState,
    Graph,
    Insert,
    Read,
    Resume,
    Unfinished,
    run,
    run_sync,
)
from tether.approvals._resuming import (
    DecisionResult,
    GraphResumer,
    Resumer,
    SyncResumer,
    choose_resumer,
    interrupt_id,
    not_pending,
    pending,
    resumed,
    state_result,
)
from tether.approvals._storage import (
    APPROVAL_KIND,
    DECISION_KIND,
    ApprovalRequest,
    audit,
    require_record,
)
from tether.approvals.errors import (
    AlreadyDecidedError,
    ApprovalConfigError,
    ApprovalError,
    ApproverNotAllowedError,
)
from tether.store import store_for

__all__ = [
    "Decider",
    "DecisionPayload",
    "decide",
    "decide_as",
    "decide_as_sync",
    "decide_sync",
    "resume_decided",
    "resume_decided_sync",
    "settle",
    "settle_sync",
    "settling",
]

_PAYLOAD_FIELDS = ("decision", "args_sha256", "edited_args", "reason")
# Body keys that try to say who decides; refused with a message naming the fix.
_IDENTITY_FIELDS = frozenset(
    {"by", "roles", "role", "decider", "user", "user_id", "approver", "decided_by", "identity"}
)


@dataclass(frozen=True)
class Decider:
    """The person deciding, as the caller (or a server's authentication) vouches for them.

    Args:
        user_id: The person's id, compared with ``Approvers(users=...)``.
        roles: The roles they hold, compared with ``Approvers(roles=...)``.
        source: How the identity was established, recorded with the decision
            and its audit step: ``"caller"`` for the library's ``by=``,
            ``"cli"`` for ``tether approvals``, or a server's own label
            (``"oidc:https://issuer"``).
    """

    user_id: str
    roles: tuple[str, ...]
    source: str

    def __init__(self, user_id: str, roles: Iterable[str] = (), source: str = "caller") -> None:
        if not isinstance(user_id, str) or not user_id:
            raise ApprovalConfigError("a Decider needs a non-empty user id (str)")
        if user_id.startswith(RESERVED_PREFIX):
            raise ApprovalConfigError(
                f"user id {user_id!r} is reserved: ids starting with {RESERVED_PREFIX!r} "
                "are tether's own deciders (the expiry sweep)"
            )
        if isinstance(roles, str) or not isinstance(roles, Iterable):
            raise ApprovalConfigError(
                f"Decider roles must be a list of role names, got {roles!r}; "
                "write roles=['finance']"
            )
        names = tuple(roles)
        if not all(isinstance(r, str) and r for r in names):
            raise ApprovalConfigError(f"Decider roles must be non-empty strings, got {names!r}")
        if not isinstance(source, str) or not source:
            raise ApprovalConfigError("Decider source must be a non-empty label, e.g. 'cli'")
        object.__setattr__(self, "user_id", user_id)
        object.__setattr__(self, "roles", names)
        object.__setattr__(self, "source", source)


@dataclass(frozen=True)
class DecisionPayload:
    """What a person submits about a request; who they are is not part of it.

    Args:
        decision: ``"approve"``, ``"edit"`` or ``"reject"``.
        args_sha256: The ``args_sha256`` the person was shown; must match.
        edited_args: For ``"edit"``: the arguments to run instead.
        reason: Why; shown to the agent on reject and edit, and audited.
    """

    decision: str
    args_sha256: str | None = None
    edited_args: dict[str, Any] | None = None
    reason: str | None = None

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> DecisionPayload:
        """Parse an untrusted request body (decoded JSON).

        Raises:
            ApprovalConfigError: The body is not an object, misses ``decision``,
                has a field of the wrong type or an unknown field, or tries to
                say who decides (``by``, ``roles``, ``decider``, ...): that comes
                from the authenticated identity only.
        """
        if not isinstance(body, Mapping):
            raise ApprovalConfigError(
                f"a decision must be a JSON object, got {type(body).__name__}"
            )
        smuggled = sorted(k for k in body if str(k).lower() in _IDENTITY_FIELDS)
        if smuggled:
            raise ApprovalConfigError(
                f"a decision's body may not say who decides (it has {', '.join(smuggled)}): "
                "the decider is the authenticated user, passed as decider=Decider(...)"
            )
        unknown = sorted(str(k) for k in body if k not in _PAYLOAD_FIELDS)
        if unknown:
            raise ApprovalConfigError(
                f"unknown field {unknown[0]!r} in a decision; the fields are "
                f"{', '.join(_PAYLOAD_FIELDS)}"
            )
        if not isinstance(body.get("decision"), str):
            raise ApprovalConfigError("a decision needs 'decision': 'approve', 'edit' or 'reject'")
        for name in ("args_sha256", "reason"):
            if body.get(name) is not None and not isinstance(body[name], str):
                raise ApprovalConfigError(f"'{name}' must be a string")
        edited = body.get("edited_args")
        if edited is not None and not isinstance(edited, dict):
            raise ApprovalConfigError("'edited_args' must be a JSON object of arguments")
        return cls(
            decision=body["decision"],
            args_sha256=body.get("args_sha256"),
            edited_args=edited,
            reason=body.get("reason"),
        )


# -- the protocol, once --------------------------------------------------------------------
def settling(resumer: Any, request: ApprovalRequest, doc: dict[str, Any]) -> Flow[DecisionResult]:
    """Store ``doc`` once (put-if-absent), audit it, and have ``resumer`` continue the run."""
    thread_id, approval_id = request.thread_id, request.approval_id
    if not (yield from pending(resumer, request)):
        raise not_pending(approval_id, thread_id)
    if not (yield Insert(DECISION_KIND, approval_id, doc, thread_id)):
        raise AlreadyDecidedError(
            f"approval {approval_id} was decided by someone else a moment ago; this "
            "decision was not recorded and did not resume the run"
        )
    yield audit(
        request,
        "decided",
        by=doc["by"],
        decider_source=doc.get("decider_source"),
        outcome=doc["decision"],
        policy=doc["policy"],
        reason=doc["reason"],
        decided_args_sha256=doc["args_sha256"],
    )
    result: DecisionResult = yield from resumed(resumer, request, doc)
    return result


def _deciding(
    resumer: Any,
    thread_id: str | None,
    approval_id: str,
    *,
    decider: Decider,
    payload: DecisionPayload,
    now: datetime | None,
) -> Flow[DecisionResult]:
    stored = yield Read(APPROVAL_KIND, approval_id)
    decided = yield Read(DECISION_KIND, approval_id)
    request = check_request(thread_id, approval_id, stored, decided)
    doc = build_decision(
        request,
        payload.decision,
        by=decider.user_id,
        roles=decider.roles,
        source=decider.source,
        args_sha256=payload.args_sha256,
        edited_args=payload.edited_args,
        reason=payload.reason,
        now=now,
    )
    return (yield from settling(resumer, request, doc))


def _resumable(state: StateSnapshot, approval_id: str, left_unfinished: bool) -> bool:
    """Paused at this approval, or left unfinished with no person to wait for."""
    if interrupt_id(state, approval_id) is not None:
        return True
    # Killed after the decided step's writes were stored: nothing waits on a
    # person, yet the run has a step to fold in. A run paused at *another*
    # approval is not this decision's to resume.
    return left_unfinished and not state.interrupts


def _resuming(graph: Graph, approval_id: str) -> Flow[DecisionResult]:
    record = require_record(None, approval_id, (yield Read(APPROVAL_KIND, approval_id)))
    decided = yield Read(DECISION_KIND, approval_id)
    if decided is None:
        raise ApprovalError(
            f"approval {approval_id} has no stored decision; decide it first (`tether approvals "
            "approve|reject|edit`)"
        )
    thread_id = record.thread_id
    state: StateSnapshot = yield GetState(graph, thread_id)
    if not _resumable(state, approval_id, (yield Unfinished(graph, thread_id))):
        raise not_pending(approval_id, thread_id)
    yield Resume(graph, thread_id, None)
    result: DecisionResult = yield from state_result(graph, thread_id, approval_id, decided.value)
    return result


# -- the entry points ----------------------------------------------------------------------
def _trusted(by: str, roles: Iterable[str]) -> Decider:
    """The library caller's ``by=``/``roles=``, taken on trust (the caller is the boundary)."""
    if not by or not isinstance(by, str):
        raise ApproverNotAllowedError("a decision must say who decides (by='user id')")
    return Decider(by, roles, source="caller")


def _checked_decider(decider: Any) -> Decider:
    if not isinstance(decider, Decider):
        raise ApprovalConfigError(
            f"decider must be a Decider(user_id, roles, source) built from the authenticated "
            f"user, got {type(decider).__name__}"
        )
    return decider


def _payload(body: DecisionPayload | Mapping[str, Any]) -> DecisionPayload:
    return body if isinstance(body, DecisionPayload) else DecisionPayload.from_body(body)


async def decide(
    checkpointer: BaseCheckpointSaver[Any],
    thread_id: str | None,
    approval_id: str,
    decision: str,
    *,
    graph: Any = None,
    resumer: Resumer | None = None,
    by: str,
    roles: Iterable[str] = (),
    args_sha256: str | None = None,
    edited_args: dict[str, Any] | None = None,
    reason: str | None = None,
    now: datetime | None = None,
) -> DecisionResult:
    """Decide an approval request and resume the run that waits on it.

    ``by`` and ``roles`` are taken on trust: the caller is the trust boundary.
    A server deciding for an authenticated user uses :func:`decide_as`, which
    keeps the identity apart from the request body.

    Args:
        checkpointer: The checkpointer the run uses.
        thread_id: The run's thread (``None``: take it from the stored request).
        approval_id: The request's id (from the interrupt payload or ``list_approvals``).
        decision: ``"approve"``, ``"edit"`` or ``"reject"``.
        graph: The compiled graph that runs the thread (with the checkpointer):
            the run is resumed here. Give this or ``resumer``.
        resumer: Who resumes the run instead (a :class:`Resumer`), e.g. a
            runtime that enqueues it for a worker.
        by: Who decides.
        roles: The decider's roles, as your identity provider states them.
        args_sha256: The ``args_sha256`` the decider was shown; must match.
        edited_args: For ``"edit"``: the arguments to run instead (validated).
        reason: Why; shown to the agent on reject and edit, and audited.
        now: The current time (injectable for tests).

    Returns:
        A :class:`DecisionResult` with what the thread waits on next.

    Raises:
        ApprovalConfigError: Both or neither of ``graph`` and ``resumer``.
        UnknownApprovalError, AlreadyDecidedError, ApproverNotAllowedError,
        ApprovalExpiredError, ArgsHashMismatchError, InvalidEditError,
        ApprovalNotPendingError: See docs/approvals.md (the checks, in order).
    """
    chosen = choose_resumer(graph, resumer, sync=False)
    payload = DecisionPayload(decision, args_sha256, edited_args, reason)
    flow = _deciding(
        chosen, thread_id, approval_id, decider=_trusted(by, roles), payload=payload, now=now
    )
    return await run(flow, store_for(checkpointer))


def decide_sync(
    checkpointer: BaseCheckpointSaver[Any],
    thread_id: str | None,
    approval_id: str,
    decision: str,
    *,
    graph: Any = None,
    resumer: SyncResumer | GraphResumer | None = None,
    by: str,
    roles: Iterable[str] = (),
    args_sha256: str | None = None,
    edited_args: dict[str, Any] | None = None,
    reason: str | None = None,
    now: datetime | None = None,
) -> DecisionResult:
    """Sync twin of :func:`decide` (not from the checkpointer's own event loop).

    ``resumer`` is a :class:`SyncResumer` (or a :class:`GraphResumer`).
    """
    chosen = choose_resumer(graph, resumer, sync=True)
    payload = DecisionPayload(decision, args_sha256, edited_args, reason)
    flow = _deciding(
        chosen, thread_id, approval_id, decider=_trusted(by, roles), payload=payload, now=now
    )
    return run_sync(flow, store_for(checkpointer))


async def decide_as(
    checkpointer: BaseCheckpointSaver[Any],
    decider: Decider,
    approval_id: str,
    payload: DecisionPayload | Mapping[str, Any],
    *,
    graph: Any = None,
    resumer: Resumer | None = None,
    thread_id: str | None = None,
    now: datetime | None = None,
) -> DecisionResult:
    """Decide as an authenticated person: the identity and the request body kept apart.

    For servers: ``decider`` comes from authentication, ``payload`` from the
    request body (a :class:`DecisionPayload`, or the decoded JSON, parsed with
    :meth:`DecisionPayload.from_body`). A body that tries to say who decides
    (``by``, ``roles``, ``decider``, ...) is refused before anything is read or
    written, so the recorded decider is always ``decider``.

    Args:
        checkpointer: The checkpointer the run uses.
        decider: Who decides, as the server's authentication established it.
        approval_id: The request's id.
        payload: What the person decided.
        graph: The compiled graph that runs the thread (with the checkpointer).
        resumer: Who resumes the run instead of ``graph`` (see :func:`decide`).
        thread_id: The thread the request must belong to (``None``: any).
        now: The current time (injectable for tests).

    Raises:
        ApprovalConfigError: ``decider`` is not a :class:`Decider`, the body
            is malformed or names a decider, or not exactly one of ``graph``
            and ``resumer`` was given.
        UnknownApprovalError, AlreadyDecidedError, ApproverNotAllowedError,
        ApprovalExpiredError, ArgsHashMismatchError, InvalidEditError,
        ApprovalNotPendingError: As for :func:`decide`.
    """
    parsed = _payload(payload)
    decider = _checked_decider(decider)
    chosen = choose_resumer(graph, resumer, sync=False)
    flow = _deciding(chosen, thread_id, approval_id, decider=decider, payload=parsed, now=now)
    return await run(flow, store_for(checkpointer))


def decide_as_sync(
    checkpointer: BaseCheckpointSaver[Any],
    decider: Decider,
    approval_id: str,
    payload: DecisionPayload | Mapping[str, Any],
    *,
    graph: Any = None,
    resumer: SyncResumer | GraphResumer | None = None,
    thread_id: str | None = None,
    now: datetime | None = None,
) -> DecisionResult:
    """Sync twin of :func:`decide_as`."""
    parsed = _payload(payload)
    decider = _checked_decider(decider)
    chosen = choose_resumer(graph, resumer, sync=True)
    flow = _deciding(chosen, thread_id, approval_id, decider=decider, payload=parsed, now=now)
    return run_sync(flow, store_for(checkpointer))


def _request_for(request: Any, doc: Any) -> ApprovalRequest:
    if not isinstance(request, ApprovalRequest):
        raise ApprovalConfigError(
            f"settle() needs the stored ApprovalRequest (get_approval(...).request), "
            f"got {type(request).__name__}"
        )
    if not isinstance(doc, dict) or doc.get("approval_id") != request.approval_id:
        raise ApprovalConfigError(
            f"settle() needs the decision document build_decision() made for approval "
            f"{request.approval_id}"
        )
    return request


async def settle(
    checkpointer: BaseCheckpointSaver[Any],
    request: ApprovalRequest,
    doc: dict[str, Any],
    *,
    graph: Any = None,
    resumer: Resumer | None = None,
) -> DecisionResult:
    """Store a decision built with :func:`build_decision` once, audit it, and resume the run.

    The second half of :func:`decide`, for a caller that checked and built the
    decision itself. Of concurrent settlements of one request exactly one is
    stored, and only that one resumes the run.

    Args:
        checkpointer: The checkpointer the run uses.
        request: The stored request (``get_approval(...).request``).
        doc: The decision document for it.
        graph: The compiled graph that runs the thread; or
        resumer: who resumes the run instead (see :func:`decide`).

    Raises:
        ApprovalConfigError: Not exactly one of ``graph`` and ``resumer``, or
            ``doc`` is not a decision for ``request``.
        ApprovalNotPendingError: The run does not wait on the request.
        AlreadyDecidedError: A decision for it is stored already.
    """
    chosen = choose_resumer(graph, resumer, sync=False)
    flow = settling(chosen, _request_for(request, doc), doc)
    return await run(flow, store_for(checkpointer))


def settle_sync(
    checkpointer: BaseCheckpointSaver[Any],
    request: ApprovalRequest,
    doc: dict[str, Any],
    *,
    graph: Any = None,
    resumer: SyncResumer | GraphResumer | None = None,
) -> DecisionResult:
    """Sync twin of :func:`settle`."""
    chosen = choose_resumer(graph, resumer, sync=True)
    flow = settling(chosen, _request_for(request, doc), doc)
    return run_sync(flow, store_for(checkpointer))


async def resume_decided(
    checkpointer: BaseCheckpointSaver[Any], approval_id: str, *, graph: Any
) -> DecisionResult:
    """Resume a run whose decision was stored but never delivered (the decider died).

    The gate takes the stored decision, so running the thread again is enough.
    It also finishes a run the decision did resume, when the process died
    after the approved step's writes were stored and before its checkpoint
    was: LangGraph then shows no pending interrupt and ``next == ()``, but
    :func:`tether.runtime.unfinished` sees the step still to be folded in.
    Use it only when the deciding process is known to be gone: while it is still
    resuming the run, a second resume would run the step twice.

    Raises:
        UnknownApprovalError: No such request.
        ApprovalError: The request has no decision yet.
        ApprovalNotPendingError: The run is neither paused at it nor left
            unfinished without a pending interrupt.
    """
    flow = _resuming(check_graph(graph), approval_id)
    return await run(flow, store_for(checkpointer))


def resume_decided_sync(
    checkpointer: BaseCheckpointSaver[Any], approval_id: str, *, graph: Any
) -> DecisionResult:
    """Sync twin of :func:`resume_decided`."""
    flow = _resuming(check_graph(graph), approval_id)
    return run_sync(flow, store_for(checkpointer))
