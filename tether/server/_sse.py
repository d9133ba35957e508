"""Server-sent events: a run's event stream as LangGraph's server sends it (design §2.8-§2.9).

Every event the worker stored under a LangGraph name goes out as one frame,
with ``id: <seq>`` (the run's gap-free event sequence number), so a client that
reconnects with ``Last-Event-ID: N`` gets exactly the events after ``N``. The
first frame of a run is ``metadata`` (the worker writes it when it starts the
run); the last is ``end`` with the run's status, once the run has stopped.
tether's own events (``run.created``, ``node.started``, …) are never sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Collection
from typing import Any

import orjson

from tether.runtime import Runtime, streaming
from tether.server._mapping import event_mode, run_json

__all__ = ["frame", "heartbeat_json", "run_frames"]

log = logging.getLogger("tether.server")
_HEARTBEAT = 5.0  # seconds between keep-alive bytes while nothing happens
_background: set[asyncio.Task[Any]] = set()


def _dumps(data: Any) -> bytes:
    return orjson.dumps(data, default=streaming.json_default, option=orjson.OPT_NON_STR_KEYS)


def frame(event: str, data: Any, event_id: int | str | None = None) -> bytes:
    """One SSE frame."""
    head = f"event: {event}\ndata: ".encode() + _dumps(data) + b"\n"
    if event_id is not None:
        head += f"id: {event_id}\n".encode()
    return head + b"\n"


def _cancel_later(runtime: Runtime, run_id: str, reason: str) -> None:
    """Cancel a run from a stream whose client went away (the stream's task is being
    cancelled, so the cancel runs in a task of its own)."""

    async def cancel() -> None:
        with contextlib.suppress(Exception):
            await runtime.cancel(run_id, reason=reason)

    task = asyncio.get_running_loop().create_task(cancel())
    _background.add(task)
    task.add_done_callback(_background.discard)


async def run_frames(
    runtime: Runtime,
    run_id: str,
    *,
    after: int = 0,
    modes: Collection[str] = (),
    cancel_on_disconnect: bool = False,
) -> AsyncIterator[bytes]:
    """The run's SSE frames after event ``after``, live until the run stops, then ``end``.

    Args:
        modes: Send only these stream modes' events (``metadata`` and ``error``
            always go out); empty: every mode the run was created with.
        cancel_on_disconnect: Cancel the run if the client leaves before it stops.
    """
    wanted = frozenset(modes)
    finished = False
    events = runtime.follow(run_id, after=after).__aiter__()
    pending: asyncio.Task[Any] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(events.__anext__())
            done, _ = await asyncio.wait({pending}, timeout=_HEARTBEAT)
            if not done:
                yield b": heartbeat\n\n"
                continue
            task, pending = pending, None
            try:
                event = task.result()
            except StopAsyncIteration:
                break
            mode = event_mode(event.kind)
            if mode is None or (wanted and mode and mode not in wanted):
                continue
            yield frame(event.kind, event.data, event.seq)
        finished = True
        run = await runtime.get(run_id)
        shown = run_json(run)
        yield frame("end", {"run_id": run_id, "status": shown["status"] if shown else None})
    finally:
        if pending is not None:
            pending.cancel()
        with contextlib.suppress(Exception):
            await events.aclose()  # type: ignore[attr-defined]
        if not finished and cancel_on_disconnect:
            _cancel_later(runtime, run_id, "the client disconnected (on_disconnect=cancel)")


async def heartbeat_json(
    body: Any, *, runtime: Runtime | None = None, cancel_run: str | None = None
) -> AsyncIterator[bytes]:
    """A JSON body computed by awaiting ``body``, with a newline every few seconds
    before it (JSON ignores leading whitespace), so proxies keep the request open.

    With ``runtime`` and ``cancel_run``, that run is cancelled if the client
    leaves before the body is ready (``on_disconnect="cancel"``).
    """
    task = asyncio.ensure_future(body)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=_HEARTBEAT)
            if done:
                break
            yield b"\n"
        yield _dumps(task.result())
    finally:
        if not task.done():
            task.cancel()
            if runtime is not None and cancel_run is not None:
                _cancel_later(runtime, cancel_run, "the client disconnected (on_disconnect=cancel)")
