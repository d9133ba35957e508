"""``request_approval``: pause a step for a person's decision, as stored state.

Called inside a graph node (or a gated tool) at the step itself. The request
is stored, then a LangGraph ``interrupt`` pauses the run; no thread or process
waits. When a decision arrives (``decide``), LangGraph re-runs the node and the
same call returns an :class:`ApprovalOutcome`.

The approval id is derived from the thread, the task's namespace, a key (the
tool call id, an explicit ``key``, or the action and argument hash) and a
revision, so a replay raises the same request, never a new one. Just before
an approved action runs, the versions of the records it depends on are read
again; if one changed, the approval is void and a fresh request (revision + 1,
fresh observations) is raised instead.

The logic is written once, as a generator of storage operations; the sync and
async entry points only differ in how they perform them.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.types import interrupt
from pydantic import BaseModel

from tether.approvals.audit import write_audit, write_audit_sync
from tether.approvals.context import StepContext, step_context
from tether.approvals.errors import ApprovalConfigError
from tether.approvals.flow import (
    Audit,
    Decided,
    Flow,
    Get,
    Insert,
    Interrupt,
    Observe,
    Op,
    Versions,
    approval_flow,
)
from tether.approvals.outcome import ApprovalOutcome
from tether.approvals.policies import Approvers, ExpiryPolicy
from tether.approvals.request import APPROVAL_KIND, DECISION_KIND, Alternative
from tether.approvals.spec import ApprovalSpec, Observations, Reader, make_spec
from tether.store import RecordStore, store_for

__all__ = ["arequest_approval", "request_approval"]


def _context(config: RunnableConfig | None) -> StepContext:
    if config is None:
        try:
            config = get_config()
        except RuntimeError:  # outside any runnable: step_context names the fix
            config = {}
    return step_context(config)


def _start(
    kwargs: dict[str, Any], config: RunnableConfig | None
) -> tuple[ApprovalSpec, RecordStore, StepContext]:
    spec = make_spec(**kwargs)
    ctx = _context(config)
    return spec, store_for(ctx.checkpointer), ctx


def _advance(gen: Flow, value: Any) -> tuple[Op | None, ApprovalOutcome | None]:
    """Send ``value`` into the gate: the next operation, or the final outcome."""
    try:
        return gen.send(value), None
    except StopIteration as done:
        return None, done.value


def request_approval(
    action: str,
    args: Mapping[str, Any] | BaseModel,
    *,
    why: str,
    approvers: Approvers,
    expires_in: timedelta,
    on_expiry: ExpiryPolicy | str,
    affects: str = "",
    if_denied: str = "",
    observations: Observations | None = None,
    depends_on: Mapping[str, Reader] | None = None,
    alternative: Alternative | None = None,
    args_schema: type[BaseModel] | None = None,
    key: str | None = None,
    config: RunnableConfig | None = None,
) -> ApprovalOutcome:
    """Ask a person to decide on ``action(args)``; pauses the run until they do.

    Call it inside a sync node or tool. Use :func:`arequest_approval` in async code.

    Args:
        action: The action's name, e.g. ``"issue_refund"``.
        args: The resolved arguments (hashed with SHA-256 over canonical JSON).
        why: Why the agent wants to do it.
        approvers: Who may decide.
        expires_in: How long the request stays open (every request expires).
        on_expiry: ``Escalate(...)``, ``Stop()``/``"stop"`` or
            ``SafeAlternative()``/``"safe_alternative"``; never approve.
        affects: What the action changes (accounts, people, money).
        if_denied: What happens if it is rejected.
        observations: What the agent saw, shown to the approver: a dict, or a
            callable returning one (called again for a fresh request after a
            stale approval).
        depends_on: Named readers returning the current version of each record
            the action depends on; re-read just before the action runs.
        alternative: A safer action to take if the request expires under
            ``SafeAlternative``.
        args_schema: The pydantic model the arguments follow; edits are
            validated against it.
        key: Distinguishes several identical requests in one node.
        config: The node's config (found automatically inside a node).

    Returns:
        The settled :class:`ApprovalOutcome`.

    Raises:
        GraphInterrupt: (LangGraph's) the run pauses until a decision.
        ApprovalConfigError: Bad configuration (missing approvers, approve-on-timeout...).
    """
    spec, store, ctx = _start({k: v for k, v in locals().items() if k != "config"}, config)
    gen = approval_flow(spec, ctx, store.sync.keyed_hash())
    op, outcome = _advance(gen, None)
    while op is not None:
        op, outcome = _advance(gen, _perform_sync(op, spec, store))
    assert outcome is not None
    return outcome


async def arequest_approval(
    action: str,
    args: Mapping[str, Any] | BaseModel,
    *,
    why: str,
    approvers: Approvers,
    expires_in: timedelta,
    on_expiry: ExpiryPolicy | str,
    affects: str = "",
    if_denied: str = "",
    observations: Observations | None = None,
    depends_on: Mapping[str, Callable[[], Any | Awaitable[Any]]] | None = None,
    alternative: Alternative | None = None,
    args_schema: type[BaseModel] | None = None,
    key: str | None = None,
    config: RunnableConfig | None = None,
) -> ApprovalOutcome:
    """Async twin of :func:`request_approval`; readers and observations may be async."""
    spec, store, ctx = _start({k: v for k, v in locals().items() if k != "config"}, config)
    gen = approval_flow(spec, ctx, await store.keyed_hash())
    op, outcome = _advance(gen, None)
    while op is not None:
        op, outcome = _advance(gen, await _perform_async(op, spec, store))
    assert outcome is not None
    return outcome


def _call_sync(fn: Callable[[], Any], what: str) -> Any:
    value = fn()
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()
        raise ApprovalConfigError(f"{what} is async; use arequest_approval in an async node")
    return value


def _perform_sync(op: Op, spec: ApprovalSpec, store: RecordStore) -> Any:  # noqa: PLR0911 - one return per operation kind
    if isinstance(op, Interrupt):
        return interrupt(op.payload)
    if isinstance(op, Observe):
        obs = spec.observations
        return _call_sync(obs, "observations") if callable(obs) else obs
    if isinstance(op, Versions):
        return {k: _call_sync(r, f"depends_on[{k!r}]") for k, r in spec.depends_on.items()}
    if isinstance(op, Get):
        return store.sync.get(APPROVAL_KIND, op.key)
    if isinstance(op, Decided):
        found = store.sync.get(DECISION_KIND, op.key)
        return None if found is None else found.value
    if isinstance(op, Audit):
        write_audit_sync(store, op.request, op.event, **op.detail)
        return None
    r = op.request
    if isinstance(op, Insert):
        return store.sync.insert(APPROVAL_KIND, r.approval_id, r.to_dict(), thread_id=r.thread_id)
    store.sync.upsert(APPROVAL_KIND, r.approval_id, r.to_dict(), thread_id=r.thread_id)
    return None


async def _await_maybe(fn: Callable[[], Any]) -> Any:
    value = fn()
    return await value if inspect.isawaitable(value) else value


async def _perform_async(op: Op, spec: ApprovalSpec, store: RecordStore) -> Any:  # noqa: PLR0911 - one return per operation kind
    if isinstance(op, Interrupt):
        return interrupt(op.payload)
    if isinstance(op, Observe):
        obs = spec.observations
        return await _await_maybe(obs) if callable(obs) else obs
    if isinstance(op, Versions):
        return {k: await _await_maybe(r) for k, r in spec.depends_on.items()}
    if isinstance(op, Get):
        return await store.get(APPROVAL_KIND, op.key)
    if isinstance(op, Decided):
        found = await store.get(DECISION_KIND, op.key)
        return None if found is None else found.value
    if isinstance(op, Audit):
        await write_audit(store, op.request, op.event, **op.detail)
        return None
    r = op.request
    if isinstance(op, Insert):
        return await store.insert(APPROVAL_KIND, r.approval_id, r.to_dict(), thread_id=r.thread_id)
    await store.upsert(APPROVAL_KIND, r.approval_id, r.to_dict(), thread_id=r.thread_id)
    return None
