"""``threads.join_stream``: ``GET /threads/{thread_id}/stream``, every run of a thread in turn.

The stream sends the events of the thread's runs as their workers store them,
one run after another in creation order, each run's events followed by
``run_done`` (``{"run_id", "status"}``, LangGraph's status); it stays open for
the thread's next runs until the client leaves. Without ``Last-Event-ID`` it
starts at the run in flight (or the next one to come); each frame's id is
``<run seq>-<event seq>``, and a client reconnecting with one gets exactly what
follows it, finished runs included. A run stopped at an interrupt and resumed
(the same run continuing) is sent again from where it stopped, with a second
``run_done``. Only ``stream_mode=run_modes`` (the SDK's default) is offered.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query
from fastapi.responses import StreamingResponse

from tether.runtime import Run, Runtime
from tether.server._errors import ApiError
from tether.server._mapping import event_mode, run_json
from tether.server._paths import path_id
from tether.server._served import Served, served
from tether.server._sse import frame

__all__ = ["router"]

router = APIRouter()
Srv = Annotated[Served, Depends(served)]
_HEARTBEAT = 5.0
_POLL = 1.0  # seconds between looks for the thread's next run
_PAGE = 500


Cursor = tuple[int, int | None]  # (run seq, its last event sent; None: the run is done)


def _cursor(last_event_id: str | None) -> Cursor | None:
    """The position a ``Last-Event-ID`` this stream sent names."""
    if last_event_id is None or not last_event_id.strip():
        return None
    run_seq, sep, event_seq = last_event_id.strip().partition("-")
    if not sep or not run_seq.isdigit() or not (event_seq.isdigit() or event_seq == "done"):
        raise ApiError(
            422,
            f"Last-Event-ID {last_event_id!r} is not one of this stream's ids "
            "('<run seq>-<event seq>' or '<run seq>-done')",
        )
    return int(run_seq), None if event_seq == "done" else int(event_seq)


async def _runs(rt: Runtime, thread_id: str) -> list[Run]:
    """The thread's runs, oldest first."""
    found: list[Run] = []
    while True:
        page = await rt.list(thread_id=thread_id, limit=_PAGE, offset=len(found))
        found += page
        if len(page) < _PAGE:
            return sorted(found, key=lambda run: run.seq)


async def _start(rt: Runtime, thread_id: str) -> Cursor:
    """Where a stream without ``Last-Event-ID`` begins: at the oldest run in flight,
    else after the newest run."""
    runs = await _runs(rt, thread_id)
    active = [run for run in runs if run.active]
    if active:
        return active[0].seq, 0
    return (runs[-1].seq if runs else 0), None


async def _with_heartbeats(items: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """``items``, with a comment line whenever nothing came for a few seconds."""
    pending: asyncio.Task[Any] | None = None
    iterator = items.__aiter__()
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(iterator.__anext__())
            done, _ = await asyncio.wait({pending}, timeout=_HEARTBEAT)
            if not done:
                yield b": heartbeat\n\n"
                continue
            task, pending = pending, None
            try:
                yield task.result()
            except StopAsyncIteration:
                return
    finally:
        if pending is not None:
            pending.cancel()
        with contextlib.suppress(Exception):
            await iterator.aclose()  # type: ignore[attr-defined]


def _next(runs: list[Run], cursor: Cursor) -> tuple[Run, int] | None:
    """The run to send next and the event to start after."""
    run_seq, after = cursor
    for run in runs:
        if run.seq == run_seq and after is not None:
            return run, after
        if run.seq > run_seq:
            return run, 0
    return None


async def _frames(rt: Runtime, thread_id: str, cursor: Cursor) -> AsyncIterator[bytes]:
    # Runs stopped at an interrupt, by id: the last event sent. A resume (an approval
    # decided, ``/v1/runs/{id}/resume``) runs the same run again; its new events follow.
    waiting = {
        run.run_id: run.last_seq
        for run in await _runs(rt, thread_id)
        if run.status == "interrupted"
        and (run.seq < cursor[0] or (run.seq == cursor[0] and cursor[1] is None))
    }
    while True:
        runs = await _runs(rt, thread_id)
        resumed = [r for r in runs if r.run_id in waiting and r.status != "interrupted"]
        found = (resumed[0], waiting.pop(resumed[0].run_id)) if resumed else _next(runs, cursor)
        if found is None:
            await asyncio.sleep(_POLL)
            continue
        run, last = found
        async for event in rt.follow(run.run_id, after=last):
            last = event.seq
            if event_mode(event.kind) is not None:
                yield frame(event.kind, event.data, f"{run.seq}-{event.seq}")
        stopped = await rt.get(run.run_id)
        shown = run_json(stopped)
        yield frame(
            "run_done",
            {"run_id": run.run_id, "status": None if shown is None else shown["status"]},
            f"{run.seq}-done",
        )
        if stopped.status == "interrupted":
            waiting[run.run_id] = last
        cursor = max(cursor[0], run.seq), None


@router.get("/threads/{thread_id}/stream")
async def join_thread_stream(
    thread_id: str,
    srv: Srv,
    stream_mode: Annotated[list[str] | None, Query()] = None,
    last_event_id: Annotated[str | None, Header()] = None,
) -> StreamingResponse:
    """``threads.join_stream``."""
    modes = set(stream_mode or ["run_modes"])
    if modes != {"run_modes"}:
        other = sorted(modes - {"run_modes"})
        raise ApiError(
            422,
            f"threads.join_stream with stream_mode {', '.join(other)} is not supported by "
            "tether serve yet; use 'run_modes'",
        )
    rt = srv.runtime
    tid = path_id(thread_id)
    await rt.get_thread(tid)  # 404 before the stream starts
    cursor = _cursor(last_event_id) or await _start(rt, tid)
    return StreamingResponse(
        _with_heartbeats(_frames(rt, tid, cursor)), media_type="text/event-stream"
    )
