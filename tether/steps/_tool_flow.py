"""A durable tool call, written once as a flow: claim -> execute -> commit.

:func:`tool_flow` is what :class:`~tether.steps._tools.DurableTool` runs for
each call inside a graph node, with the sync interpreter of :mod:`._io` from
``_run`` and the async one from ``_arun``. See :mod:`tether.steps._tools` for
the rules it follows (replay, reconcile, refuse); this module is their code.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig

from tether.boundaries import RunStopped, StepTimeoutError, boundary, current_guard, note
from tether.steps._codec import canonical_hash, decode_output, encode_output
from tether.steps._compensable import effect_entry
from tether.steps._errors import (
    NonDeterminismError,
    NotRecordedError,
    ReconcileResultError,
    StepsError,
    ToolOutcomeUnknownError,
)
from tether.steps._idempotency import KEY_PARAM, ReconcileResult, args_digest, idempotency_key
from tether.steps._io import IN_FLIGHT, Commit, Execute, Flow, RunReconcile
from tether.steps._known import known_flow, remember
from tether.steps._log import step_document
from tether.steps._parent import wait_for_parent_checkpoint
from tether.steps._scope import NodeScope, worker_id
from tether.steps._versions import ensure_pins_flow
from tether.store import KeyedHash
from tether.store import operations as ops

if TYPE_CHECKING:
    from tether.steps._tools import DurableTool

__all__ = ["execution", "tool_flow"]


@dataclass(frozen=True)
class _Call:
    scope: NodeScope
    key: str
    args: dict[str, Any]
    args_hash: str
    idempotency_key: str


def execution(tool: DurableTool, inputs: dict[str, Any], config: RunnableConfig) -> Execute:
    """The operation that runs ``tool``'s function (or the tool it wraps) with ``inputs``."""
    return Execute(tool.func, tool.coroutine, tool.inner, inputs, config)


def tool_flow(
    tool: DurableTool,
    scope: NodeScope,
    args: dict[str, Any],
    call_id: str | None,
    config: RunnableConfig,
) -> Flow[Any]:
    """One call of ``tool`` inside a node: replayed, reconciled, or claimed, run and recorded."""
    call, action, output = yield from _start(tool, scope, args, call_id)
    if action == "replay":
        note("tool.replayed", _detail(tool, call))
        return output
    if action == "reconcile":
        found = yield RunReconcile(tool.reconcile, call.args, call.idempotency_key, tool.name)
        result = _reconciled(tool, call, found)
        if result is not None:
            index = yield from _commit(tool, call, result.output, time.time(), "reconciled")
            note("tool.effect", {**_detail(tool, call), "step_index": index, "how": "reconciled"})
            return result.output
        if output:  # the hook found nothing: the failed attempt did nothing
            yield from _reclaim(tool, call)
    try:
        boundary("tool.before")
    except (RunStopped, StepTimeoutError) as stop:
        yield from _withdraw(tool, call, stop)
        raise
    started = time.time()
    inputs = {**call.args, KEY_PARAM: call.idempotency_key} if tool.takes_key else call.args
    try:
        output = yield execution(tool, inputs, config)
    except Exception as exc:
        yield from _fail(tool, call, exc)
        raise
    detail = {**_detail(tool, call), "how": "run"}
    index = yield from _commit(tool, call, output, started, "run", in_flight=detail)
    if index != IN_FLIGHT:  # else the write passes the boundary when it lands
        boundary("tool.after", {**detail, "step_index": index})
    return output


def _detail(tool: DurableTool, call: _Call) -> dict[str, Any]:
    """What a run's tool events say: the call's key and idempotency key, never its arguments."""
    return {"key": call.key, "tool": tool.name, "idempotency_key": call.idempotency_key}


def _claims(tool: DurableTool) -> bool:
    """Whether a call of ``tool`` claims its record before the effect (no key, not retry-safe)."""
    return not (tool.takes_key or tool.safe_to_retry)


def _may_claim() -> None:
    """Ask the run's guard, if a worker runs this, whether the run may claim a call.

    The same question as at ``"tool.before"``, asked before the claim is
    written, so a stopped run leaves no claim behind; no event, and no crash
    point (the crash harness's boundaries stay those of the recording layer).
    """
    guard = current_guard()
    if guard is not None:
        guard.check("tool.claim")


def _calls(
    tool: DurableTool,
    scope: NodeScope,
    args: dict[str, Any],
    call_id: str | None,
    keyed: KeyedHash | None,
) -> tuple[_Call, _Call | None]:
    """The call's keys, and (with encryption on) the plain-hash keys older versions used."""
    args_hash = canonical_hash(args)
    occurrence = None if call_id else scope.calls.occurrence(args_hash)

    def make(k: KeyedHash | None) -> _Call:
        tag = call_id or f"{args_digest(args_hash, k)[:16]}.{occurrence}"
        key = scope.step_key(f"tool.{tool.name}.{tag}")
        tenant, thread = scope.tenant, scope.thread_id
        idem = idempotency_key(tenant, thread, key, tool.name, args_hash, keyed=k)
        return _Call(scope, key, args, args_hash, idem)

    return make(keyed), None if keyed is None else make(None)


def _start(
    tool: DurableTool, scope: NodeScope, args: dict[str, Any], call_id: str | None
) -> Flow[tuple[_Call, str, Any]]:
    """The call (under the keys it was first recorded with) and its plan."""
    call, legacy = _calls(tool, scope, args, call_id, (yield ops.KeyedHash()))
    if legacy is not None and (yield from _recorded_by_older_version(call, legacy)):
        call = legacy
    action, output = yield from _plan(tool, call)
    return call, action, output


def _recorded_by_older_version(call: _Call, legacy: _Call) -> Flow[bool]:
    """Whether this call was recorded under the plain-hash keys of an older version.

    Such a run keeps its keys (and so its idempotency key) to the end.
    """
    store, thread_id = call.scope.store, call.scope.thread_id
    if not (yield from known_flow(store, thread_id, "tool", legacy.key)):
        return False
    if legacy.key != call.key:
        return True
    record = yield ops.Get("tool", legacy.key)  # same key (a tool-call id): which scheme?
    return record is not None and record.value.get("idempotency_key") == legacy.idempotency_key


def _claim(tool: DurableTool, call: _Call) -> dict[str, Any]:
    return {
        "state": "claimed",
        "tool": tool.name,
        "args_hash": call.args_hash,
        "idempotency_key": call.idempotency_key,
        "claimed_at": time.time(),
        "attempt": call.scope.attempt,
        "worker_id": worker_id(),
        # A call cut off after its claim may have acted: a person checking it needs its arguments.
        **effect_entry(tool, call.args),
    }


def _plan(tool: DurableTool, call: _Call) -> Flow[tuple[str, Any]]:
    """``("replay", output)``, ``("run", None)`` or ``("reconcile", reclaim)``.

    ``reclaim`` says the stored record is a failed attempt, to be replaced by
    a fresh claim if the hook finds nothing and the tool runs again.
    """
    scope, store = call.scope, call.scope.store
    if scope.pinned:  # else nothing to check: no call (a hop in sync code)
        yield from ensure_pins_flow(scope)
    yield from wait_for_parent_checkpoint(scope)
    if scope.replay_only:
        return (yield from _replay_only(tool, call))
    if not _claims(tool):
        # Running again is safe, so no intent needs claiming: at most one read.
        record = None
        if (yield from known_flow(store, scope.thread_id, "tool", call.key)):
            record = yield ops.Get("tool", call.key)
        if record is None:
            return "run", None
    else:
        _may_claim()
        claim = _claim(tool, call)
        inserted = yield ops.Insert("tool", call.key, claim, scope.thread_id)
        remember(store, scope.thread_id, "tool", call.key)
        if inserted:
            return "run", None
        record = yield ops.Get("tool", call.key)
        if record is None:  # deleted in between (the thread was deleted)
            return "run", None
    return (yield from _resolve(tool, call, record.value))


def _replay_only(tool: DurableTool, call: _Call) -> Flow[tuple[str, Any]]:
    """A debug replay: the recorded result, never a claim or a run of the tool."""
    record = None
    if (yield from known_flow(call.scope.store, call.scope.thread_id, "tool", call.key)):
        record = yield ops.Get("tool", call.key)
    if record is None or record.value.get("state") != "done":
        raise NotRecordedError(call.key, f"result of tool {tool.name!r}")
    return (yield from _resolve(tool, call, record.value))


def _resolve(tool: DurableTool, call: _Call, value: dict[str, Any]) -> Flow[tuple[str, Any]]:
    """What to do about a call that already has a record (see :func:`_plan`)."""
    if value["args_hash"] != call.args_hash:
        raise NonDeterminismError(call.key, value["args_hash"], call.args_hash, "tool call")
    if value["state"] == "done":
        return "replay", decode_output(value["output"])
    if tool.takes_key or tool.safe_to_retry:
        return "run", None
    failed = value["state"] == "failed"
    # A failed attempt is as uncertain as a claim whose process died (a timeout
    # may come after the effect), unless its exception type was declared as
    # raised before any effect. Records from before that flag existed lack it
    # and so count as uncertain.
    if failed and value.get("before_effect") is True:
        yield from _reclaim(tool, call)
        return "run", None
    if tool.reconcile is not None:
        return "reconcile", failed
    raise ToolOutcomeUnknownError(
        tool.name, call.key, error=str(value.get("error", "an exception")) if failed else None
    )


def _reclaim(tool: DurableTool, call: _Call) -> Flow[None]:
    """Replace a failed attempt by a fresh claim before running the tool again.

    Without it a second attempt that dies after its effect would still read
    as the first attempt's "failed before any effect", and run a third time.
    """
    _may_claim()
    yield ops.Upsert("tool", call.key, _claim(tool, call), call.scope.thread_id)


def _reconciled(tool: DurableTool, call: _Call, found: Any) -> ReconcileResult | None:
    """The hook's answer, checked: a result that happened, or ``None`` (it did not)."""
    if found is None:
        return None
    if not isinstance(found, ReconcileResult):
        raise ReconcileResultError(tool.name, call.key, found)
    if found.outcome == "unknown":
        raise ToolOutcomeUnknownError(tool.name, call.key, reason=found.reason)
    return found


def _withdraw(tool: DurableTool, call: _Call, stop: BaseException) -> Flow[None]:
    """The run stopped at ``"tool.before"``: mark its claim as failed before any effect.

    Nothing ran, so the next attempt (a retry after a step timeout, a later
    run on the thread after a cancel) claims the call afresh instead of finding
    an uncertain claim. Best effort: a worker that lost its lease cannot write,
    and the new holder then treats the claim as uncertain, as after a crash.
    """
    if not _claims(tool):
        return
    with contextlib.suppress(Exception):  # the stop is what the caller must see
        yield from _fail(tool, call, stop, before_effect=True)


def _commit(
    tool: DurableTool,
    call: _Call,
    output: Any,
    started: float,
    how: str,
    *,
    in_flight: dict[str, Any] | None = None,
) -> Flow[int | None]:
    """Record the result; the step's index, or ``IN_FLIGHT`` if the write may be left
    in flight (``in_flight``: the event it reports when it lands)."""
    scope = call.scope
    try:
        encoded = encode_output(output)
    except StepsError:  # e.g. an object the tool returned; the model sees its text anyway
        encoded = encode_output(str(output))
    value = {
        "state": "done",
        "tool": tool.name,
        "args_hash": call.args_hash,
        "idempotency_key": call.idempotency_key,
        "output": encoded,
        "how": how,
        "node": scope.node,
        "task_id": scope.task_id,
        "attempt": scope.attempt,
        "version": tool.version,
        "started_at": started,
        "ended_at": time.time(),
        **effect_entry(tool, call.args),
    }
    remember(scope.store, scope.thread_id, "tool", call.key)
    step = _step(tool, call.key, value)
    put = ops.PutWithStep("tool", call.key, value, scope.thread_id, step, replace=True)
    defer = in_flight is not None and scope.defers_records
    index: int | None = yield Commit(put, "tool.after", in_flight or {}, scope.flight, defer)
    return index


def _fail(
    tool: DurableTool, call: _Call, error: BaseException, *, before_effect: bool = False
) -> Flow[None]:
    value = {
        "state": "failed",
        "tool": tool.name,
        "args_hash": call.args_hash,
        "idempotency_key": call.idempotency_key,
        "error": repr(error)[:2000],
        "error_type": f"{type(error).__module__}.{type(error).__qualname__}",
        "before_effect": before_effect or isinstance(error, tool.raises_before_effect),
        # An effect that may have happened: a person checking it by hand needs its arguments.
        **effect_entry(tool, call.args),
    }
    remember(call.scope.store, call.scope.thread_id, "tool", call.key)
    yield ops.Upsert("tool", call.key, value, call.scope.thread_id)


def _step(tool: DurableTool, key: str, value: dict[str, Any]) -> dict[str, Any]:
    return step_document(
        "tool",
        name=tool.name,
        node=value.get("node", ""),
        task_id=value.get("task_id", ""),
        input_hash=value["args_hash"],
        output_ref=("tool", key),
        tool_schema_version=tool.version,
        started_at=value.get("started_at"),
        ended_at=value.get("ended_at"),
        attempt=value.get("attempt", 1),
        key=key,
        detail={"how": value.get("how", "run")},
    )
