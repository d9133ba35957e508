"""A person decided a compensation request: a worker, not the deciding process, continues it.

A worker compensates a failed run of a compensating graph before it writes the
run's outcome (:mod:`.execution`). When an undo waits on a person (policy
``ask``, or an undo that failed), the run has ended (``error`` or
``cancelled``) and no run waits on the request, so deciding it cannot resume a
run. Instead, once the decision is stored (with every check of an approval,
exactly once), :func:`enqueue` creates a *continuation run* on the thread:

* its id is derived from the request (:func:`continuation_id`), so enqueueing
  twice (the deciding process and the scheduler's orphan sweep, or a retried
  call) creates it once;
* it carries ``kwargs["tether_compensates"] = {"run_id": <the failed run>, ...}``
  (``Runtime.create`` cannot set that key) and runs the failed run's assistant;
* a worker claims it under a lease like any run, and instead of streaming the
  graph calls ``tether.compensation.compensate(graph, config, run_id=...)``,
  which reads the stored decision: approve/edit undo (with the undo's own
  idempotency key), reject/expire leave the effect *not undone*. Each undo is a
  ``compensation.before``/``compensation.after`` event of the continuation run.

Crash safety is compensation's own: an undo is claimed before it runs and
recorded after, so a worker killed mid-continuation leaves the run to another
worker (lease expiry), whose pass undoes a claimed effect again with the same
key and never re-runs a recorded one. The report then becomes the failed run's
outcome (:func:`ending`): its ``error["compensation"]`` (or, for a run cancelled
with rollback, its ``ended_reason``) is rewritten and a ``compensation`` event is
appended to it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tether.approvals import ApprovalNotPendingError, ApprovalRequest, list_approvals
from tether.boundaries import RunCancelledError
from tether.compensation import (
    CompensationReport,
    compensate,
    compensated_run,
    compensating_graph,
    compensation_waits_on,
    is_compensation_request,
)
from tether.runtime import lifecycle
from tether.runtime.context import RunContext
from tether.runtime.errors import AlreadyExistsError, RunNotFoundError
from tether.runtime.models import Run, ThreadStatus
from tether.runtime.multitask import TETHER_RUN_MARK
from tether.runtime.store import control
from tether.runtime.store.base import KEEP, NewEvent, Outcome, RunStore
from tether.runtime.store.types import NewRun
from tether.store import store_for

if TYPE_CHECKING:
    from tether.runtime.api import Runtime

__all__ = [
    "CONTINUES",
    "acted",
    "awaiting",
    "continuation_id",
    "continue_compensation",
    "ending",
    "enqueue",
    "enqueue_rollback",
    "find_run",
    "resumed_by",
    "rollback_id",
    "rollback_may_delete",
    "rollback_reason",
    "summary",
]

CONTINUES = TETHER_RUN_MARK
_NAMESPACE = uuid.UUID("3f1c2a57-64f5-4b8e-9a51-7e0f0c6b2d19")


def continuation_id(approval_id: str) -> str:
    """The continuation run's id for the decision of ``approval_id`` (one per request)."""
    return str(uuid.uuid5(_NAMESPACE, f"compensation\0{approval_id}"))


def rollback_id(run_id: str) -> str:
    """The id of the run that rolls back the cancelled run ``run_id`` (one per run)."""
    return str(uuid.uuid5(_NAMESPACE, f"rollback\0{run_id}"))


def rollback_reason(reason: str | None) -> str:
    """Why a rollback's compensation runs, as its requests word it."""
    return f"cancelled with rollback: {reason}" if reason else "cancelled with rollback"


def rollback_may_delete(report: Mapping[str, Any]) -> bool:
    """Whether a rollback may now delete its run's records: its compensation (``report``)
    is complete. Until then they say what a person's decision is to undo."""
    return report.get("complete") is True


def summary(report: Mapping[str, Any]) -> str:
    """One line: what compensation did (a cancelled run's reason, a continuation's)."""
    if "error" in report:
        return f"compensation failed: {report['error']}"
    parts = [f"undone: {', '.join(report['undone']) or 'nothing'}"]
    if report["not_undone"]:
        parts.append("not undone: " + ", ".join(e["tool"] for e in report["not_undone"]))
    if report["awaiting"]:
        parts.append("awaiting a person: " + ", ".join(e["tool"] for e in report["awaiting"]))
    return "; ".join(parts)


async def find_run(runtime: Runtime, request: ApprovalRequest) -> Run:
    """The ended run whose compensation waits on ``request`` (this runtime's tenant).

    Raises:
        ApprovalNotPendingError: No run of this tenant is compensated on the
            thread, or the thread has an interrupted run (continuing would
            close it: resume or cancel it first).
    """
    saver = await runtime.checkpointer()
    run_id = await compensated_run(saver, request)
    if run_id is None:
        raise ApprovalNotPendingError(
            f"approval {request.approval_id}: the compensation of thread "
            f"{request.thread_id!r} is not a run's of this runtime; decide it with "
            "tether.approvals.decide(..., resumer=CompensationResumer(graph))"
        )
    try:
        run = await runtime.get(run_id)
    except RunNotFoundError:
        raise ApprovalNotPendingError(
            f"approval {request.approval_id}: no run of this tenant is compensated on "
            f"thread {request.thread_id!r}"
        ) from None
    waiting = await runtime.list(thread_id=request.thread_id, status="interrupted")
    if waiting:
        raise ApprovalNotPendingError(
            f"approval {request.approval_id}: thread {request.thread_id!r} has interrupted "
            f"run {waiting[0].run_id}; compensation continues on the thread after it: "
            "resume or cancel that run first, then decide"
        )
    return run


async def awaiting(runtime: Runtime, run: Run) -> list[str]:
    """The compensation requests the ended ``run``'s compensation waits on (their ids)."""
    if not run.terminal:
        return []
    saver = await runtime.checkpointer()
    found = []
    for view in await list_approvals(saver, thread_id=run.thread_id):
        request = view.request
        if (
            is_compensation_request(request)
            and await compensated_run(saver, request) == run.run_id
            and await compensation_waits_on(saver, request)
        ):
            found.append(request.approval_id)
    return found


async def enqueue(runtime: Runtime, request: ApprovalRequest, doc: Mapping[str, Any]) -> Run:
    """Enqueue the continuation of the compensation that waits on ``request`` (idempotent)."""
    failed = await find_run(runtime, request)
    run_id = continuation_id(request.approval_id)
    spec = {
        "run_id": failed.run_id,
        "approval_id": request.approval_id,
        "decision": doc.get("decision"),
    }
    config = dict(failed.kwargs.get("config") or {})
    new = NewRun(
        assistant_id=failed.assistant_id,
        thread_id=request.thread_id,
        kwargs={"config": config, "stream_mode": ["values"], "subgraphs": False, CONTINUES: spec},
        metadata={CONTINUES: failed.run_id},
        multitask_strategy="enqueue",
        run_id=run_id,
    )
    try:
        created = await runtime.store.create_run(new, tenant=runtime.tenant)
    except AlreadyExistsError:  # enqueued before: the same decision, delivered twice
        return await runtime.get(run_id)
    decided = {
        "approval_id": request.approval_id,
        "decision": doc.get("decision"),
        "by": doc.get("by"),
        "args_sha256": request.args_sha256,
        "continued_by": run_id,
    }
    await runtime.store.add_events(
        failed.run_id, [NewEvent("approval.decided", decided)], tenant=runtime.tenant
    )
    return created.run


def resumed_by(run: Run) -> tuple[str, ...]:
    """The runs whose execution ``run`` continues, newest first: the interrupted runs it
    closed by answering their interrupt (a ``Command(resume=...)`` in a new run), and those
    they continued. Their effects and checkpoints count as ``run``'s when it fails or is
    rolled back, as when an interrupted run is itself resumed (``Runtime.resume``). Written
    into the run's ``kwargs`` when it is created; a worker reads only its own run's row."""
    return tuple(str(r) for r in run.kwargs.get(control.RESUMED_KEY) or ())


def execution_of(run: Run) -> list[str]:
    """``run`` and the runs it resumed (:func:`resumed_by`): whose effects its compensation
    undoes and whose checkpoints its rollback deletes."""
    return [run.run_id, *resumed_by(run)]


async def compensate_run(
    graph: Any, config: Any, run: Run, reason: str | None
) -> CompensationReport:
    """``compensate`` the effects of ``run``'s execution (its own and those of the runs it
    resumed)."""
    return await compensate(
        graph, config, reason=reason, run_id=run.run_id, resumed=resumed_by(run)
    )


async def acted(runtime: Runtime, run: Run) -> bool:
    """Whether ``run`` (or a run it resumed) recorded a tool call (a durable tool's claim or
    result) on its thread."""
    runs = set(execution_of(run))
    store = store_for(await runtime.checkpointer())
    records = await store.list("tool", thread_id=run.thread_id)
    return any(record.run_id in runs for record in records)


async def enqueue_rollback(runtime: Runtime, cancelled: Run) -> Run:
    """Enqueue the run that compensates, then deletes, a run cancelled with rollback while
    no worker held it (pending or interrupted): only a worker has the graph and its undos.

    Idempotent: its id is derived from the cancelled run's (:func:`rollback_id`).
    """
    run_id = rollback_id(cancelled.run_id)
    new = NewRun(
        assistant_id=cancelled.assistant_id,
        thread_id=cancelled.thread_id,
        kwargs={
            "config": dict(cancelled.kwargs.get("config") or {}),
            "stream_mode": ["values"],
            "subgraphs": False,
            CONTINUES: {"run_id": cancelled.run_id, "rollback": True},
        },
        metadata={CONTINUES: cancelled.run_id},
        multitask_strategy="enqueue",
        run_id=run_id,
    )
    try:
        return (await runtime.store.create_run(new, tenant=runtime.tenant)).run
    except AlreadyExistsError:
        return await runtime.get(run_id)


def ending(run: Run, report: Mapping[str, Any]) -> tuple[Mapping[str, Any] | None, str | None]:
    """The failed run's ``error`` and ``ended_reason`` once compensation reported ``report``."""
    if run.error is not None:
        return {**run.error, "compensation": dict(report)}, run.ended_reason
    if run.status == "cancelled" and run.cancel_action is not None:
        why = f"{run.cancel_reason}; {summary(report)}" if run.cancel_reason else summary(report)
        return None, f"{run.cancel_action}: {why}"
    return None, summary(report)


async def _thread_after(
    store: RunStore, run: Run, failed: Run
) -> tuple[ThreadStatus, Mapping[str, Any] | None]:
    """The thread as the latest run before the continuation left it (its error kept)."""
    for other in await store.list_runs(tenant=run.tenant_id, thread_id=run.thread_id, limit=20):
        if other.run_id == run.run_id or CONTINUES in other.kwargs or other.active:
            continue
        if other.status in ("error", "timeout"):
            return "error", other.error
        return ("interrupted" if other.status == "interrupted" else "idle"), None
    return ("error", failed.error) if failed.error is not None else ("idle", None)


async def continue_compensation(
    store: RunStore, graph: Any, run: Run, config: dict[str, Any], ctx: RunContext, *, saver: Any
) -> Outcome:
    """Run by a worker for a continuation run: compensate, then rewrite the failed run's outcome.

    A continuation of a rollback (:func:`enqueue_rollback`) compensates the
    cancelled run if its graph compensates, then deletes what the run wrote.
    """
    spec = run.kwargs[CONTINUES]
    ended_id = str(spec["run_id"])
    ended = await store.get_run(ended_id, tenant=run.tenant_id)
    if spec.get("rollback") is True:
        done = "rolled back"
        if compensating_graph(graph):
            why = rollback_reason(ended.cancel_reason)
            compensated = await _compensate_ended(store, graph, run, config, ctx, ended, why)
            if isinstance(compensated, Outcome):
                return compensated
            ended, body = compensated
            if not rollback_may_delete(body):  # an undo waits on a person: its decision's
                # continuation completes the compensation, then deletes.
                reason = f"run {ended_id} compensated: {summary(body)}; rolled back once complete"
                return await _continued(store, run, ended, reason)
            done = f"compensated and rolled back: {summary(body)}"
        await saver.adelete_for_runs(execution_of(ended))
        return await _continued(store, run, ended, f"run {ended_id} {done}")
    if not compensating_graph(graph):
        raise TypeError(
            f"graph {run.graph_id!r} is no longer made with compensating(...): the "
            f"compensation of run {ended_id} cannot continue"
        )
    compensated = await _compensate_ended(store, graph, run, config, ctx, ended, None)
    if isinstance(compensated, Outcome):
        return compensated
    ended, body = compensated
    if ended.cancel_action == "rollback" and rollback_may_delete(body):
        # The rollback its compensation held back.
        await saver.adelete_for_runs(execution_of(ended))
    return await _continued(store, run, ended, f"compensated run {ended_id}: {summary(body)}")


async def _compensate_ended(  # noqa: PLR0917 - the worker's context, then what to compensate
    store: RunStore,
    graph: Any,
    run: Run,
    config: dict[str, Any],
    ctx: RunContext,
    ended: Run,
    reason: str | None,
) -> Outcome | tuple[Run, dict[str, Any]]:
    """Compensate the ended run's effects and write the report into its outcome: the run as
    rewritten and the report, or the continuation's own outcome if it was cancelled."""
    thread = {"configurable": {**config["configurable"], "thread_id": run.thread_id}}
    try:
        report = await compensate_run(graph, thread, ended, reason)
    except RunCancelledError as stop:
        return lifecycle.cancelled(stop.action, stop.reason or "")
    body = report.to_dict(args=False)
    ctx.events.add("compensation", {**body, "compensates": ended.run_id})
    ctx.check("compensation.report")  # still this worker's: the ended run is written next
    error, why = ending(ended, body)
    ended = await store.set_run_ending(ended.run_id, tenant=run.tenant_id, error=error, reason=why)
    event = NewEvent("compensation", {**body, "continued_by": run.run_id})
    await store.add_events(ended.run_id, [event], tenant=run.tenant_id)
    return ended, body


async def _continued(store: RunStore, run: Run, ended: Run, reason: str) -> Outcome:
    """The continuation's outcome: success, the thread as the runs before it left it."""
    status, thread_error = await _thread_after(store, run, ended)
    return Outcome(
        status="success",
        thread_status=status,
        thread_error=thread_error,
        values=KEEP,
        reason=reason,
    )
