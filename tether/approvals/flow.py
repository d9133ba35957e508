"""The approval flow, written once as a generator of storage operations.

:func:`approval_flow` yields what it needs done (read the observations and
versions, get or insert the request, read the stored decision, pause with an
interrupt, audit) and receives the results; the sync and async gates perform
the operations their own way.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tether.approvals.context import StepContext
from tether.approvals.errors import ApprovalMismatchError
from tether.approvals.hashing import (
    args_sha256,
    canonical_json,
    keyed_approval_id,
    to_json_value,
)
from tether.approvals.outcome import ApprovalOutcome
from tether.approvals.request import ApprovalRequest, approval_id_for, format_time
from tether.approvals.schemas import schema_ref
from tether.approvals.spec import ApprovalSpec
from tether.store.keyed import KeyedHash

__all__ = [
    "Audit",
    "Decided",
    "Flow",
    "Get",
    "Insert",
    "Interrupt",
    "Observe",
    "Op",
    "Upsert",
    "Versions",
    "approval_flow",
]


@dataclass(frozen=True)
class Observe:
    pass


@dataclass(frozen=True)
class Versions:
    pass


@dataclass(frozen=True)
class Get:
    key: str


@dataclass(frozen=True)
class Insert:
    request: ApprovalRequest


@dataclass(frozen=True)
class Upsert:
    request: ApprovalRequest


@dataclass(frozen=True)
class Audit:
    request: ApprovalRequest
    event: str
    detail: dict[str, Any]


@dataclass(frozen=True)
class Decided:
    key: str


@dataclass(frozen=True)
class Interrupt:
    payload: dict[str, Any]


Op = Observe | Versions | Get | Decided | Insert | Upsert | Audit | Interrupt


def _build_request(
    spec: ApprovalSpec,
    ctx: StepContext,
    *,
    revision: int,
    observations: Any,
    versions: dict[str, Any],
    replaces: str | None,
    keyed: KeyedHash | None,
) -> ApprovalRequest:
    key = spec.key or ctx.tool_call_id or f"{spec.action}:{args_sha256(spec.args)}"
    if keyed is None:
        approval_id = approval_id_for(ctx.thread_id, ctx.checkpoint_ns, key, revision)
    else:
        approval_id = keyed_approval_id(ctx.thread_id, ctx.checkpoint_ns, key, revision, keyed)
    now = datetime.now(UTC)
    observed = to_json_value(observations, what="observations")
    if not isinstance(observed, dict):
        observed = {"observations": observed}
    return ApprovalRequest(
        approval_id=approval_id,
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


Flow = Generator[Op, Any, ApprovalOutcome]


def approval_flow(spec: ApprovalSpec, ctx: StepContext, keyed: KeyedHash | None = None) -> Flow:
    """Ask, wait for the stored decision, re-check staleness, and settle.

    ``keyed`` (the store's keyed hash, with encryption on) makes approval ids
    HMACs; a request an older version stored under the plain id is still found.
    """
    revision, replaces = 0, None
    while True:
        observations = yield Observe()
        versions = to_json_value((yield Versions()), what="depends_on versions")
        candidate = _build_request(
            spec,
            ctx,
            revision=revision,
            observations=observations,
            versions=versions,
            replaces=replaces,
            keyed=keyed,
        )
        record = yield Get(candidate.approval_id)
        if record is None and keyed is not None:  # asked by an older version?
            c = candidate
            record = yield Get(approval_id_for(c.thread_id, c.checkpoint_ns, c.key, c.revision))
        if record is None and (yield Insert(candidate)):
            request = candidate
            yield Audit(request, "requested", {"expires_at": request.expires_at})
        else:
            record = record or (yield Get(candidate.approval_id))
            request = ApprovalRequest.from_dict(record.value)
            if request.args_sha256 != candidate.args_sha256:
                raise ApprovalMismatchError(
                    f"approval {request.approval_id} was requested for {request.action} with "
                    f"arguments sha256 {request.args_sha256}, but the replayed step asks with "
                    f"{candidate.args_sha256}; the step must compute the same arguments on replay"
                )
        # The stored decision is the truth, not the value LangGraph resumes with: a
        # decision only counts once ``decide`` checked and stored it, and it survives a
        # crash that loses the resume value. Each interrupt() call either returns an
        # answer already delivered to this task (ignored) or pauses the run.
        decision = yield Decided(request.approval_id)
        while decision is None:
            yield Interrupt(request.payload())
            decision = yield Decided(request.approval_id)
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
                    yield Upsert(request)
                    yield Audit(request, "voided", {"changed": changed, "now": versions})
                revision, replaces = revision + 1, request.approval_id
                continue
            request = request.with_status("cleared", "depends_on versions unchanged")
            yield Upsert(request)
            yield Audit(request, "cleared", {"versions": versions})
        return _outcome(request, decision)
