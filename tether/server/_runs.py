"""Runs: create (one or a batch), wait, stream, join, get, list, cancel, delete
(design §2.1-§2.9).

Stateful routes live under ``/threads/{thread_id}/runs``; the stateless ones
(``/runs``, ``/runs/wait``, ``/runs/stream``, ``/runs/batch``) make a new thread,
temporary unless ``on_completion="keep"``: it is deleted once ``wait`` or
``stream`` has sent the run's result (workers delete those nobody read). A run's
status is shown as LangGraph shows it (design §2.12); a run cancelled with
``rollback`` is gone for LangGraph, so it answers 404.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Body, Depends, Header, Query, Response
from fastapi.responses import StreamingResponse

from tether.errors import TetherError
from tether.runtime import Run, RunNotActiveError, streaming
from tether.server._errors import ApiError, status_for
from tether.server._mapping import run_json
from tether.server._paths import path_id, quote_id
from tether.server._payloads import BIGGEST_COUNT, CancelMany, RunCreate
from tether.server._served import Served, served
from tether.server._sse import heartbeat_json, run_frames

__all__ = ["router"]

router = APIRouter()
Srv = Annotated[Served, Depends(served)]
_ALL_STATUSES: dict[str, tuple[str, ...]] = {
    "pending": ("pending",),
    "running": ("running",),
    "all": ("pending", "running"),
}


def _run_path(run: Run) -> str:
    """Where a run lives. A stateless run has a (temporary) thread too, so its stream
    can be rejoined and checked at the same paths as any other run's."""
    return f"/threads/{quote_id(run.thread_id)}/runs/{quote_id(run.run_id)}"


def _shown(run: Run) -> dict[str, Any]:
    shown = run_json(run)
    if shown is None:
        raise ApiError(404, f"run {run.run_id!r} was rolled back and no longer exists")
    return shown


async def _check(srv: Served, body: RunCreate) -> None:
    await srv.check_webhook(body.webhook)
    # The run store accepts every LangGraph mode; the worker refuses those it cannot
    # serve. Refuse them here, before a run is created only to fail.
    streaming.stream_modes(body.stream_mode)


async def _create(srv: Served, thread_id: str | None, body: RunCreate) -> Run:
    await _check(srv, body)
    return await _enqueue(srv, thread_id, body)


async def _enqueue(srv: Served, thread_id: str | None, body: RunCreate) -> Run:
    """Create the run of a body :func:`_check` passed."""
    return await srv.runtime.create(body.assistant_id, **_options(thread_id, body))


def _options(thread_id: str | None, body: RunCreate) -> dict[str, Any]:
    """``Runtime.create``'s arguments for ``body`` (after its assistant id)."""
    checkpoint_id = body.checkpoint_id or (body.checkpoint or {}).get("checkpoint_id")
    durability = body.durability
    if durability is None and body.checkpoint_during is not None:
        durability = "async" if body.checkpoint_during else "exit"
    return {
        "thread_id": thread_id,
        "input": body.input,
        "command": body.command,
        "config": body.config,
        "context": body.context,
        "metadata": body.metadata,
        "multitask_strategy": body.multitask_strategy,
        "if_not_exists": body.if_not_exists,
        "on_completion": body.on_completion,
        "after_seconds": body.after_seconds or 0,
        "stream_mode": body.stream_mode,
        "stream_subgraphs": body.stream_subgraphs,
        "interrupt_before": body.interrupt_before,
        "interrupt_after": body.interrupt_after,
        "checkpoint_id": checkpoint_id,
        "durability": durability,
        "webhook": body.webhook,
    }


async def _run_on(srv: Served, thread_id: str, run_id: str) -> Run:
    """The run, if it is on this thread (else 404, as for a missing run)."""
    run = await srv.runtime.get(run_id)
    if run.thread_id != thread_id:
        raise ApiError(404, f"no run {run_id!r} on thread {thread_id!r}")
    return run


async def _finished(srv: Served, run_id: str) -> Any:
    return await srv.join_body(await srv.runtime.wait(run_id))


def _modes(value: list[str] | None) -> list[str]:
    return [m for item in value or () for m in item.split(",") if m]


def _after(last_event_id: str | None) -> int:
    if not last_event_id:
        return 0
    try:
        after = int(last_event_id)
    except ValueError:
        raise ApiError(
            422, f"Last-Event-ID {last_event_id!r} is not an event id of this server (an integer)"
        ) from None
    if after == -1:  # LangGraph's clients ask for the whole stream again with "-1"
        return 0
    if after < 0:
        raise ApiError(422, f"Last-Event-ID must not be negative (but -1: all), got {after}")
    if after > BIGGEST_COUNT:
        raise ApiError(422, f"Last-Event-ID {after} is larger than any event id")
    return after


# -- create ---------------------------------------------------------------------------------


async def _create_response(srv: Served, thread_id: str | None, body: RunCreate) -> Response:
    run = await _create(srv, thread_id, body)
    headers = {"Content-Location": _run_path(run)}
    return Response(_json(_shown(run)), media_type="application/json", headers=headers)


async def _then_discard(srv: Served, run: Run, body: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """``body``, then the run's temporary thread deleted (once all of it was sent)."""
    async for chunk in body:
        yield chunk
    if run.kwargs.get("temporary"):
        await srv.discard_temporary(run)


async def _wait_response(srv: Served, thread_id: str | None, body: RunCreate) -> Response:
    run = await _create(srv, thread_id, body)
    path = _run_path(run)
    cancel = run.run_id if body.on_disconnect == "cancel" else None
    return StreamingResponse(
        _then_discard(
            srv,
            run,
            heartbeat_json(_finished(srv, run.run_id), runtime=srv.runtime, cancel_run=cancel),
        ),
        media_type="application/json",
        headers={"Location": f"{path}/join", "Content-Location": path},
    )


async def _stream_response(srv: Served, thread_id: str | None, body: RunCreate) -> Response:
    run = await _create(srv, thread_id, body)
    path = _run_path(run)
    frames = run_frames(
        srv.runtime, run.run_id, cancel_on_disconnect=body.on_disconnect == "cancel"
    )
    return StreamingResponse(
        _then_discard(srv, run, frames),
        media_type="text/event-stream",
        headers={"Location": f"{path}/stream", "Content-Location": path},
    )


def _json(value: Any) -> bytes:
    return orjson.dumps(value)


@router.post("/threads/{thread_id}/runs")
async def create_run(thread_id: str, body: RunCreate, srv: Srv) -> Response:
    return await _create_response(srv, path_id(thread_id), body)


@router.post("/runs")
async def create_stateless_run(body: RunCreate, srv: Srv) -> Response:
    return await _create_response(srv, None, body)


@router.post("/runs/batch")
async def create_stateless_runs(
    srv: Srv, bodies: Annotated[list[RunCreate], Body()]
) -> list[dict[str, Any]]:
    """Several stateless runs at once: each is checked in full before any is created, and
    a refusal names the run (``runs[2]: ...``)."""
    for index, body in enumerate(bodies):
        try:
            await _check(srv, body)
            await srv.runtime.check_create(body.assistant_id, **_options(None, body))
        except (ApiError, TetherError) as exc:
            status = exc.status if isinstance(exc, ApiError) else status_for(exc)
            if status is None:
                raise
            raise ApiError(status, f"runs[{index}]: {exc}") from exc
    return [_shown(await _enqueue(srv, None, body)) for body in bodies]


@router.post("/threads/{thread_id}/runs/wait")
async def wait_run(thread_id: str, body: RunCreate, srv: Srv) -> Response:
    return await _wait_response(srv, path_id(thread_id), body)


@router.post("/runs/wait")
async def wait_stateless_run(body: RunCreate, srv: Srv) -> Response:
    return await _wait_response(srv, None, body)


@router.post("/threads/{thread_id}/runs/stream")
async def stream_run(thread_id: str, body: RunCreate, srv: Srv) -> Response:
    return await _stream_response(srv, path_id(thread_id), body)


@router.post("/runs/stream")
async def stream_stateless_run(body: RunCreate, srv: Srv) -> Response:
    return await _stream_response(srv, None, body)


# -- read -----------------------------------------------------------------------------------


@router.get("/threads/{thread_id}/runs/{run_id}")
async def get_run(thread_id: str, run_id: str, srv: Srv) -> dict[str, Any]:
    return _shown(await _run_on(srv, path_id(thread_id), path_id(run_id)))


@router.get("/threads/{thread_id}/runs")
async def list_runs(
    thread_id: str,
    srv: Srv,
    limit: Annotated[int, Query(ge=1, le=1000)] = 10,
    offset: Annotated[int, Query(ge=0, le=BIGGEST_COUNT)] = 0,
    status: str | None = None,
) -> list[dict[str, Any]]:
    thread = await srv.runtime.get_thread(path_id(thread_id))
    shown: list[dict[str, Any]] = []
    skipped = 0
    page_offset = 0
    while len(shown) < limit:
        page = await srv.runtime.list(thread_id=thread.thread_id, limit=100, offset=page_offset)
        for run in page:
            as_shown = run_json(run)
            if as_shown is None or (status is not None and as_shown["status"] != status):
                continue
            if skipped < offset:
                skipped += 1
                continue
            shown.append(as_shown)
            if len(shown) == limit:
                break
        if len(page) < 100:
            break
        page_offset += 100
    return shown


@router.get("/threads/{thread_id}/runs/{run_id}/join")
async def join_run(thread_id: str, run_id: str, srv: Srv) -> Response:
    run = await _run_on(srv, path_id(thread_id), path_id(run_id))
    _shown(run)
    return StreamingResponse(
        heartbeat_json(_finished(srv, run.run_id)), media_type="application/json"
    )


@router.get("/threads/{thread_id}/runs/{run_id}/stream")
async def join_run_stream(
    thread_id: str,
    run_id: str,
    srv: Srv,
    *,
    stream_mode: Annotated[list[str] | None, Query()] = None,
    cancel_on_disconnect: bool = False,
    last_event_id: Annotated[str | None, Header()] = None,
) -> Response:
    run = await _run_on(srv, path_id(thread_id), path_id(run_id))
    _shown(run)
    return StreamingResponse(
        run_frames(
            srv.runtime,
            run.run_id,
            after=_after(last_event_id),
            modes=_modes(stream_mode),
            cancel_on_disconnect=cancel_on_disconnect,
        ),
        media_type="text/event-stream",
    )


# -- delete ---------------------------------------------------------------------------------


@router.delete("/threads/{thread_id}/runs/{run_id}", status_code=204)
async def delete_run(thread_id: str, run_id: str, srv: Srv) -> Response:
    """Delete a run that has stopped, with its events (409 while it is pending or running).
    The thread's checkpoints stay: its state is what the run left."""
    run = await _run_on(srv, path_id(thread_id), path_id(run_id))
    _shown(run)
    await srv.runtime.store.delete_run(run.run_id, tenant=srv.runtime.tenant)
    return Response(status_code=204)


# -- cancel ---------------------------------------------------------------------------------


@router.post("/threads/{thread_id}/runs/{run_id}/cancel")
async def cancel_run(
    thread_id: str,
    run_id: str,
    srv: Srv,
    wait: bool = False,
    action: str = "interrupt",
) -> Response:
    run = await _run_on(srv, path_id(thread_id), path_id(run_id))
    _shown(run)
    try:
        await srv.runtime.cancel(run.run_id, action=action)  # type: ignore[arg-type]
    except RunNotActiveError as exc:
        raise ApiError(404, f"No matching runs to cancel: {exc}") from None
    if not wait:
        return Response(status_code=202)
    path = _run_path(run)
    return StreamingResponse(
        heartbeat_json(_finished(srv, run.run_id)),
        media_type="application/json",
        headers={"Location": f"{path}/join"},
    )


@router.post("/runs/cancel", status_code=204)
async def cancel_runs(body: CancelMany, srv: Srv, action: str = "interrupt") -> Response:
    by_ids = body.thread_id is not None or body.run_ids is not None
    if sum((by_ids, body.status is not None, body.assistant_id is not None)) != 1:
        raise ApiError(422, "give exactly one of: thread_id with run_ids, status, or assistant_id")
    runs: list[Run] = []
    if by_ids:
        if body.thread_id is None or not body.run_ids:
            raise ApiError(422, "thread_id and run_ids go together")
        runs = [await _run_on(srv, body.thread_id, r) for r in body.run_ids]
    else:
        statuses = _ALL_STATUSES["all"] if body.status is None else _ALL_STATUSES[body.status]
        for status in statuses:
            runs += await srv.runtime.list(status=status, limit=1000)  # type: ignore[arg-type]
        if body.assistant_id is not None:
            runs = [r for r in runs if body.assistant_id in (r.assistant_id, r.graph_id)]
    cancelled = 0
    for run in runs:
        try:
            await srv.runtime.cancel(run.run_id, action=action)  # type: ignore[arg-type]
            cancelled += 1
        except RunNotActiveError:
            continue
    if by_ids and not cancelled:
        raise ApiError(404, "No matching runs to cancel: every run given has already stopped")
    return Response(status_code=204)
