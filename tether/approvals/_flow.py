"""The approval protocol, written once as a generator of operations.

:func:`approval_flow` asks for what it needs done (read the observations and
versions, get or insert the request, read the stored decision, pause with an
interrupt, audit) by yielding the operations of :mod:`._io` and receiving their
results; ``request_approval`` runs it in the caller's thread and
``arequest_approval`` with ``await``. Everything else here is pure: the
validated arguments of one call (:class:`ApprovalSpec`), where the gate runs
(:class:`StepContext`), and what it returns (:class:`ApprovalOutcome`).

The approval id is derived from the thread, the task's namespace, a key (the
tool call id, an explicit ``key``, or the action and argument hash) and a
revision, so a replay raises the same request, never a new one. Just before an
approved action runs, the versions of the records it depends on are read again;
if one changed, the approval is void and a fresh request (revision + 1, fresh
observations) is raised instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langgraph._internal._constants import (
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_CHECKPOINTER,
    CONFIG_KEY_TASK_ID,
)
from langgraph.checkpoint.base import BaseCheckpointSaver
from pydantic import BaseModel

from tether._tool_calls import current_tool_call_id
from tether.approvals._checks import CANCELLED, register_args_schema, schema_ref
from tether.approvals._io import Call, Flow, Interrupt, Read
from tether.approvals._policies import (
    Alternative,
    Approvers,
    ExpiryPolicy,
    SafeAlternative,
    expiry_policy,
)
from tether.approvals._storage import (
    APPROVAL_KIND,
    DECISION_KIND,
    ApprovalRequest,
    audit,
    format_time,
    insert_request,
    upsert_request,
)
from tether.approvals.errors import ApprovalConfigError, ApprovalMismatchError
from tether.approvals.hashing import (
    approval_id_for,
    args_sha256,
    canonical_json,
    keyed_approval_id,
    to_json_value,
)
from tether.store import KeyedHash

__all__ = [
    "ApprovalOutcome",
    "ApprovalSpec",
    "DecisionKind",
    "Observations",
    "Reader",
    "StepContext",
    "approval_flow",
    "make_spec",
    "step_context",
]

# -- what a gate is given: the call's arguments and the step it runs in --------------------
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


def make_spec(**kw: Any) -> ApprovalSpec:
    """Validate ``request_approval``'s keyword arguments.

    Raises:
        ApprovalConfigError: What is wrong and how to write it.
    """
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


@dataclass(frozen=True)
class StepContext:
    """The running step, as far as an approval gate needs it."""

    thread_id: str
    checkpoint_ns: str
    task_id: str
    node: str
    checkpointer: BaseCheckpointSaver[Any]
    tool_call_id: str | None


def step_context(config: RunnableConfig) -> StepContext:
    """The gate's context from a node's config.

    Raises:
        ApprovalConfigError: Not inside a graph run with a checkpointer and a thread id.
    """
    conf = config.get("configurable") or {}
    checkpointer = conf.get(CONFIG_KEY_CHECKPOINTER)
    thread_id = conf.get("thread_id")
    if not isinstance(checkpointer, BaseCheckpointSaver) or thread_id is None:
        raise ApprovalConfigError(
            "request_approval must run inside a graph node of a graph compiled with a "
            "checkpointer (tether.open_checkpointer) and invoked with "
            "config={'configurable': {'thread_id': ...}}: an approval is stored state"
        )
    metadata = config.get("metadata") or {}
    return StepContext(
        thread_id=str(thread_id),
        checkpoint_ns=str(conf.get(CONFIG_KEY_CHECKPOINT_NS, "")),
        task_id=str(conf.get(CONFIG_KEY_TASK_ID, "")),
        node=str(metadata.get("langgraph_node", "")),
        checkpointer=checkpointer,
        tool_call_id=current_tool_call_id(),
    )


# -- what a gate returns -------------------------------------------------------------------
DecisionKind = Literal["approve", "edit", "reject", "expire"]


def _changes(before: dict[str, Any], after: dict[str, Any]) -> str:
    keys = sorted(set(before) | set(after))
    parts = [
        f"{k}: {before.get(k)!r} -> {after.get(k)!r}" for k in keys if before.get(k) != after.get(k)
    ]
    return ", ".join(parts) or "no change"


@dataclass(frozen=True)
class ApprovalOutcome:
    """The settled request, as the step that asked for it sees it.

    Attributes:
        request: The request that was decided.
        decision: ``approve``, ``edit``, ``reject`` or ``expire``; a request
            cancelled with its run reads as ``reject``, with the cancel's
            reason.
        by: Who decided (``tether:expiry`` when the expiry policy did, the
            canceller when the run was cancelled).
        reason: The decider's reason, if given.
        action: The action to run: the request's, or the alternative's when an
            expired request fell back to its safe alternative.
        args: The arguments to run it with (edited ones after an edit), or
            ``None`` when nothing may run (rejected, or stopped on expiry).
        args_sha256: The SHA-256 of ``args``.
        policy: For ``expire``: ``stop`` or ``safe_alternative``.
    """

    request: ApprovalRequest
    decision: DecisionKind
    by: str
    reason: str | None
    action: str
    args: dict[str, Any] | None
    args_sha256: str | None
    policy: str | None = None

    @property
    def approval_id(self) -> str:
        """The id of the settled request."""
        return self.request.approval_id

    @property
    def proceed(self) -> bool:
        """Whether an action may run now (``action`` with ``args``)."""
        return self.args is not None

    @property
    def stop(self) -> bool:
        """Whether the run should end here with its partial result (expired, policy ``stop``)."""
        return self.decision == "expire" and self.policy == "stop"

    @property
    def edited(self) -> bool:
        """Whether the approver changed the arguments."""
        return self.decision == "edit"

    @property
    def observation(self) -> str:
        """What the agent should be told, so it adapts instead of retrying blindly."""
        req = self.request
        why = f" Reason: {self.reason}." if self.reason else ""
        if self.decision == "approve":
            return f"{self.by} approved {req.action}.{why}"
        if self.decision == "edit":
            assert self.args is not None
            return (
                f"{self.by} edited the arguments of {req.action} before approving "
                f"({_changes(req.args, self.args)}).{why} It runs with the edited arguments "
                f"(sha256 {self.args_sha256})."
            )
        if self.decision == "reject":
            return (
                f"{self.by} rejected {req.action}.{why} Do not retry it as it was; "
                f"{req.if_denied or 'tell the user and choose another course'}."
            )
        if self.policy == "safe_alternative":
            return (
                f"Nobody decided on {req.action} before {req.expires_at}; the safe alternative "
                f"{self.action} runs instead (timeouts never approve)."
            )
        return (
            f"Nobody decided on {req.action} before {req.expires_at}; the run stops here "
            f"(timeouts never approve). {req.if_denied}".rstrip()
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON summary for tool results and logs."""
        return {
            "approval_id": self.approval_id,
            "decision": self.decision,
            "by": self.by,
            "reason": self.reason,
            "action": self.action,
            "args_sha256": self.args_sha256,
            "policy": self.policy,
            "note": self.observation,
        }


# -- the protocol --------------------------------------------------------------------------
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
    if kind == CANCELLED:  # cancelled with its run: nothing runs, the agent is told why
        kind = "reject"
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


def _observed(spec: ApprovalSpec) -> Flow[Any]:
    """The observations to show: the caller's value, or what its reader returns now."""
    if not callable(spec.observations):
        return spec.observations
    return (yield Call(spec.observations, "observations"))


def _versions(spec: ApprovalSpec) -> Flow[Any]:
    """The current version of each record the action depends on, read in order."""
    versions = {}
    for name, reader in spec.depends_on.items():
        versions[name] = yield Call(reader, f"depends_on[{name!r}]")
    return to_json_value(versions, what="depends_on versions")


def _stored_decision(approval_id: str) -> Flow[dict[str, Any] | None]:
    found = yield Read(DECISION_KIND, approval_id)
    return None if found is None else found.value


def approval_flow(
    spec: ApprovalSpec, ctx: StepContext, keyed: KeyedHash | None = None
) -> Flow[ApprovalOutcome]:
    """Ask, wait for the stored decision, re-check staleness, and settle.

    ``keyed`` (the store's keyed hash, with encryption on) makes approval ids
    HMACs; a request an older version stored under the plain id is still found.
    """
    revision, replaces = 0, None
    while True:
        observations = yield from _observed(spec)
        versions = yield from _versions(spec)
        candidate = _build_request(
            spec,
            ctx,
            revision=revision,
            observations=observations,
            versions=versions,
            replaces=replaces,
            keyed=keyed,
        )
        record = yield Read(APPROVAL_KIND, candidate.approval_id)
        if record is None and keyed is not None:  # asked by an older version?
            c = candidate
            old_id = approval_id_for(c.thread_id, c.checkpoint_ns, c.key, c.revision)
            record = yield Read(APPROVAL_KIND, old_id)
        if record is None and (yield insert_request(candidate)):
            request = candidate
            yield audit(request, "requested", expires_at=request.expires_at)
        else:
            record = record or (yield Read(APPROVAL_KIND, candidate.approval_id))
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
        decision = yield from _stored_decision(request.approval_id)
        while decision is None:
            yield Interrupt(request.payload())
            decision = yield from _stored_decision(request.approval_id)
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
                    yield upsert_request(request)
                    yield audit(request, "voided", changed=changed, now=versions)
                revision, replaces = revision + 1, request.approval_id
                continue
            request = request.with_status("cleared", "depends_on versions unchanged")
            yield upsert_request(request)
            yield audit(request, "cleared", versions=versions)
        return _outcome(request, decision)
