"""Changing a thread's state outside a run: ``update_state``, a new thread's
``supersteps``, ``copy`` and ``prune``.

A state update goes through the thread's graph compiled with the runtime's
checkpointer (``graph.aupdate_state``, or ``abulk_update_state`` for
supersteps), as LangGraph's server does, and the new state's values, interrupts
and status are then recorded on the thread in the run store, so ``threads.get``
and thread search show what ``get_state`` shows. A thread with a run pending or
running is refused (409): the run's worker owns its checkpoints until it stops.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, cast

from langgraph.errors import InvalidUpdateError
from langgraph.types import Command, StateUpdate

from tether.runtime import Thread, ThreadBusyError, lifecycle, streaming
from tether.server._errors import ApiError
from tether.server._served import Served

__all__ = ["apply_supersteps", "copy_thread", "prune_threads", "update_state"]

# What a reducer or LangGraph raises for an update it refuses (add_messages raises
# NotImplementedError for a non-message).
_REFUSED = (InvalidUpdateError, ValueError, KeyError, TypeError, NotImplementedError)
Write = Callable[[Any, Any], Awaitable[Any]]


async def _graph_of(srv: Served, thread: Thread) -> str:
    graph_id = await srv.thread_graph(thread)
    if graph_id is None:
        raise ApiError(
            400,
            f"thread {thread.thread_id!r} has no graph yet: no run was made on it and its "
            "metadata names no graph_id (create it with graph_id, or run it once)",
        )
    if graph_id not in srv.project.graph_ids:
        raise ApiError(404, f"graph {graph_id!r} of thread {thread.thread_id!r} is not served")
    return graph_id


async def _check_free(srv: Served, thread_id: str) -> None:
    for status in ("running", "pending"):
        runs = await srv.runtime.list(thread_id=thread_id, status=status, limit=1)
        if runs:
            raise ThreadBusyError(
                f"thread {thread_id!r} has run {runs[0].run_id!r} {status}; update its state "
                "once the thread has no run in flight (or cancel the run)"
            )


async def _check_no_approval(srv: Served, thread_id: str) -> None:
    """A run waiting on a tether approval is answered by a checked decision only, not by
    writing its answer into the state (as :meth:`Runtime.resume` refuses a resume value)."""
    for run in await srv.runtime.list(thread_id=thread_id, status="interrupted", limit=100):
        waiting = [w.approval_id for w in run.waiting_on if w.approval_id]
        if waiting:
            raise ThreadBusyError(
                f"run {run.run_id!r} on thread {thread_id!r} waits on approval "
                f"{', '.join(waiting)}: decide it (tether approvals) instead of updating the "
                "thread's state"
            )


def _checkpoint(config: Mapping[str, Any]) -> dict[str, Any]:
    configurable = config.get("configurable") or {}
    return {
        "thread_id": configurable.get("thread_id"),
        "checkpoint_ns": configurable.get("checkpoint_ns") or "",
        "checkpoint_id": configurable.get("checkpoint_id"),
        "checkpoint_map": configurable.get("checkpoint_map"),
    }


async def update_state(
    srv: Served,
    thread_id: str,
    values: Any,
    *,
    as_node: str | None,
    checkpoint: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """Apply ``values`` as if ``as_node`` wrote them (at ``checkpoint``, else the newest
    one); LangGraph's ``{"checkpoint": …}`` of the new state."""
    thread = await srv.runtime.get_thread(thread_id)
    await srv.authorize_thread(thread_id, "update")  # before anything is written
    graph_id = await _graph_of(srv, thread)
    await _check_free(srv, thread_id)
    await _check_no_approval(srv, thread_id)
    await srv.require_checkpoint(thread_id, checkpoint)

    async def write(graph: Any, config: Any) -> Any:
        return await graph.aupdate_state(config, values, as_node=as_node)

    written = _checkpoint(
        cast(Mapping[str, Any], await _write_state(srv, thread_id, graph_id, checkpoint, write))
    )
    # LangGraph's answer: the new checkpoint, its id, and the config that addresses it
    address = {k: written[k] for k in ("thread_id", "checkpoint_ns", "checkpoint_id")}
    return {
        "checkpoint": written,
        "checkpoint_id": written["checkpoint_id"],
        "configurable": address,
    }


async def apply_supersteps(
    srv: Served, thread: Thread, supersteps: Sequence[Sequence[Mapping[str, Any]]]
) -> None:
    """Write a new thread's first checkpoints, one per superstep, each superstep's updates
    applied as if their ``as_node`` nodes wrote them in one step (LangGraph's
    ``threads.create(supersteps=…)``). Each update is ``values`` or a ``command``."""
    await srv.authorize_thread(thread.thread_id, "update")
    graph_id = await _graph_of(srv, thread)
    steps = [
        [
            StateUpdate(
                cast(Any, _command(u["command"]) if u.get("command") else u.get("values")),
                u["as_node"],
            )
            for u in updates
        ]
        for updates in supersteps
    ]

    async def write(graph: Any, config: Any) -> Any:
        return await graph.abulk_update_state(config, steps)

    await _write_state(srv, thread.thread_id, graph_id, None, write)


def _command(value: Mapping[str, Any]) -> Command[Any]:
    return Command(
        resume=value.get("resume"), update=value.get("update"), goto=value.get("goto") or ()
    )


async def _write_state(
    srv: Served,
    thread_id: str,
    graph_id: str,
    checkpoint: Mapping[str, Any] | None,
    write: Write,
) -> Any:
    """Run ``write`` on the thread's graph, then record the new state on the thread."""
    config = srv.config(thread_id, checkpoint)
    config["configurable"]["tenant_id"] = srv.runtime.tenant
    config["metadata"] = {"graph_id": graph_id}  # how a later read finds the graph
    saver = await srv.runtime.checkpointer()
    async with srv.project.graph(graph_id, config, saver) as graph:
        try:
            written = await write(graph, config)
        except _REFUSED as exc:
            # 400, as LangGraph's server answers an update its graph refuses
            raise ApiError(400, f"cannot update the state of thread {thread_id!r}: {exc}") from exc
        head = srv.config(thread_id, None)
        snapshot = await graph.aget_state(head)
    await srv.runtime.store.record_thread_state(
        thread_id,
        tenant=srv.runtime.tenant,
        values=streaming.to_json(snapshot.values),
        interrupts=streaming.to_json(lifecycle.interrupts_by_task(snapshot.tasks)),
        status="interrupted" if snapshot.next else "idle",
    )
    return written


async def copy_thread(srv: Served, thread_id: str) -> Thread:
    """A new thread with the source's metadata, state and checkpoints (not its runs)."""
    await _check_free(srv, thread_id)
    copy = await srv.runtime.store.copy_thread(thread_id, tenant=srv.runtime.tenant)
    try:
        await (await srv.runtime.checkpointer()).acopy_thread(thread_id, copy.thread_id)
    except BaseException:
        await srv.runtime.store.delete_thread(copy.thread_id, tenant=srv.runtime.tenant)
        raise
    return copy


async def prune_threads(srv: Served, thread_ids: list[str], strategy: str) -> int:
    """``delete``: delete the threads; ``keep_latest``: keep only their newest checkpoint.
    Ids of missing threads are skipped; the number of threads pruned."""
    found = []
    for thread_id in dict.fromkeys(thread_ids):
        try:
            found.append((await srv.runtime.get_thread(thread_id)).thread_id)
        except LookupError:
            continue
    if strategy == "delete":
        for thread_id in found:
            await srv.runtime.delete_thread(thread_id)
    elif found:
        for thread_id in found:  # every thread is checked before any is pruned
            await srv.authorize_thread(thread_id, "update")
            await _check_free(srv, thread_id)
        await (await srv.runtime.checkpointer()).aprune(found, strategy="keep_latest")
    return len(found)
