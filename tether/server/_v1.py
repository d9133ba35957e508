"""The compact durability API under ``/v1``: start a run, watch it, answer it, cancel it.

* ``POST /v1/runs`` starts a run of an agent (``{"agent", "input", "thread_id"?}``);
* ``GET /v1/runs/{run_id}`` its status, and for an ``interrupted`` run what it
  waits on (node, reason, approval id) and the checkpoint it stopped at;
* ``POST /v1/runs/{run_id}/resume`` answers it: a run waiting on a tether
  approval only through the approvals' decision checks (the decider is the
  request's user, :func:`~tether.server._identity.current_user`, never the
  body), a plain ``interrupt()`` with the resume value;
* ``POST /v1/runs/{run_id}/cancel``;
* ``GET /v1/runs/{run_id}/events?after=N`` the run's events, mid-flight too;
* ``GET /v1/runs/{run_id}/checkpoints/{checkpoint_id}`` one checkpoint it saved.

Every route acts for the request's user, in the user's tenant, so it needs a
known user (``401`` otherwise).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Body, Depends, Query

from tether.approvals import ApprovalError, UnknownApprovalError, get_approval
from tether.runtime import Run, Runtime, compensations, streaming
from tether.server._errors import ApiError
from tether.server._identity import User, current_user
from tether.server._paths import path_id, quote_id
from tether.server._payloads import BIGGEST_COUNT
from tether.server._served import Served, served
from tether.server._v1_models import (
    CancelBody,
    CheckpointOut,
    EventOut,
    EventsOut,
    InterruptOut,
    ResumeBody,
    ResumeOut,
    RunCreateBody,
    RunOut,
    RunStatusOut,
)
from tether.server.inbox._deciding import decide_for, payload_from_body, status_of
from tether.server.inbox._queue import tenant_runtime

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["v1"])
UserDep = Annotated[User, Depends(current_user)]
Srv = Annotated[Served, Depends(served)]
_PAGE = 1000
_MAX_WAIT = 30.0


def _json(data: Any) -> Any:
    """``data`` as plain JSON values (messages and other objects serialized)."""
    raw = orjson.dumps(data, default=streaming.json_default, option=orjson.OPT_NON_STR_KEYS)
    return orjson.loads(raw)


def _out(run: Run) -> RunOut:
    return RunOut(run_id=run.run_id, status=run.status, thread_id=run.thread_id)


async def _all_events(rt: Runtime, run_id: str, kinds: list[str]) -> AsyncIterator[Any]:
    after = 0
    while True:
        page = await rt.events(run_id, after=after, limit=_PAGE, kinds=kinds)
        for event in page:
            yield event
        if len(page) < _PAGE:
            return
        after = page[-1].seq


def _thread_config(thread_id: str, checkpoint_id: str | None = None) -> Any:
    configurable = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


async def _run_checkpoints(rt: Runtime, run: Run) -> list[Any]:
    """The run's root checkpoints, oldest first, preceded by the one before the first
    (the previous run's last, if any): checkpoints name their run in their metadata."""
    saver = await rt.checkpointer()
    found: list[Any] = []
    async for item in saver.alist(_thread_config(run.thread_id)):
        mine = (item.metadata or {}).get("run_id") == run.run_id
        if mine:
            found.append(item)
        elif found:
            found.append(item)  # the parent of the run's first checkpoint
            break
    return found[::-1]


def _ran(before: Any, after: Any) -> list[str]:
    """The nodes that finished between two consecutive checkpoints: those whose
    ``versions_seen`` changed (LangGraph records what a node saw when it completes)."""
    old = {} if before is None else before.checkpoint.get("versions_seen") or {}
    new = after.checkpoint.get("versions_seen") or {}
    return sorted(n for n, seen in new.items() if not n.startswith("__") and old.get(n) != seen)


def _reason(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(_json(value), sort_keys=True)


async def _interrupts(rt: Runtime, run: Run) -> tuple[list[InterruptOut], str | None]:
    """What an interrupted run waits on, and the last checkpoint it saved."""
    nodes: dict[str, str] = {}
    async for event in _all_events(rt, run.run_id, ["node.finished"]):
        for interrupt_id in event.data.get("interrupts") or ():
            nodes.setdefault(str(interrupt_id), str(event.data.get("node")))
    saver = await rt.checkpointer()
    head = await saver.aget_tuple(_thread_config(run.thread_id))
    checkpoint_id = None
    if head is not None and (head.metadata or {}).get("run_id") == run.run_id:
        checkpoint_id = str(head.config["configurable"]["checkpoint_id"])
    values: dict[str, Any] = {}
    thread = await rt.get_thread(run.thread_id)
    for items in (thread.interrupts or {}).values():
        for item in items or ():
            if isinstance(item, dict) and "id" in item:
                values[str(item["id"])] = item.get("value")
    found = []
    for waiting in run.waiting_on:
        node = nodes.get(waiting.interrupt_id)
        value = values.get(waiting.interrupt_id)
        reason = _reason(value)
        if waiting.approval_id:
            try:
                view = await get_approval(saver, waiting.approval_id)
            except UnknownApprovalError:
                pass
            else:
                node = view.request.node or node
                reason = view.request.why
        found.append(
            InterruptOut(
                node=node,
                reason=reason,
                approval_id=waiting.approval_id,
                interrupt_id=waiting.interrupt_id,
                value=_json(value),
            )
        )
    return found, checkpoint_id


@router.post("/runs", status_code=201, response_model=RunOut)
async def create_run(body: RunCreateBody, user: UserDep, srv: Srv) -> RunOut:
    """Start a run of ``agent``; a worker executes it."""
    rt = tenant_runtime(srv.runtime, user)
    run = await rt.create(
        body.agent,
        thread_id=body.thread_id,
        input=body.input,
        config=body.config,
        context=body.context,
        metadata=body.metadata,
        multitask_strategy=body.multitask_strategy,
        if_not_exists=body.if_not_exists,
        on_completion="keep" if body.thread_id is None else None,
        after_seconds=body.after_seconds,
        step_timeout=body.step_timeout,
        interrupt_before=body.interrupt_before,
        interrupt_after=body.interrupt_after,
    )
    return _out(run)


@router.get("/runs/{run_id}", response_model=RunStatusOut)
async def get_run(run_id: str, user: UserDep, srv: Srv) -> RunStatusOut:
    """The run's status; an interrupted run also says what it waits on."""
    rt = tenant_runtime(srv.runtime, user)
    run = await rt.get(path_id(run_id))
    shown = RunStatusOut(
        run_id=run.run_id,
        thread_id=run.thread_id,
        agent=run.graph_id,
        status=run.status,
        created_at=run.created_at.isoformat(),
        updated_at=run.updated_at.isoformat(),
        error=None if run.error is None else _json(dict(run.error)),
        cancel_reason=run.cancel_reason,
        ended_reason=run.ended_reason,
    )
    if run.status == "interrupted":
        interrupts, checkpoint_id = await _interrupts(rt, run)
        shown.interrupts = interrupts
        shown.interrupt = interrupts[0] if interrupts else None
        shown.checkpoint_id = checkpoint_id
    return shown


def _approval_to_answer(run: Run, waiting: list[str], payload: dict[str, Any]) -> str:
    named = payload.pop("approval_id", None)
    if named is not None:
        if named not in waiting:
            raise ApiError(
                422,
                f"run {run.run_id!r} does not wait on approval {named!r} "
                f"(it waits on {', '.join(waiting)})",
            )
        return str(named)
    if len(waiting) > 1:
        raise ApiError(
            422,
            f"run {run.run_id!r} waits on {len(waiting)} approvals ({', '.join(waiting)}); "
            "name one as payload.approval_id",
        )
    return str(waiting[0])


@router.post("/runs/{run_id}/resume", response_model=ResumeOut)
async def resume_run(run_id: str, body: ResumeBody, user: UserDep, srv: Srv) -> ResumeOut:
    """Answer an interrupted run; it is enqueued again for a worker."""
    rt = tenant_runtime(srv.runtime, user)
    run = await rt.get(path_id(run_id))
    waiting = [str(w.approval_id) for w in run.waiting_on if w.approval_id]
    if run.status != "interrupted":
        # An ended run whose compensation waits on a person: decide that request.
        waiting = await compensations.awaiting(rt, run)
        if not waiting:
            raise ApiError(
                409, f"run {run.run_id!r} is {run.status}, not interrupted: nothing to resume"
            )
    if not waiting:
        if body.decision != "resume":
            raise ApiError(
                422,
                f"run {run.run_id!r} waits on a plain interrupt(), not a tether approval: "
                f"answer it with decision 'resume' and the value as payload, not {body.decision!r}",
            )
        resumed = await rt.resume(run.run_id, {"resume": body.payload})
        return ResumeOut(**_out(resumed).model_dump(), decision="resume")
    if body.decision == "resume":
        raise ApiError(
            422,
            f"run {run.run_id!r} waits on a tether approval: decide it with decision "
            "'approve', 'reject' (payload.reason) or 'edit' (payload.args), optionally with "
            "payload.args_sha256",
        )
    if body.payload is not None and not isinstance(body.payload, dict):
        raise ApiError(
            422,
            "payload must be an object (args, args_sha256, reason), "
            f"got {type(body.payload).__name__}",
        )
    fields = dict(body.payload or {})
    approval_id = _approval_to_answer(run, waiting, fields)
    decision = payload_from_body({**fields, "decision": body.decision})
    try:
        result = await decide_for(srv.runtime, user, approval_id, decision)
    except ApprovalError as exc:
        raise ApiError(status_of(exc), str(exc)) from None
    after = await rt.get(run.run_id)
    return ResumeOut(
        **_out(after).model_dump(), approval_id=result.approval_id, decision=body.decision
    )


@router.post("/runs/{run_id}/cancel", response_model=RunOut)
async def cancel_run(
    run_id: str,
    user: UserDep,
    srv: Srv,
    body: Annotated[CancelBody | None, Body()] = None,
) -> RunOut:
    """Cancel the run (a running one stops at its next step)."""
    rt = tenant_runtime(srv.runtime, user)
    options = body or CancelBody()
    run = await rt.cancel(path_id(run_id), action=options.action, reason=options.reason)
    return _out(run)


@router.get("/runs/{run_id}/events", response_model=EventsOut)
async def run_events(
    run_id: str,
    *,
    user: UserDep,
    srv: Srv,
    after: Annotated[
        int, Query(ge=0, le=BIGGEST_COUNT, description="Events with a greater seq.")
    ] = 0,
    limit: Annotated[int, Query(ge=1, le=_PAGE)] = 100,
    wait: Annotated[
        float, Query(ge=0, le=_MAX_WAIT, description="Seconds to wait for a first event.")
    ] = 0,
) -> EventsOut:
    """The run's events after ``after``, as the worker stores them, while it runs too."""
    rt = tenant_runtime(srv.runtime, user)
    run = await rt.get(path_id(run_id))
    found = await rt.events(run.run_id, after=after, limit=limit, wait=wait)
    events = [
        EventOut(
            seq=e.seq,
            kind=e.kind,
            ns=e.ns,
            data=_json(e.data),
            created_at=None if e.created_at is None else e.created_at.isoformat(),
        )
        for e in found
    ]
    status = run.status if not found else (await rt.get(run.run_id)).status
    return EventsOut(
        run_id=run.run_id,
        status=status,
        events=events,
        next_after=events[-1].seq if events else after,
    )


@router.get("/runs/{run_id}/checkpoints/{checkpoint_id}", response_model=CheckpointOut)
async def run_checkpoint(run_id: str, checkpoint_id: str, user: UserDep, srv: Srv) -> CheckpointOut:
    """A checkpoint the run saved: when, which of its nodes had finished, where its state is."""
    rt = tenant_runtime(srv.runtime, user)
    run = await rt.get(path_id(run_id))
    wanted = path_id(checkpoint_id)
    chain = await _run_checkpoints(rt, run)
    nodes: list[str] = []
    found = None
    for before, after in zip([None, *chain], chain, strict=False):
        if (after.metadata or {}).get("run_id") != run.run_id:
            continue
        nodes += _ran(before, after)
        if after.config["configurable"]["checkpoint_id"] == wanted:
            found = after
            break
    if found is None:
        raise ApiError(404, f"run {run.run_id!r} saved no checkpoint {wanted!r}")
    return CheckpointOut(
        run_id=run.run_id,
        thread_id=run.thread_id,
        checkpoint_id=wanted,
        state_uri=f"/threads/{quote_id(run.thread_id)}/state/{quote_id(wanted)}",
        created_at=str(found.checkpoint["ts"]),
        nodes_completed=nodes,
    )
