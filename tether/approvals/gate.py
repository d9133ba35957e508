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
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.types import interrupt
from pydantic import BaseModel

from tether.approvals.audit import write_audit, write_audit_sync
from tether.approvals.context import StepContext, step_context
from tether.approvals.errors import ApprovalConfigError, ApprovalMismatchError
from tether.approvals.hashing import args_sha256, canonical_json, to_json_value
from tether.approvals.outcome import ApprovalOutcome
from tether.approvals.policies import Approvers, ExpiryPolicy, SafeAlternative, expiry_policy
from tether.approvals.request import (
    APPROVAL_KIND,
    Alternative,
    ApprovalRequest,
    approval_id_for,
    format_time,
)
from tether.approvals.schemas import register_args_schema, schema_ref
from tether.store import RecordStore, store_for

__all__ = ["ApprovalSpec", "arequest_approval", "request_approval"]

Reader = Callable[[], Any]
Observations = Mapping[str, Any] | Callable[[], Any]


@dataclass(frozen=True)
class ApprovalSpec:
    """The validated arguments of one ``request_approval`` call."""

    action: str
    args: dict[str, Any]
    why: str
    affects: str
    if_denied: str
    observations: Observations
    approvers: Approvers
    expires_in: timedelta
    on_expiry: ExpiryPolicy
    depends_on: Mapping[str, Reader]
    alternative: Alternative | None
    args_schema: type[BaseModel] | None
    key: str | None


def _spec(**kw: Any) -> ApprovalSpec:
    action = kw["action"]
    if not isinstance(action, str) or not action:
        raise ApprovalConfigError(
            f"action must be a non-empty str naming the action, got {action!r}"
        )
    approvers = kw["approvers"]
    if not isinstance(approvers, Approvers):
        raise ApprovalConfigError(
            f"approvers must be Approvers(users=[...], roles=[...]), not {type(approvers).__name__}"
        )
    expires_in = kw["expires_in"]
    if not isinstance(expires_in, timedelta) or expires_in <= timedelta(0):
        raise ApprovalConfigError(
            f"expires_in must be a positive timedelta (every request expires), got {expires_in!r}"
        )
    on_expiry = expiry_policy(kw["on_expiry"])
    policies = [on_expiry]
    while hasattr(policies[-1], "then"):
        policies.append(policies[-1].then)
    alternative = kw["alternative"]
    if any(isinstance(p, SafeAlternative) for p in policies) and alternative is None:
        raise ApprovalConfigError(
            f"the expiry policy of {action!r} is SafeAlternative() but no alternative was "
            "proposed; pass alternative=Alternative(action=..., args=..., description=...)"
        )
    if alternative is not None and not isinstance(alternative, Alternative):
        raise ApprovalConfigError("alternative must be an Alternative(action=..., args=...)")
    depends_on = dict(kw["depends_on"] or {})
    for name, reader in depends_on.items():
        if not callable(reader):
            raise ApprovalConfigError(
                f"depends_on[{name!r}] must be a callable returning a version"
            )
    schema = kw["args_schema"]
    if schema is not None:
        if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            raise ApprovalConfigError("args_schema must be a pydantic BaseModel subclass")
        register_args_schema(action, schema)
    args = to_json_value(kw["args"], what=f"the arguments of {action!r}")
    if not isinstance(args, dict):
        raise ApprovalConfigError(f"the arguments of {action!r} must be a dict of named values")
    return ApprovalSpec(
        action=action,
        args=args,
        why=str(kw["why"]),
        affects=str(kw["affects"]),
        if_denied=str(kw["if_denied"]),
        observations=kw["observations"] or {},
        approvers=approvers,
        expires_in=expires_in,
        on_expiry=on_expiry,
        depends_on=depends_on,
        alternative=alternative,
        args_schema=schema,
        key=kw["key"],
    )


# -- the operations the logic asks its driver to perform ---------------------------------
@dataclass(frozen=True)
class _Observe:
    pass


@dataclass(frozen=True)
class _Versions:
    pass


@dataclass(frozen=True)
class _Get:
    key: str


@dataclass(frozen=True)
class _Insert:
    request: ApprovalRequest


@dataclass(frozen=True)
class _Upsert:
    request: ApprovalRequest


@dataclass(frozen=True)
class _Audit:
    request: ApprovalRequest
    event: str
    detail: dict[str, Any]


@dataclass(frozen=True)
class _Interrupt:
    payload: dict[str, Any]


_Op = _Observe | _Versions | _Get | _Insert | _Upsert | _Audit | _Interrupt


def _build(
    spec: ApprovalSpec,
    ctx: StepContext,
    *,
    revision: int,
    observations: Any,
    versions: dict[str, Any],
    replaces: str | None,
) -> ApprovalRequest:
    key = spec.key or ctx.tool_call_id or f"{spec.action}:{args_sha256(spec.args)}"
    now = datetime.now(UTC)
    observed = to_json_value(observations, what="observations")
    if not isinstance(observed, dict):
        observed = {"observations": observed}
    return ApprovalRequest(
        approval_id=approval_id_for(ctx.thread_id, ctx.checkpoint_ns, key, revision),
        thread_id=ctx.thread_id,
        action=spec.action,
        args=spec.args,
        args_sha256=args_sha256(spec.args),
        why=spec.why,
        affects=spec.affects,
        if_denied=spec.if_denied,
        observations=observed,
        observations_sha256=args_sha256(observed),
        approvers=spec.approvers,
        requested_at=format_time(now),
        expires_at=format_time(now + spec.expires_in),
        on_expiry=spec.on_expiry,
        depends_on=versions,
        alternative=spec.alternative.to_dict() if spec.alternative else None,
        args_schema=schema_ref(spec.args_schema) if spec.args_schema else None,
        args_json_schema=spec.args_schema.model_json_schema() if spec.args_schema else None,
        node=ctx.node,
        task_id=ctx.task_id,
        checkpoint_ns=ctx.checkpoint_ns,
        key=key,
        revision=revision,
        replaces=replaces,
    )


def _outcome(request: ApprovalRequest, decision: dict[str, Any]) -> ApprovalOutcome:
    kind = decision["decision"]
    args: dict[str, Any] | None = None
    action = request.action
    if kind in ("approve", "edit"):
        args = decision.get("args") if kind == "edit" else request.args
    elif kind == "expire" and decision.get("policy") == "safe_alternative" and request.alternative:
        action, args = request.alternative["action"], request.alternative["args"]
    return ApprovalOutcome(
        request=request,
        decision=kind,
        by=str(decision.get("by")),
        reason=decision.get("reason"),
        action=action,
        args=args,
        args_sha256=None if args is None else args_sha256(args),
        policy=decision.get("policy"),
    )


def _gate(spec: ApprovalSpec, ctx: StepContext) -> Generator[_Op, Any, ApprovalOutcome]:
    revision, replaces = 0, None
    while True:
        observations = yield _Observe()
        versions = to_json_value((yield _Versions()), what="depends_on versions")
        candidate = _build(
            spec,
            ctx,
            revision=revision,
            observations=observations,
            versions=versions,
            replaces=replaces,
        )
        record = yield _Get(candidate.approval_id)
        if record is None and (yield _Insert(candidate)):
            request = candidate
            yield _Audit(request, "requested", {"expires_at": request.expires_at})
        else:
            record = record or (yield _Get(candidate.approval_id))
            request = ApprovalRequest.from_dict(record.value)
            if request.args_sha256 != candidate.args_sha256:
                raise ApprovalMismatchError(
                    f"approval {request.approval_id} was requested for {request.action} with "
                    f"arguments sha256 {request.args_sha256}, but the replayed step asks with "
                    f"{candidate.args_sha256}; the step must compute the same arguments on replay"
                )
        decision = yield _Interrupt(request.payload())
        if not isinstance(decision, dict) or decision.get("approval_id") != request.approval_id:
            got = decision.get("approval_id") if isinstance(decision, dict) else decision
            raise ApprovalMismatchError(
                f"the step waiting on approval {request.approval_id} was resumed with a decision "
                f"for {got!r}; resume through tether.approvals.decide (which addresses the "
                "interrupt by id), and dispatch parallel gated tool calls as separate tasks (Send)"
            )
        if decision["decision"] in ("approve", "edit") and request.status != "cleared":
            if request.status == "voided" or canonical_json(versions) != canonical_json(
                request.depends_on
            ):
                if request.status != "voided":
                    changed = sorted(
                        k
                        for k in set(versions) | set(request.depends_on)
                        if versions.get(k) != request.depends_on.get(k)
                    )
                    request = request.with_status("voided", f"stale: {', '.join(changed)} changed")
                    yield _Upsert(request)
                    yield _Audit(request, "voided", {"changed": changed, "now": versions})
                revision, replaces = revision + 1, request.approval_id
                continue
            request = request.with_status("cleared", "depends_on versions unchanged")
            yield _Upsert(request)
            yield _Audit(request, "cleared", {"versions": versions})
        return _outcome(request, decision)


def _context(config: RunnableConfig | None) -> StepContext:
    if config is None:
        try:
            config = get_config()
        except RuntimeError:  # outside any runnable: step_context names the fix
            config = {}
    return step_context(config)


_Gate = Generator[_Op, Any, ApprovalOutcome]


def _start(
    kwargs: dict[str, Any], config: RunnableConfig | None
) -> tuple[ApprovalSpec, RecordStore, _Gate]:
    spec = _spec(**kwargs)
    ctx = _context(config)
    return spec, store_for(ctx.checkpointer), _gate(spec, ctx)


def _advance(gen: _Gate, value: Any) -> tuple[_Op | None, ApprovalOutcome | None]:
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
    spec, store, gen = _start({k: v for k, v in locals().items() if k != "config"}, config)
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
    spec, store, gen = _start({k: v for k, v in locals().items() if k != "config"}, config)
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


def _perform_sync(op: _Op, spec: ApprovalSpec, store: RecordStore) -> Any:  # noqa: PLR0911 - one return per operation kind
    if isinstance(op, _Interrupt):
        return interrupt(op.payload)
    if isinstance(op, _Observe):
        obs = spec.observations
        return _call_sync(obs, "observations") if callable(obs) else obs
    if isinstance(op, _Versions):
        return {k: _call_sync(r, f"depends_on[{k!r}]") for k, r in spec.depends_on.items()}
    if isinstance(op, _Get):
        return store.sync.get(APPROVAL_KIND, op.key)
    if isinstance(op, _Audit):
        write_audit_sync(store, op.request, op.event, **op.detail)
        return None
    r = op.request
    if isinstance(op, _Insert):
        return store.sync.insert(APPROVAL_KIND, r.approval_id, r.to_dict(), thread_id=r.thread_id)
    store.sync.upsert(APPROVAL_KIND, r.approval_id, r.to_dict(), thread_id=r.thread_id)
    return None


async def _await_maybe(fn: Callable[[], Any]) -> Any:
    value = fn()
    return await value if inspect.isawaitable(value) else value


async def _perform_async(op: _Op, spec: ApprovalSpec, store: RecordStore) -> Any:  # noqa: PLR0911 - one return per operation kind
    if isinstance(op, _Interrupt):
        return interrupt(op.payload)
    if isinstance(op, _Observe):
        obs = spec.observations
        return await _await_maybe(obs) if callable(obs) else obs
    if isinstance(op, _Versions):
        return {k: await _await_maybe(r) for k, r in spec.depends_on.items()}
    if isinstance(op, _Get):
        return await store.get(APPROVAL_KIND, op.key)
    if isinstance(op, _Audit):
        await write_audit(store, op.request, op.event, **op.detail)
        return None
    r = op.request
    if isinstance(op, _Insert):
        return await store.insert(APPROVAL_KIND, r.approval_id, r.to_dict(), thread_id=r.thread_id)
    await store.upsert(APPROVAL_KIND, r.approval_id, r.to_dict(), thread_id=r.thread_id)
    return None
