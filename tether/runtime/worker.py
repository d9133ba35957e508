"""A worker process: claims runs, executes them under leases, hands them back on SIGTERM.

One asyncio loop per process does everything:

* the **claim loop** claims pending runs whenever a slot is free and a
  ``runs`` notification arrives (or every ``lease/4`` seconds), and takes over
  runs whose lease expired. A claim that returns fewer runs than there are free
  slots is not repeated until the next notification: every write that makes a
  run claimable signals ``runs``;
* the **heartbeat** extends the leases of every held run in one statement every
  ``lease/4`` seconds. A run missing from its answer was taken over: its guard
  is marked lost, so it stops at its next boundary and writes nothing more. The
  answer also carries cancel requests, a fallback for a missed notification;
* each held run executes in its own task (:class:`~tether.runtime.execution.Execution`),
  at most ``concurrency`` at a time. A run that stops at an interrupt ends its
  task: a suspended run holds nothing in the worker.

On the first SIGTERM (or :meth:`Worker.stop`) the worker stops claiming, each
held run hands back at its next superstep boundary, and after
``shutdown_grace`` seconds whatever still runs is cancelled and handed back
(its recorded steps replay on the next worker). A second signal skips the grace.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.boundaries import Fence
from tether.checkpointing import ENV_KEYS, drop_fence, hold_fence, innermost, open_checkpointer
from tether.runtime.context import RunContext
from tether.runtime.errors import FenceLostError
from tether.runtime.execution import Execution
from tether.runtime.graph_store import SharedStore
from tether.runtime.ids import new_worker_id, system_assistant_id
from tether.runtime.notify import Notifier, PostgresNotifier, SqliteNotifier
from tether.runtime.project import Project
from tether.runtime.saver import TENANT_KEY, RunSaver
from tether.runtime.store import open_run_store
from tether.runtime.store.base import Claim, RunStore, WorkerInfo
from tether.runtime.store.transient import is_transient, log_failure
from tether.runtime.webhooks import WebhookSender

if TYPE_CHECKING:
    from tether.runtime.scheduler import Retention

__all__ = ["Worker", "checkpointer_options", "notifier_for", "register_graphs"]

log = logging.getLogger("tether.runtime")

SEARCHABLE = (TENANT_KEY, "tether_input", "tether_fence", "tether_worker")
_CLAIM_GRACE_S = 1.0  # after a stop, how long a claim (or unregistering) in flight may take


def notifier_for(url: str, store: RunStore) -> Notifier:
    """The notifier matching the run store's database."""
    if store.dialect == "postgres":
        return PostgresNotifier(url)
    return SqliteNotifier(_sqlite_path(url))


async def register_graphs(store: RunStore, graph_ids: Sequence[str]) -> None:
    """Create the shared (system) assistant of each graph, as LangGraph's server does."""
    for graph_id in graph_ids:
        await store.put_assistant(
            graph_id,
            assistant_id=system_assistant_id(graph_id),
            name=graph_id,
            metadata={"created_by": "system"},
            if_exists="do_nothing",
        )


def checkpointer_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` plus, when encryption will be on, the metadata keys kept in clear.

    The runtime reads ``tether_input`` (and the tenant stamp) from checkpoint
    metadata; under encryption those keys must stay searchable.
    """
    encryption = options.get("encryption")
    if encryption is False or (encryption is None and not os.environ.get(ENV_KEYS)):
        return dict(options)
    return {"searchable_metadata": SEARCHABLE, **options}


def _sqlite_path(url: str) -> str:
    prefix = "sqlite:///"
    return url[len(prefix) :] if url.startswith(prefix) else url


class Worker:
    """Runs the graphs of one ``langgraph.json`` project from a run store.

    Args:
        url: The run store (``postgresql://…`` or ``sqlite:///path``).
        project: ``langgraph.json`` (path) or a loaded :class:`Project`.
        checkpoints_url: Where checkpoints live (default: ``url``).
        concurrency: Runs executed at once.
        lease: Seconds a claim stays valid without a heartbeat.
        shutdown_grace: Seconds held runs get to reach a boundary on SIGTERM.
        step_timeout: Per-step timeout (seconds) for runs created without one.
        worker_id: Defaults to ``host:pid:random``.
        scheduler: Campaign to lead the scheduler (:class:`~tether.runtime.scheduler.Scheduler`:
            approval expiry, deadlines, crons, cleanup); one worker leads at a time.
        retention: The scheduler's retention job, ``async retention(runtime, now)``
            (e.g. :func:`tether.retention.scheduled_sweep`), run while this worker leads.
        checkpointer_options: Passed to :func:`tether.open_checkpointer`
            (``encryption``, pool sizes, ``key_prefix``, …).
    """

    def __init__(
        self,
        url: str,
        project: str | Path | Project,
        *,
        checkpoints_url: str | None = None,
        concurrency: int = 10,
        lease: float = 2.0,
        shutdown_grace: float = 30.0,
        step_timeout: float | None = None,
        worker_id: str | None = None,
        scheduler: bool = True,
        retention: Retention | None = None,
        **checkpointer_options: Any,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {concurrency}")
        if step_timeout is not None and not step_timeout > 0:
            raise ValueError(f"step_timeout must be more than 0 seconds, not {step_timeout}")
        if lease <= 0.2:
            raise ValueError(f"lease must be more than 0.2 seconds, not {lease}")
        self.url = url
        self.project = project if isinstance(project, Project) else Project.load(project)
        self.checkpoints_url = checkpoints_url or url
        self.concurrency = concurrency
        self.lease = lease
        self.margin = min(0.5, lease / 4)
        self.shutdown_grace = shutdown_grace
        self.step_timeout = step_timeout
        self.worker_id = worker_id or new_worker_id()
        self.checkpointer_options = checkpointer_options
        self.scheduler = scheduler
        self.retention = retention
        self._scheduler_stop = asyncio.Event()
        self._held: dict[str, tuple[RunContext, asyncio.Task[Any]]] = {}
        self._stopping = asyncio.Event()
        self._hard_stop = asyncio.Event()
        self._slot_free: asyncio.Event | None = None
        self.claimed = 0
        self.finished = 0
        self.claim_queries = 0  # claims asked of the store (pending runs; each may find none)

    # -- lifecycle -----------------------------------------------------------------------

    def stop(self, *, grace: bool = True) -> None:
        """Stop claiming and hand held runs back (at once when ``grace`` is False)."""
        if self._stopping.is_set() or not grace:
            self._hard_stop.set()
        self._stopping.set()
        for ctx, _ in self._held.values():
            ctx.draining = True

    async def run(self, *, handle_signals: bool = False) -> None:
        """Work until :meth:`stop` (or SIGTERM/SIGINT with ``handle_signals``)."""
        self.project.apply_env()
        if handle_signals:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.stop)
        async with (
            open_run_store(
                self.url, encryption=self.checkpointer_options.get("encryption")
            ) as store,
            open_checkpointer(
                self.checkpoints_url, **checkpointer_options(self.checkpointer_options)
            ) as base,
        ):
            await self._outlast("setup", store.setup)
            notifier = notifier_for(self.url, store)
            await notifier.start()
            saver = RunSaver(base)
            graph_store = SharedStore(self.url)  # opened when a graph first uses it
            webhooks = WebhookSender(self.project.webhooks)
            execution = Execution(
                store,
                self.project,
                saver,
                self.worker_id,
                graph_store=graph_store,
                webhooks=webhooks,
            )
            info = WorkerInfo(
                self.worker_id,
                socket.gethostname(),
                os.getpid(),
                list(self.project.graph_ids),
                self.concurrency,
            )
            await self._outlast(
                "registration",
                lambda: register_graphs(store, self.project.graph_ids),
                lambda: store.register_worker(info),
            )
            log.info(
                "worker %s: graphs %s, lease %.1fs, concurrency %d",
                self.worker_id,
                ", ".join(self.project.graph_ids),
                self.lease,
                self.concurrency,
            )
            heartbeat = asyncio.create_task(self._heartbeat_loop(store, notifier))
            scheduling = (
                asyncio.create_task(self._schedule())
                if self.scheduler and not _scoped(base, self.worker_id)
                else None
            )
            try:
                await self._claim_loop(store, notifier, execution)
                await self._drain()
            finally:
                heartbeat.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await heartbeat
                if scheduling is not None:  # let the tick under way end: no cancel mid-write
                    self._scheduler_stop.set()
                    with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                        await asyncio.wait_for(scheduling, self.shutdown_grace)
                await webhooks.aclose(self.shutdown_grace)
                await notifier.aclose()
                await graph_store.aclose()
                with contextlib.suppress(Exception):  # a store that does not answer: go
                    await asyncio.wait_for(store.unregister_worker(self.worker_id), _CLAIM_GRACE_S)

    # -- claiming -----------------------------------------------------------------------

    async def _claim_loop(self, store: RunStore, notifier: Notifier, execution: Execution) -> None:
        graphs = list(self.project.graph_ids)
        poll = self.lease / 4
        last_expired = 0.0
        while not self._stopping.is_set():
            async with notifier.subscribe("runs") as wake:
                free = self.concurrency - len(self._held)
                expired = time.monotonic() - last_expired >= poll
                if expired:
                    last_expired = time.monotonic()
                try:
                    claims = await self._unless_stopped(
                        self._claim(store, graphs, free, expired=expired)
                    )
                except Exception as exc:
                    # A claim that failed claimed nothing, or (its answer lost) a lease
                    # that expires unheld and is taken over: asking again is safe.
                    if not is_transient(exc):
                        raise
                    log.warning("worker %s: claim failed, retrying: %s", self.worker_id, exc)
                    await self._pause(poll)
                    continue
                sent = time.monotonic()
                for claim in claims:
                    self._start(claim, sent, store, execution, notifier)
                # Fewer claimed than asked for: nothing else is claimable now. A run
                # that becomes so signals ``runs``, which this subscription caught.
                stop = asyncio.ensure_future(self._stopping.wait())
                woken = asyncio.ensure_future(wake.wait(poll))
                await asyncio.wait({stop, woken}, return_when=asyncio.FIRST_COMPLETED)
                stop.cancel()
                woken.cancel()

    async def _claim(
        self, store: RunStore, graphs: list[str], free: int, *, expired: bool
    ) -> list[Claim]:
        """Claim up to ``free`` pending runs, then (with ``expired``) runs whose lease expired."""
        if free <= 0:
            return []
        self.claim_queries += 1
        claims = await store.claim(self.worker_id, graphs=graphs, limit=free, lease=self.lease)
        free -= len(claims)
        if free > 0 and expired:
            claims += await store.claim_expired(
                self.worker_id, graphs=graphs, limit=free, lease=self.lease
            )
        return claims

    async def _unless_stopped(self, claiming: Awaitable[list[Claim]]) -> list[Claim]:
        """``claiming``'s claims; if the worker is stopped first, it gets a second to end,
        and is then abandoned (a store that does not answer must not hold up a SIGTERM):
        a run it did claim is taken over when the lease it never heard of expires."""
        task = asyncio.ensure_future(claiming)
        stop = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
            if not task.done():
                await asyncio.wait({task}, timeout=_CLAIM_GRACE_S)
        finally:
            stop.cancel()
            if not task.done():  # abandoned (or this wait was cancelled): no orphan task
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        return task.result() if not task.cancelled() else []

    def _start(
        self,
        claim: Claim,
        confirmed_at: float,
        store: RunStore,
        execution: Execution,
        notifier: Notifier,
    ) -> None:
        run = claim.run
        deadline = None
        if run.deadline_at is not None:
            left = (run.deadline_at - datetime.now(UTC)).total_seconds()
            deadline = time.monotonic() + left
        ctx = RunContext(
            fence=Fence(run.run_id, run.thread_id, run.fence, claim.secret),
            tenant=run.tenant_id,
            worker_id=self.worker_id,
            lease=self.lease,
            margin=self.margin,
            confirmed_at=confirmed_at,
            # Checkpoints and records beside the run store check the fence in
            # their own transactions; elsewhere RunSaver verifies before writing.
            same_database=self.checkpoints_url == self.url,
            verifier=lambda fence: store.verify(fence.run_id, fence.token),
            deadline=deadline,
            step_timeout=self.step_timeout if run.step_timeout_s is None else run.step_timeout_s,
        )
        if run.cancel_action is not None:
            ctx.request_cancel(run.cancel_action, run.cancel_reason or "")
        ctx.draining = self._stopping.is_set()
        self.claimed += 1
        log.info(
            "worker %s: claimed run %s (%s, attempt %d, fence %d)%s",
            self.worker_id,
            run.run_id,
            run.graph_id,
            run.attempt,
            run.fence,
            f", taken over from {claim.took_over_from}" if claim.took_over_from else "",
        )

        async def execute() -> None:
            try:
                if ctx.same_database:
                    await hold_fence(execution.saver, ctx.fence)
                result = await execution.run(claim, ctx)
                if result is not None:
                    log.info("worker %s: run %s is %s", self.worker_id, run.run_id, result.status)
            except Exception:
                log.exception("worker %s: run %s failed in the worker", self.worker_id, run.run_id)
            finally:
                if ctx.same_database:
                    with contextlib.suppress(Exception):
                        await drop_fence(execution.saver, ctx.fence)
                full = len(self._held) >= self.concurrency
                self._held.pop(run.run_id, None)
                self.finished += 1
                if full:  # a slot is free: claim what waited for one
                    notifier.publish_local("runs")

        task = asyncio.create_task(execute(), name=f"tether-run-{run.run_id}")
        self._held[run.run_id] = (ctx, task)

    # -- scheduler ------------------------------------------------------------------------

    async def _schedule(self) -> None:
        """Campaign for the scheduler (and tick while leading) until the worker stops."""
        from tether.runtime.api import Runtime
        from tether.runtime.scheduler import Scheduler

        try:
            async with Runtime(
                self.url, checkpoints_url=self.checkpoints_url, **self.checkpointer_options
            ) as runtime:
                scheduler = Scheduler(
                    runtime, worker_ttl=max(60.0, 10 * self.lease), retention=self.retention
                )
                running = asyncio.ensure_future(scheduler.run())
                stop = asyncio.ensure_future(self._scheduler_stop.wait())
                try:
                    await asyncio.wait({running, stop}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    stop.cancel()
                    scheduler.stop()
                await running  # ends after the tick under way, and resigns
        except Exception:  # the worker goes on running its runs
            log.exception("worker %s: the scheduler stopped", self.worker_id)

    # -- heartbeats -----------------------------------------------------------------------

    async def _heartbeat_loop(self, store: RunStore, notifier: Notifier) -> None:
        beat = time.monotonic()
        async with notifier.subscribe("control") as control:
            while True:
                await control.wait(self.lease / 4)
                if not self._held and time.monotonic() - beat < self.lease:
                    continue  # an idle worker refreshes its row once a lease
                beat = time.monotonic()
                sent = time.monotonic()
                # Only runs held when the heartbeat is sent can be judged by its answer: a run
                # claimed while it is in flight may not be in the rows it saw.
                judged = set(self._held)
                try:
                    confirmed = await store.heartbeat(self.worker_id, lease=self.lease)
                except Exception as exc:
                    log_failure(log, exc, "worker %s: heartbeat failed", self.worker_id)
                    continue
                took = time.monotonic() - sent
                if took > self.lease / 2:
                    log.warning(
                        "worker %s: heartbeat took %.2fs (lease %.1fs)",
                        self.worker_id,
                        took,
                        self.lease,
                    )
                by_run = {held.run_id: held for held in confirmed}
                for run_id, (ctx, _task) in list(self._held.items()):
                    if run_id not in judged:
                        continue
                    held = by_run.get(run_id)
                    if held is None or held.fence != ctx.fence.token:
                        if not ctx.lost:
                            log.warning("worker %s: lease lost for run %s", self.worker_id, run_id)
                        ctx.lost = True
                        continue
                    ctx.confirm(sent)
                    if held.cancel_action is not None:
                        ctx.request_cancel(held.cancel_action, held.cancel_reason or "")

    async def _outlast(self, what: str, *calls: Callable[[], Awaitable[object]]) -> None:
        """Make ``calls`` in order, waiting out transient store errors (SQLite's write
        lock held past its busy timeout, PostgreSQL restarting) until :meth:`stop`."""
        pause = 0.1
        for call in calls:
            while True:
                try:
                    await call()
                    break
                except Exception as exc:
                    if not is_transient(exc) or self._stopping.is_set():
                        raise
                    log.warning("worker %s: %s failed, retrying: %s", self.worker_id, what, exc)
                    await self._pause(pause)
                    pause = min(pause * 2, self.lease)

    async def _pause(self, seconds: float) -> None:
        """Sleep ``seconds``, or less if the worker is stopped meanwhile."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    # -- shutdown -------------------------------------------------------------------------

    async def _drain(self) -> None:
        if not self._held:
            return
        log.info(
            "worker %s: draining %d runs (grace %.0fs)",
            self.worker_id,
            len(self._held),
            self.shutdown_grace,
        )
        tasks = [task for _, task in self._held.values()]
        hard = asyncio.ensure_future(self._hard_stop.wait())
        done = asyncio.ensure_future(asyncio.wait(tasks))
        await asyncio.wait(
            {hard, done}, timeout=self.shutdown_grace, return_when=asyncio.FIRST_COMPLETED
        )
        hard.cancel()
        if not done.done():
            for task in tasks:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError, FenceLostError):
                await asyncio.gather(*tasks, return_exceptions=True)
        done.cancel()


def _scoped(saver: Any, worker_id: str) -> bool:
    """Whether ``saver`` connects as a run-scoped worker role (``tether workers grant``).

    Such a role sees no thread outside the runs it holds, and the scheduler
    reads across threads (approvals, temporary threads): it leaves the
    campaign to a worker of an unrestricted role.
    """
    if not getattr(innermost(saver), "scoped", False):
        return False
    log.info(
        "worker %s: run-scoped database role; not campaigning for the scheduler "
        "(run one worker with the run store's own role for it)",
        worker_id,
    )
    return True
