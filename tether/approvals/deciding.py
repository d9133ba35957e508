"""The I/O of deciding: :func:`decide` (async) and :func:`decide_sync` (its thin sync twin).

See :mod:`tether.approvals.decisions` for the checks and the exactly-once rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.pregel import Pregel
from langgraph.types import StateSnapshot

from tether.approvals.audit import audit_document
from tether.approvals.decisions import (
    DecisionResult,
    build_decision,
    check_request,
    interrupt_id_for,
    not_pending,
    require_record,
    result_of,
    resume_command,
)
from tether.approvals.errors import (
    AlreadyDecidedError,
    ApprovalConfigError,
    ApprovalError,
    ApproverNotAllowedError,
)
from tether.approvals.identity import Decider, DecisionPayload
from tether.approvals.request import APPROVAL_KIND, DECISION_KIND, ApprovalRequest
from tether.runtime import aunfinished, unfinished
from tether.store import store_for

__all__ = [
    "decide",
    "decide_as",
    "decide_as_sync",
    "decide_sync",
    "resume_decided",
    "resume_decided_sync",
    "settle",
    "settle_sync",
]


def _config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def _check_graph(graph: Any) -> Pregel[Any, Any, Any, Any]:
    if not isinstance(graph, Pregel) or graph.checkpointer in (None, True, False):
        raise ApprovalConfigError(
            "graph= must be the compiled graph that runs the thread, compiled with the "
            "checkpointer: builder.compile(checkpointer=saver)"
        )
    return graph


def _decided_audit(request: ApprovalRequest, doc: dict[str, Any]) -> dict[str, Any]:
    return audit_document(
        request,
        "decided",
        by=doc["by"],
        decider_source=doc.get("decider_source"),
        outcome=doc["decision"],
        policy=doc["policy"],
        reason=doc["reason"],
        decided_args_sha256=doc["args_sha256"],
    )


def _trusted(by: str, roles: Iterable[str]) -> Decider:
    """The library caller's ``by=``/``roles=``, taken on trust (the caller is the boundary)."""
    if not by or not isinstance(by, str):
        raise ApproverNotAllowedError("a decision must say who decides (by='user id')")
    return Decider(by, roles, source="caller")


def _payload(body: DecisionPayload | Mapping[str, Any]) -> DecisionPayload:
    return body if isinstance(body, DecisionPayload) else DecisionPayload.from_body(body)


def _document(
    request: ApprovalRequest, decider: Decider, payload: DecisionPayload, now: datetime | None
) -> dict[str, Any]:
    return build_decision(
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


def _lost_race(request: ApprovalRequest) -> AlreadyDecidedError:
    return AlreadyDecidedError(
        f"approval {request.approval_id} was decided by someone else a moment ago; this "
        "decision was not recorded and did not resume the run"
    )


async def settle(
    checkpointer: BaseCheckpointSaver[Any],
    graph: Any,
    request: ApprovalRequest,
    doc: dict[str, Any],
) -> DecisionResult:
    """Store ``doc`` once (put-if-absent), audit it, and resume the run with it."""
    graph = _check_graph(graph)
    store = store_for(checkpointer)
    config = _config(request.thread_id)
    interrupt_id = interrupt_id_for(await graph.aget_state(config), request.approval_id)
    if interrupt_id is None:
        raise not_pending(request.approval_id, request.thread_id)
    if not await store.insert(DECISION_KIND, request.approval_id, doc, thread_id=request.thread_id):
        raise _lost_race(request)
    await store.append_step(request.thread_id, _decided_audit(request, doc))
    await graph.ainvoke(resume_command(interrupt_id, doc), config)
    return await _aresult(graph, config, request.approval_id, doc)


def settle_sync(
    checkpointer: BaseCheckpointSaver[Any],
    graph: Any,
    request: ApprovalRequest,
    doc: dict[str, Any],
) -> DecisionResult:
    """Sync twin of :func:`settle`."""
    graph = _check_graph(graph)
    store = store_for(checkpointer)
    config = _config(request.thread_id)
    interrupt_id = interrupt_id_for(graph.get_state(config), request.approval_id)
    if interrupt_id is None:
        raise not_pending(request.approval_id, request.thread_id)
    if not store.sync.insert(DECISION_KIND, request.approval_id, doc, thread_id=request.thread_id):
        raise _lost_race(request)
    store.sync.append_step(request.thread_id, _decided_audit(request, doc))
    graph.invoke(resume_command(interrupt_id, doc), config)
    return _result(graph, config, request.approval_id, doc)


async def decide(
    checkpointer: BaseCheckpointSaver[Any],
    thread_id: str | None,
    approval_id: str,
    decision: str,
    *,
    graph: Any,
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
        graph: The compiled graph that runs the thread (with the checkpointer).
        by: Who decides.
        roles: The decider's roles, as your identity provider states them.
        args_sha256: The ``args_sha256`` the decider was shown; must match.
        edited_args: For ``"edit"``: the arguments to run instead (validated).
        reason: Why; shown to the agent on reject and edit, and audited.
        now: The current time (injectable for tests).

    Returns:
        A :class:`DecisionResult` with what the thread waits on next.

    Raises:
        UnknownApprovalError, AlreadyDecidedError, ApproverNotAllowedError,
        ApprovalExpiredError, ArgsHashMismatchError, InvalidEditError,
        ApprovalNotPendingError: See :mod:`tether.approvals.decisions`.
    """
    payload = DecisionPayload(decision, args_sha256, edited_args, reason)
    return await _adecide(
        checkpointer, graph, thread_id=thread_id, approval_id=approval_id,
        decider=_trusted(by, roles), payload=payload, now=now,
    )  # fmt: skip


def decide_sync(
    checkpointer: BaseCheckpointSaver[Any],
    thread_id: str | None,
    approval_id: str,
    decision: str,
    *,
    graph: Any,
    by: str,
    roles: Iterable[str] = (),
    args_sha256: str | None = None,
    edited_args: dict[str, Any] | None = None,
    reason: str | None = None,
    now: datetime | None = None,
) -> DecisionResult:
    """Sync twin of :func:`decide` (not from the checkpointer's own event loop)."""
    payload = DecisionPayload(decision, args_sha256, edited_args, reason)
    return _decide(
        checkpointer, graph, thread_id=thread_id, approval_id=approval_id,
        decider=_trusted(by, roles), payload=payload, now=now,
    )  # fmt: skip


async def decide_as(
    checkpointer: BaseCheckpointSaver[Any],
    decider: Decider,
    approval_id: str,
    payload: DecisionPayload | Mapping[str, Any],
    *,
    graph: Any,
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
        thread_id: The thread the request must belong to (``None``: any).
        now: The current time (injectable for tests).

    Raises:
        ApprovalConfigError: ``decider`` is not a :class:`Decider`, or the body
            is malformed or names a decider.
        UnknownApprovalError, AlreadyDecidedError, ApproverNotAllowedError,
        ApprovalExpiredError, ArgsHashMismatchError, InvalidEditError,
        ApprovalNotPendingError: As for :func:`decide`.
    """
    parsed = _payload(payload)
    return await _adecide(
        checkpointer, graph, thread_id=thread_id, approval_id=approval_id,
        decider=_checked_decider(decider), payload=parsed, now=now,
    )  # fmt: skip


def decide_as_sync(
    checkpointer: BaseCheckpointSaver[Any],
    decider: Decider,
    approval_id: str,
    payload: DecisionPayload | Mapping[str, Any],
    *,
    graph: Any,
    thread_id: str | None = None,
    now: datetime | None = None,
) -> DecisionResult:
    """Sync twin of :func:`decide_as`."""
    parsed = _payload(payload)
    return _decide(
        checkpointer, graph, thread_id=thread_id, approval_id=approval_id,
        decider=_checked_decider(decider), payload=parsed, now=now,
    )  # fmt: skip


def _checked_decider(decider: Any) -> Decider:
    if not isinstance(decider, Decider):
        raise ApprovalConfigError(
            f"decider must be a Decider(user_id, roles, source) built from the authenticated "
            f"user, got {type(decider).__name__}"
        )
    return decider


async def _adecide(
    checkpointer: BaseCheckpointSaver[Any],
    graph: Any,
    *,
    thread_id: str | None,
    approval_id: str,
    decider: Decider,
    payload: DecisionPayload,
    now: datetime | None,
) -> DecisionResult:
    store = store_for(checkpointer)
    records = [await store.get(kind, approval_id) for kind in (APPROVAL_KIND, DECISION_KIND)]
    request = check_request(thread_id, approval_id, *records)
    return await settle(checkpointer, graph, request, _document(request, decider, payload, now))


def _decide(
    checkpointer: BaseCheckpointSaver[Any],
    graph: Any,
    *,
    thread_id: str | None,
    approval_id: str,
    decider: Decider,
    payload: DecisionPayload,
    now: datetime | None,
) -> DecisionResult:
    store = store_for(checkpointer)
    records = [store.sync.get(kind, approval_id) for kind in (APPROVAL_KIND, DECISION_KIND)]
    request = check_request(thread_id, approval_id, *records)
    return settle_sync(checkpointer, graph, request, _document(request, decider, payload, now))


def _undecided(approval_id: str) -> ApprovalError:
    return ApprovalError(
        f"approval {approval_id} has no stored decision; decide it first (`tether approvals "
        "approve|reject|edit`)"
    )


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
    graph = _check_graph(graph)
    store = store_for(checkpointer)
    record = require_record(None, approval_id, await store.get(APPROVAL_KIND, approval_id))
    decided = await store.get(DECISION_KIND, approval_id)
    if decided is None:
        raise _undecided(approval_id)
    config = _config(record.thread_id)
    state = await graph.aget_state(config)
    if not _resumable(state, approval_id, await aunfinished(graph, config)):
        raise not_pending(approval_id, record.thread_id)
    await graph.ainvoke(None, config)
    return await _aresult(graph, config, approval_id, decided.value)


def resume_decided_sync(
    checkpointer: BaseCheckpointSaver[Any], approval_id: str, *, graph: Any
) -> DecisionResult:
    """Sync twin of :func:`resume_decided`."""
    graph = _check_graph(graph)
    store = store_for(checkpointer)
    record = require_record(None, approval_id, store.sync.get(APPROVAL_KIND, approval_id))
    decided = store.sync.get(DECISION_KIND, approval_id)
    if decided is None:
        raise _undecided(approval_id)
    config = _config(record.thread_id)
    if not _resumable(graph.get_state(config), approval_id, unfinished(graph, config)):
        raise not_pending(approval_id, record.thread_id)
    graph.invoke(None, config)
    return _result(graph, config, approval_id, decided.value)


def _resumable(state: StateSnapshot, approval_id: str, left_unfinished: bool) -> bool:
    """Paused at this approval, or left unfinished with no person to wait for."""
    if interrupt_id_for(state, approval_id) is not None:
        return True
    # Killed after the decided step's writes were stored: nothing waits on a
    # person, yet the run has a step to fold in. A run paused at *another*
    # approval is not this decision's to resume.
    return left_unfinished and not state.interrupts


async def _aresult(
    graph: Pregel[Any, Any, Any, Any], config: RunnableConfig, approval_id: str, doc: dict[str, Any]
) -> DecisionResult:
    state = await graph.aget_state(config)
    return result_of(approval_id, doc, state, unfinished=await aunfinished(graph, config))


def _result(
    graph: Pregel[Any, Any, Any, Any], config: RunnableConfig, approval_id: str, doc: dict[str, Any]
) -> DecisionResult:
    return result_of(
        approval_id, doc, graph.get_state(config), unfinished=unfinished(graph, config)
    )
