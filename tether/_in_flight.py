"""Record writes in flight: started by a node, landed before anything carries the answer on.

A recorded model's answer and a durable tool's result are written to the
record store before the run may move past them. In an async node the write
need not hold the node up: :func:`start` sends it on its way and the node goes
on with the answer while the write travels. The answer leaves the node only
through the saver, so the saver waits:

* a task's pending writes (``aput_writes``) wait for that task's writes in
  flight (:func:`settle_task`);
* a checkpoint (``aput``) waits for every write in flight of its thread
  (:func:`settle_thread`);
* the node's next recorded call waits for the node's earlier ones (the step
  layer calls :func:`settle_task`), so steps land in the order they happened.

A write that failed (e.g. another worker recorded the step first) makes each
of these raise it, so the task's writes and the next checkpoint are refused
and the answer is never saved. The failure is kept until a checkpoint of its
graph (or of a graph it is nested in) raised it, or the task's writes that
raised it were only an error or an interrupt (the task ended without its
answer): until then every write that could carry the answer on is refused,
even if a caller caught the first error.

This module sits at the bottom of the package (it imports nothing from
tether): the step layer and the savers that settle (``settles_records``:
PostgreSQL and Redis, and wrappers of them) both use it. Writes are keyed by thread
id, graph namespace and task id.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from langgraph._internal._constants import ERROR, INTERRUPT

__all__ = ["before_checkpoint", "before_task_writes", "settle_task", "settle_thread", "start"]


@dataclass
class _Writes:
    """One task's writes in flight, and those that failed."""

    graph_ns: str
    flying: list[asyncio.Future[Any]] = field(default_factory=list)
    failed: list[BaseException] = field(default_factory=list)


_lock = threading.Lock()
# thread id -> task id -> its writes
_threads: dict[str, dict[str, _Writes]] = {}


def start(thread_id: str, graph_ns: str, task_id: str, write: Coroutine[Any, Any, Any]) -> None:
    """Run ``write`` as a task of the running loop, to be awaited before the answer moves on."""
    future = asyncio.ensure_future(write)
    with _lock:
        tasks = _threads.setdefault(thread_id, {})
        tasks.setdefault(task_id, _Writes(graph_ns)).flying.append(future)
    future.add_done_callback(lambda done: _landed(thread_id, task_id, done))


def _landed(thread_id: str, task_id: str, future: asyncio.Future[Any]) -> None:
    """Forget a write that landed; keep the failure of one that did not."""
    error = None if future.cancelled() else future.exception()
    with _lock:
        writes = _threads.get(thread_id, {}).get(task_id)
        if writes is None:
            return
        if future in writes.flying:
            writes.flying.remove(future)
        if error is not None:
            writes.failed.append(error)
        _drop_if_empty(thread_id, task_id)


def _drop_if_empty(thread_id: str, task_id: str) -> None:
    tasks = _threads.get(thread_id, {})
    writes = tasks.get(task_id)
    if writes is not None and not writes.flying and not writes.failed:
        del tasks[task_id]
    if not tasks:
        _threads.pop(thread_id, None)


async def settle_task(thread_id: Any, task_id: str, *, ended_without_answer: bool = False) -> None:
    """Wait for the task's writes in flight; raise the first that failed.

    ``ended_without_answer``: the caller saves only the task's error or
    interrupt, so a failure raised here has done its work and is forgotten.
    """
    thread = str(thread_id)
    await _wait(_flying(thread, task_id))
    with _lock:
        writes = _threads.get(thread, {}).get(task_id)
        failure = writes.failed[0] if writes is not None and writes.failed else None
        if failure is not None and ended_without_answer:
            writes.failed.clear()  # type: ignore[union-attr]
            _drop_if_empty(thread, task_id)
    if failure is not None:
        raise failure


async def settle_thread(thread_id: Any, graph_ns: str) -> None:
    """Wait for every write in flight of the thread; raise the first that failed.

    Called before a checkpoint of the graph at ``graph_ns`` is saved; the
    failures of that graph's tasks and of its subgraphs' are forgotten once
    raised here (a subgraph's checkpoint never forgets its parent's).
    """
    thread = str(thread_id)
    await _wait(_flying(thread))
    with _lock:
        tasks = _threads.get(thread, {})
        failures = [(task, w) for task, w in tasks.items() if w.failed]
        failure = failures[0][1].failed[0] if failures else None
        for task, writes in failures:
            if _within(writes.graph_ns, graph_ns):
                writes.failed.clear()
                _drop_if_empty(thread, task)
    if failure is not None:
        raise failure


def _within(ns: str, graph_ns: str) -> bool:
    """Whether ``ns`` is the graph at ``graph_ns`` or one of its subgraphs."""
    return not graph_ns or ns == graph_ns or ns.startswith(graph_ns + "|")


def _flying(thread: str, task_id: str | None = None) -> list[asyncio.Future[Any]]:
    """The thread's writes in flight (only ``task_id``'s, if given)."""
    with _lock:
        return [
            future
            for task, writes in _threads.get(thread, {}).items()
            if task_id is None or task == task_id
            for future in writes.flying
        ]


async def _wait(futures: list[asyncio.Future[Any]]) -> None:
    """Wait until each write landed or failed (its failure is kept by :func:`_landed`).

    A write started on another event loop is awaited on its own loop.
    """
    loop = asyncio.get_running_loop()
    for future in futures:
        if future.get_loop() is loop:
            await asyncio.wait([future])
        else:
            await asyncio.wrap_future(
                asyncio.run_coroutine_threadsafe(_done(future), future.get_loop())
            )


async def _done(future: asyncio.Future[Any]) -> None:
    await asyncio.wait([future])


async def before_task_writes(config: Any, writes: Any, task_id: str) -> None:
    """What a saver's ``aput_writes`` calls first: :func:`settle_task` for the task."""
    without_answer = bool(writes) and all(channel in (ERROR, INTERRUPT) for channel, _ in writes)
    await settle_task(
        config["configurable"]["thread_id"], task_id, ended_without_answer=without_answer
    )


async def before_checkpoint(config: Any) -> None:
    """What a saver's ``aput`` calls first: :func:`settle_thread` for the checkpoint's graph."""
    configurable = config["configurable"]
    await settle_thread(configurable["thread_id"], str(configurable.get("checkpoint_ns") or ""))
