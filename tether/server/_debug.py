"""The debugger's branches on a server: ``POST /threads/{id}/fork`` and ``/what_if``.

Both make a new thread from a thread's timeline (:mod:`tether.debug`), with
the served graph code and on the runtime's checkpointer, as a local timeline
does in its own process:

- a fork copies the checkpoints up to a step (with their ids) and the steps
  recorded before it, then writes ``update`` through LangGraph's
  ``update_state`` (:mod:`._state`), so running the fork replays those steps;
- a what-if copies the steps before one model or tool step, replaces that
  step's output, and starts a run on the new thread: its later steps ask the
  model and run the tools afresh, durable tools under new idempotency keys
  (derived from the new thread), so the original run's effects are not repeated.

The source thread is read through the caller's runtime (another tenant's, or
one the auth handlers hide, is a 404). The new thread is created in the run
store first, for the caller (``threads.create``), so a taken id is refused
before anything is copied; a what-if also needs ``threads.create_run`` on the
source, since it runs the graph's code as a run does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from langgraph.errors import InvalidUpdateError

from tether.debug import DebugError, Timeline, new_thread_id, timeline
from tether.runtime import Run, Thread, lifecycle, streaming
from tether.server import _state
from tether.server._errors import ApiError
from tether.server._served import Served
from tether.steps import StepsError

__all__ = ["fork_thread", "what_if_thread"]


@contextlib.contextmanager
def _refused() -> Iterator[None]:
    """Bad input found by the debugger (a step or checkpoint not on the thread) as a 422."""
    try:
        yield
    except (DebugError, StepsError, InvalidUpdateError) as exc:
        raise ApiError(422, str(exc)) from exc


async def _source_graph(srv: Served, thread: Thread, what: str) -> str:
    graph_id = await srv.thread_graph(thread)
    if graph_id is None or graph_id not in srv.project.graph_ids:
        raise ApiError(409, f"thread {thread.thread_id!r} has no graph of this project to {what}")
    return graph_id


async def _new_thread(srv: Served, source: Thread, graph_id: str, thread_id: str) -> Thread:
    """The branch's thread in the run store, created for the caller (``threads.create``)."""
    metadata = {**source.metadata, "graph_id": graph_id, "branched_from": source.thread_id}
    return await srv.runtime.store.create_thread(
        tenant=srv.runtime.tenant, thread_id=thread_id, metadata=metadata
    )


async def _discard(srv: Served, thread_id: str) -> None:
    """Undo a branch that failed halfway: its thread, runs and checkpoints."""
    with contextlib.suppress(Exception):  # the error that got us here is the one to report
        await srv.discard_thread(thread_id)


async def _record(srv: Served, graph: Any, thread_id: str) -> Thread:
    """The branch's state recorded on its thread, as ``threads.get`` and search show it."""
    snapshot = await graph.aget_state(srv.config(thread_id, None))
    return await srv.runtime.store.record_thread_state(
        thread_id,
        tenant=srv.runtime.tenant,
        values=streaming.to_json(snapshot.values),
        interrupts=streaming.to_json(lifecycle.interrupts_by_task(snapshot.tasks)),
        status="interrupted" if snapshot.next else "idle",
    )


async def _timeline(srv: Served, graph: Any, thread_id: str) -> Timeline:
    saver = await srv.runtime.checkpointer()
    with _refused():
        return await timeline(saver, thread_id, graph=graph)


async def fork_thread(
    srv: Served,
    thread_id: str,
    at: int | str,
    update: Any,
    *,
    as_node: str | None,
    new_id: str | None,
) -> Thread:
    """A new thread that starts where step (or checkpoint) ``at`` of ``thread_id`` started."""
    source = await srv.runtime.get_thread(thread_id)
    graph_id = await _source_graph(srv, source, "fork")
    saver = await srv.runtime.checkpointer()
    async with srv.project.graph(graph_id, srv.config(thread_id, None), saver) as graph:
        found = await _timeline(srv, graph, thread_id)
        with _refused():
            found._start(at)  # a step or checkpoint not on the thread: refused before creating
        target = new_id or new_thread_id(thread_id, "fork")
        await _new_thread(srv, source, graph_id, target)
        try:
            with _refused():
                await found.fork(at, thread_id=target)
            if update is None and as_node is None:
                return await _record(srv, graph, target)
        except BaseException:
            await _discard(srv, target)
            raise
    try:
        await _state.update_state(srv, target, update, as_node=as_node, checkpoint=None)
    except BaseException:
        await _discard(srv, target)
        raise
    return await srv.runtime.get_thread(target)


async def what_if_thread(
    srv: Served, thread_id: str, step: int, output: Any, *, new_id: str | None
) -> tuple[Thread, Run]:
    """Step ``step`` of ``thread_id`` replaced by ``output`` in a new thread, and the run
    (pending) that runs the new thread on from there."""
    source = await srv.runtime.get_thread(thread_id)
    # the branch runs the graph's code, model and tools: as much as starting a run
    await srv.authorize_thread(thread_id, "create_run")
    graph_id = await _source_graph(srv, source, "run a what-if on")
    saver = await srv.runtime.checkpointer()
    async with srv.project.graph(graph_id, srv.config(thread_id, None), saver) as graph:
        found = await _timeline(srv, graph, thread_id)
        with _refused():
            found._replacement(step, output)  # refused before the new thread is created
        target = new_id or new_thread_id(thread_id, "whatif")
        await _new_thread(srv, source, graph_id, target)
        try:
            with _refused():
                await found._what_if_branch(step, output, thread_id=target)
            thread = await _record(srv, graph, target)
            run = await srv.runtime.create(graph_id, thread_id=target, input=None)
        except BaseException:
            await _discard(srv, target)
            raise
    return thread, run
